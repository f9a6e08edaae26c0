"""An :class:`~agents.base.Agent` over any HF causal LM: chat-templated prompts, batched sampling.

:class:`LLMAgent` is both the evaluation agent (``act``: texts for the env) and the trainer's rollout
policy (``act_detailed``: each turn's :class:`~agents.generation.base.GenerationOutput`, the prompt and
response token ids, log-probs and truncation flags). It is given the *active* envs only, so finished
episodes are never prompted.

Sampling seeds: with a ``seed`` (or ``params.seed``) call *k* samples with ``seed + k``, so a run is
reproducible while successive calls draw fresh randomness; without one, torch's global RNG is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.constraint import CONSTRAINTS, ConstraintBuilder
from agents.generation.base import GenerationOutput, GenerationParams, Generator
from agents.policy import PolicyModel

__all__ = ["LLMAgent"]


class LLMAgent:
    """Samples one response per active env from ``policy`` through ``generator``."""

    def __init__(
        self,
        policy: PolicyModel,
        generator: Generator | None = None,
        params: GenerationParams | None = None,
        *,
        name: str | None = None,
        seed: int | None = None,
        constrain: str = "none",
    ):
        if constrain not in CONSTRAINTS:
            raise ValueError(f"unknown constraint {constrain!r}; valid choices: {list(CONSTRAINTS)}")
        if generator is None:
            from agents.generation.hf import HFGenerator

            generator = HFGenerator(policy)
        self.policy, self.generator = policy, generator
        self.params = params or GenerationParams()
        self.name = name or str(getattr(policy.model.config, "name_or_path", "") or "llm")
        self.seed = seed if seed is not None else self.params.seed
        self.constrain = constrain
        """``admissible``: actions restricted to each turn's ``info["admissible_actions"]`` (:mod:`agents.constraint`)."""
        self._constraints = ConstraintBuilder(policy.tokenizer) if constrain == "admissible" else None
        self._calls = 0

    @property
    def prompt_budget(self) -> int:
        """Prompt tokens allowed: the policy's budget, and room left for a full response in the context."""
        return min(self.policy.max_prompt_tokens, self.policy.context_length - self.params.max_new_tokens)

    def reset(self, num_envs: int) -> None:
        """A new batch of episodes: the prompt carries each turn's history; the sampler forgets earlier responses."""
        self.generator.reset()

    def state_dict(self) -> dict[str, int]:
        """The sampling position (calls made so far): checkpoint it so a resumed run draws the same samples."""
        return {"calls": self._calls}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._calls = int(state["calls"])

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [turn.text for turn in self.act_detailed(observations, infos)]

    def act_detailed(
        self, observations: Sequence[str], infos: Sequence[dict[str, Any]] | None = None
    ) -> list[GenerationOutput]:
        """One batched generation over the active envs' prompts: per env, its prompt and the sampled response."""
        if not observations:
            return []
        prompts = self.policy.encode_prompts(observations, max_tokens=self.prompt_budget)
        params = self.params if self.seed is None else self.params.with_seed(self.seed + self._calls)
        self._calls += 1
        if self._constraints is None:
            outputs = self.generator.generate(prompts.token_ids, params)
        else:
            infos = infos if infos is not None else [{}] * len(observations)
            constraints = [self._constraints.build(info.get("admissible_actions")) for info in infos]
            outputs = self.generator.generate(prompts.token_ids, params, constraints)
        for out, cut in zip(outputs, prompts.truncated):
            out.prompt_truncated = cut
        return outputs
