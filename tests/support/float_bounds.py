"""Tolerances derived from float32 arithmetic, for tests that compare two training runs (docs/testing.md).

Two runs of the same update that sum in different orders (DeepSpeed ranks vs one process, AVX2 vs
AVX-512 vs scalar kernels) agree on each gradient entry only up to rounding, and Adam can amplify that
a hundred-thousand-fold: its first update is ``lr·g/(|g| + eps)``, whose slope in g is
``lr·eps/(|g| + eps)²``, up to ``lr/eps = 1e5`` at g = 0. An entry whose gradient cancels down to about
eps turns a rounding difference of 4e-11 into a weight difference of 2.3e-6 (the ZeRO-3 case in docs/testing.md: the tied
embedding's entry (583, 37), micro-batch gradients -6.9e-5, 3.4e-6, 6.6e-5, clipped sum -3.0e-9 =
0.3·eps, Adam's slope there 5.9e4), and the CPU's kernels decide which entries land there. So no single
bound on the largest weight difference holds on every CPU. What does hold, per entry:

1. :class:`GradientTerms` records, from hooks on the reference run, what each gradient entry adds up:
   ``Σ|terms|`` and how many terms.
2. :func:`noise_floor`: two float32 evaluations of a sum of N terms, in any two orders, agree to
   ``2·γ_N·Σ|terms|`` (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2; γ_N ≈ N·u).
3. :func:`adam_tolerance`: Adam's update evaluated at the corners of ``g ± floor`` around the reference
   gradient, plus the rounding of the step itself.

:data:`RECOMPUTE_ATOL` is the one tolerance for "the same model, other shapes" (sampler vs full forward).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn

U = torch.finfo(torch.float32).eps / 2
"""Unit roundoff of float32 (2^-24 ≈ 6e-8): one correctly rounded operation is within relative U."""

U_BF16 = torch.finfo(torch.bfloat16).eps / 2
"""Unit roundoff of bfloat16 (2^-8 / 2 = 2^-9 ≈ 2e-3)."""

RECOMPUTE_ATOL = 1e-4
"""How far a log-prob (or w⁺/w⁻ logit) from the sampler (KV-cached decoding: other shapes at every matmul)
may lie from a full forward pass: the tiny model's path to a logit is ~20 float32 reductions (per layer q,
k, v, QKᵀ, softmax, AV, o, gate, up, down; two layers; the head), each of at most K = 128 terms. Rounding
errors of a K-term sum are a random walk (Higham & Mary, 2019): within λ·√K·u of its Σ|terms| except with
probability ~exp(-λ²/2); λ = 10 (1e-22): 10·√128·6e-8 ≈ 7e-6 per stage, ~20 stages ≈ 1.4e-4 relative on
logits of magnitude <= 1, halved for unit-scale ones: 1e-4. (Measured <= 1e-6 on AVX-512, AVX2, scalar.)"""


class GradientTerms:
    """Per parameter entry, over the backward passes since :meth:`reset`: the sum of the absolute values of
    the products its gradient adds up (``abs``), their number (``count``, per parameter) and the unclipped
    gradient (``raw``, float64)."""

    def __init__(self, model: nn.Module, params: dict[str, nn.Parameter]) -> None:
        """Hooks on every Linear, Embedding and RMSNorm of ``model``: a Linear weight's gradient is
        ``Σ_positions G·X`` (so Σ|terms| = |G|ᵀ|X|), its bias' ``Σ G``, an embedding row's ``Σ G`` over the
        positions holding that token, an RMSNorm weight's ``Σ G·x̂`` (x̂ = output / weight). A weight used
        several times (the tied embedding / LM head: the input embedding and each LM-head application)
        gets every use's terms."""
        self.params, self.handles = params, []
        self._names = {id(p): n for n, p in params.items()}
        self.reset()
        for module in model.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)) or hasattr(module, "variance_epsilon"):
                self.handles.append(module.register_forward_hook(self._forward_hook))
        for n, p in params.items():
            self.handles.append(p.register_hook(self._raw_hook(n)))

    def reset(self) -> None:
        self.abs = {n: torch.zeros(p.shape, dtype=torch.float64) for n, p in self.params.items()}
        self.raw = {n: torch.zeros(p.shape, dtype=torch.float64) for n, p in self.params.items()}
        self.count = dict.fromkeys(self.params, 0)

    def remove(self) -> None:
        for h in self.handles:
            h.remove()

    def _add(self, param: nn.Parameter, absolute: torch.Tensor, rows: int) -> None:
        n = self._names[id(param)]
        self.abs[n] += absolute
        self.count[n] += rows

    def _raw_hook(self, n: str):
        def hook(grad: torch.Tensor) -> None:
            self.raw[n] += grad.detach().double()

        return hook

    def _forward_hook(self, module: nn.Module, inputs: Any, output: torch.Tensor) -> None:
        if not (torch.is_grad_enabled() and output.requires_grad):
            return
        x, out = inputs[0].detach(), output.detach()

        def on_grad(grad: torch.Tensor) -> None:
            G = grad.detach().double().reshape(-1, grad.shape[-1])
            if isinstance(module, nn.Linear):
                X = x.double().reshape(-1, x.shape[-1])
                self._add(module.weight, G.abs().T @ X.abs(), G.shape[0])
                if module.bias is not None:
                    self._add(module.bias, G.abs().sum(0), G.shape[0])
            elif isinstance(module, nn.Embedding):
                rows = torch.zeros(module.weight.shape, dtype=torch.float64).index_add_(0, x.flatten(), G.abs())
                self._add(module.weight, rows, G.shape[0])
            else:  # RMSNorm: out = weight · x̂
                xhat = out.double().reshape(-1, out.shape[-1]) / module.weight.detach().double()
                self._add(module.weight, (G * xhat).abs().sum(0), G.shape[0])

        output.register_hook(on_grad)

    def clip_coefficient(self, clipped: dict[str, torch.Tensor]) -> float:
        """The coefficient the reference run scaled its gradients by: ‖clipped‖ / ‖raw‖."""
        raw = sum(float((x**2).sum()) for x in self.raw.values()) ** 0.5
        return (sum(float((x**2).sum()) for x in clipped.values()) ** 0.5) / raw

    def noise_floor(self, n: str, g: torch.Tensor, clip: float, rho: float) -> torch.Tensor:
        """How far two float32 computations of the clipped gradient entries ``g`` of parameter ``n`` can differ.

        Each entry is a sum of N products (one per position of every micro-batch, per use of the weight),
        which the runs add in other orders: micro-batches dealt over ranks and reduced, kernels that block
        their reductions differently (AVX2 / AVX-512 / scalar), ZeRO-3's module hooks reordering the
        backward graph (so the tied weight sums its uses in another order). Any two orders agree to
        ``2·γ_N·Σ|terms|`` with γ_N ≈ N·u; the factors of each term may themselves differ by a few
        roundings per layer they came through (forward and backward through two layers, or another
        micro-batch composition): +64 roundings. ``clip`` scales it all. ``rho`` is the relative
        difference of the two runs' clip coefficients (0 when neither clips: then both are exactly 1)."""
        floor = clip * 2 * U * (self.count[n] + 64) * self.abs[n] + rho * g.abs()
        assert bool(((floor > 0) | (g == 0)).all()), n  # the hooks saw every term of every entry
        return floor


def clip_ratio(clip: float, other_norm: float, max_norm: float) -> float:
    """The relative difference of the other run's clip coefficient (from its reported global norm, as
    ``clip_grad_norm_`` / DeepSpeed compute it: ``max_norm / (norm + 1e-6)``, at most 1) and ``clip``,
    plus 8 roundings of the coefficients themselves; 0 when neither run clipped."""
    other = min(1.0, max_norm / (other_norm + 1e-6))
    return abs(other / clip - 1) + 8 * U if clip < 1 - 1e-6 or other < 1 else 0.0


def adam_updates(gradients: list[torch.Tensor], group: dict) -> torch.Tensor:
    """AdamW's update at step ``len(gradients)`` from zero moments (torch.optim.AdamW's formula), in float64."""
    (b1, b2), t = group["betas"], len(gradients)
    m = sum((1 - b1) * b1 ** (t - 1 - i) * g for i, g in enumerate(gradients))
    v = sum((1 - b2) * b2 ** (t - 1 - i) * g * g for i, g in enumerate(gradients))
    return group["lr"] * (m / (1 - b1**t)) / ((v / (1 - b2**t)).sqrt() + group["eps"])


def adam_tolerance(
    steps: list[dict], group: dict, step: int, weights: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Per entry, how far another run's weights after optimizer step ``step`` (1-based) may lie from the
    reference ``weights``, given the weights before that step are the same in both runs.

    ``steps[t][name]`` holds the reference's clipped gradient ``g`` and its :meth:`~GradientTerms.noise_floor`
    ``floor`` at step t + 1. The bound: Adam's update evaluated at every corner of the box ``g ± floor`` (every
    step so far: earlier gradients enter through Adam's moments) minus the update at g, the largest (Adam is
    smooth and near-linear on so small a box, so the extremes are at corners); plus the float32 rounding of the
    step itself: the update's ~8 roundings in each run (16·u·lr; |update| <= lr), and adding it to w once per
    run, which puts results that differ by d at most d + one float32 spacing at |w| + lr apart."""
    assert group["weight_decay"] == 0 and not group["amsgrad"] and not group.get("maximize")
    history = steps[:step]
    out = {}
    for n, w in weights.items():
        if n not in history[0]:
            continue
        gs = [r[n]["g"] for r in history]
        base = adam_updates(gs, group)
        worst = torch.zeros_like(base)
        for signs in itertools.product((-1, 1), repeat=len(history)):
            moved = adam_updates([g + s * r[n]["floor"] for g, s, r in zip(gs, signs, history)], group)
            worst = torch.maximum(worst, (moved - base).abs())
        _, exponent = torch.frexp(w.double().abs() + group["lr"])  # |x| in [2^(e-1), 2^e): spacing 2^(e-24)
        out[n] = worst + 16 * U * group["lr"] + torch.pow(2.0, exponent - 24).double()
    return out


def assert_bound_is_a_test(tolerance: dict[str, torch.Tensor], lr: float) -> None:
    """The bound must still catch a wrong update (a micro-batch dropped, doubled or mis-weighted moves most
    entries by a good part of an Adam step, ~lr): only entries whose gradient lies within its noise floor of
    zero may be loose, and 99% of all entries must be held to a hundredth of lr. (A dropped micro-batch puts
    98% of the entries outside the bound.)"""
    held = sum(int((t < 1e-2 * lr).sum()) for t in tolerance.values())
    total = sum(t.numel() for t in tolerance.values())
    assert held >= 0.99 * total, f"only {held} of {total} entries held to lr/100"


def excess(
    a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tolerance: dict[str, torch.Tensor]
) -> tuple[float, str]:
    """The largest ``|a - b| / tolerance`` over the entries of the tolerated tensors, and where (<= 1: within)."""
    worst = (0.0, "")
    for n, tol in tolerance.items():
        worst = max(worst, (float(((a[n].double() - b[n].double()).abs() / tol).max()), n))
    return worst
