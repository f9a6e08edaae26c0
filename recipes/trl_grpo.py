"""GRPO with TRL's multi-turn API on a sapo_gym env, in process or served by ``sapo-gym env serve``.

TRL 1.16.0 (the ``trl`` extra) trains agents with ``GRPOTrainer(environment_factory=...)``: the factory builds
one environment object per rollout; TRL calls its ``reset(**dataset_row)`` and appends the string it returns to
the last user message of the row's prompt, renders the prompt with the object's public methods as the tools, and
runs the tool calls the model writes (parsed with the tokenizer's response template) until the model answers
without one, ``max_tool_calling_iterations`` is reached or ``max_completion_length`` is spent. A ``get_reward()``
method makes the environment the reward source (logged as ``rewards/<class name>/mean``). This script fits a
sapo_gym env to it under protocol ``tool-call-v1``:

* the one tool is the env's own, ``take_action(command)`` (:mod:`sapo_gym.tools`): a call is sent to the env as
  the JSON call it parses, so the env counts format validity as it does for any agent;
* ``reset`` returns the env's first prompt, which under ``tool-call-v1`` asks for a ``take_action`` call;
* a call answers with :func:`sapo_gym.messages.tool_result` (the new observation and the admissible actions),
  plus ``The episode is over.`` on the last step; a call after that is refused (TRL counts a tool failure);
* ``get_reward`` is the episode's return (the sum of the env's rewards);
* every env (one server session each under ``--url``) is closed when training ends or fails.

CPU settings throughout (fp32, no vLLM, small batches). With the offline tiny model of ``recipes/trl_tiny.py``::

    python recipes/trl_tiny.py --out /tmp/tiny-tools --env sapo/Vault-v0 --env-arg code_length=1 --env-arg num_buttons=2
    python recipes/trl_grpo.py --model /tmp/tiny-tools --env sapo/Vault-v0 --env-arg code_length=1 --env-arg num_buttons=2
    sapo-gym env serve sapo/Vault-v0 --host 127.0.0.1 --port 8765 --env-arg protocol=tool-call-v1 \\
        --env-arg code_length=1 --env-arg num_buttons=2 &
    python recipes/trl_grpo.py --model /tmp/tiny-tools --env sapo/Vault-v0 --url http://127.0.0.1:8765

A real tool-calling model works the same way (``--model Qwen/Qwen2.5-0.5B-Instruct``, downloaded by
``transformers``); its chat template must render tool calls (TRL checks it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import sapo_gym  # noqa: F401  (registers the ids)
from sapo_gym.messages import tool_result
from sapo_gym.registration import parse_env_args
from sapo_gym.tools import ARGUMENT, TOOL_NAME

PROTOCOL = "tool-call-v1"
EPISODE_OVER = "\n\nThe episode is over."


def env_maker(env_id: str, env_args: dict[str, Any], url: str | None = None) -> Callable[[], gym.Env]:
    """What builds one env: ``gym.make(env_id, protocol="tool-call-v1", **env_args)``, or a session of the server at
    ``url`` (``sapo/Remote-v0``; the server's ``--env-arg`` set the env's arguments, ``protocol=tool-call-v1`` among them)."""
    if url is None:
        return lambda: gym.make(env_id, protocol=PROTOCOL, **env_args)

    def remote() -> gym.Env:
        env = gym.make("sapo/Remote-v0", url=url, env_id=env_id)
        protocol = env.unwrapped.spec_fields()["protocol"]
        if protocol != PROTOCOL:
            env.close()
            raise ValueError(f"{url} plays protocol {protocol!r}: serve it with --env-arg protocol={PROTOCOL}")
        return env

    return remote


class SapoToolEnv:
    """One rollout's environment for ``GRPOTrainer(environment_factory=...)`` (see the module docstring).

    Public methods become the model's tools, so everything but ``take_action`` (and TRL's ``reset`` and
    ``get_reward``) is private.
    """

    def __init__(self, make: Callable[[], gym.Env], episodes: list[dict[str, Any]] | None = None):
        self._env = make()
        self._episodes = episodes if episodes is not None else []
        self._task_index = -1
        self._return, self._steps, self._valid = 0.0, 0, 0
        self.done = False
        """Whether the episode has ended (terminated or truncated)."""
        self.info: dict[str, Any] = {}
        """The last ``info`` the env gave (its admissible actions, the parse of the last call...)."""

    def reset(self, task_index: int, **row: Any) -> str:
        """Start the episode of ``task_index`` (a dataset column); the first prompt, asking for a ``take_action`` call."""
        obs, self.info = self._env.reset(options={"task_index": int(task_index)})
        self._task_index = int(task_index)
        self._return, self._steps, self._valid, self.done = 0.0, 0, 0, False
        return obs

    def take_action(self, command: str) -> str:
        """Take one action in the environment. Call it exactly once per turn.

        Args:
            command: One of the admissible actions listed in the last message, written exactly as listed.
        """
        if self.done:
            raise ValueError("The episode is over: answer without calling a tool.")
        call = json.dumps({"name": TOOL_NAME, "arguments": {ARGUMENT: command}}, ensure_ascii=False)
        _, reward, terminated, truncated, self.info = self._env.step(call)
        self._return += float(reward)
        self._steps += 1
        self._valid += int(self.info["is_action_valid"])
        self.done = bool(terminated or truncated)
        return tool_result(self.info) + (EPISODE_OVER if self.done else "")

    def get_reward(self) -> float:
        """The episode's return (TRL calls it once per finished rollout); the episode is logged in ``episodes``."""
        self._episodes.append(
            {
                "task_index": self._task_index,
                "return": self._return,
                "steps": self._steps,
                "valid_calls": self._valid,
                "done": self.done,
                "won": bool(self.info.get("won")),
            }
        )
        return self._return

    def _close(self) -> None:
        self._env.close()


class EnvPool:
    """The ``environment_factory``: builds :class:`SapoToolEnv` objects, logs their episodes, closes them all."""

    def __init__(self, make: Callable[[], gym.Env]):
        self.make = make
        self.envs: list[SapoToolEnv] = []
        self.episodes: list[dict[str, Any]] = []
        """Every scored rollout, in TRL's scoring order (a training step scores ``batch_size`` of them)."""

    def __call__(self) -> SapoToolEnv:
        env = SapoToolEnv(self.make, self.episodes)
        self.envs.append(env)
        return env

    def close(self) -> None:
        """Close every env (a served env's session with it)."""
        while self.envs:
            self.envs.pop()._close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", required=True, help="a local model directory (recipes/trl_tiny.py) or a hub id")
    p.add_argument("--env", default="sapo/Vault-v0", help="the env id (the served one under --url)")
    p.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="K=V",
        help="gym.make argument (in process; a served env has the server's)",
    )
    p.add_argument("--url", default=None, help="a `sapo-gym env serve` server: train against it instead of in process")
    p.add_argument("--max-steps", type=int, default=2, help="optimizer steps")
    p.add_argument("--batch-size", type=int, default=8, help="rollouts per optimizer step")
    p.add_argument("--num-generations", type=int, default=4, help="rollouts per prompt (the GRPO group)")
    p.add_argument(
        "--max-completion-length", type=int, default=512, help="tokens of a whole rollout, tool results included"
    )
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default="runs/trl-grpo")
    p.add_argument("--summary", default=None, help="write the run's summary (JSON) here")
    return p.parse_args(argv)


def grpo_config(args: argparse.Namespace, horizon: int | None) -> Any:
    """CPU settings: fp32, no vLLM, no reference model (beta 0), one generation per optimizer step."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=args.out_dir,
        use_cpu=True,
        bf16=False,
        seed=args.seed,
        learning_rate=args.lr,
        beta=0.0,
        max_steps=args.max_steps,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=1,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=horizon,
        temperature=args.temperature,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        dataloader_num_workers=0,
        use_vllm=False,
    )


def episode_facts(make: Callable[[], gym.Env]) -> tuple[int, int | None]:
    """(number of tasks, horizon) of the env ``make`` builds (the served env's under ``--url``)."""
    env = make()
    try:
        horizon = env.spec.max_episode_steps if env.spec is not None else None
        return len(env.unwrapped.task_ids), horizon or env.unwrapped.spec_fields().get("horizon")
    finally:
        env.close()


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Train; the summary: TRL's log per step, every scored episode, the env steps and valid calls."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from trl import GRPOTrainer

    from agents.policy import load_tokenizer  # AutoTokenizer, unless it re-tokenizes what tokenizer.json says

    if args.url and args.env_arg:
        raise SystemExit(
            "--env-arg sets an env made here; a served env has the server's (sapo-gym env serve --env-arg)"
        )
    make = env_maker(args.env, parse_env_args(args.env_arg), args.url)
    tasks, horizon = episode_facts(make)
    tokenizer = load_tokenizer(args.model)
    tokenizer.padding_side = "left"
    rows = max(tasks, args.batch_size * args.max_steps // args.num_generations)
    dataset = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": ""}]] * rows, "task_index": [i % tasks for i in range(rows)]}
    )
    with EnvPool(make) as pool:
        trainer = GRPOTrainer(
            model=args.model,
            args=grpo_config(args, horizon),
            train_dataset=dataset,
            processing_class=tokenizer,
            environment_factory=pool,
        )
        trainer.train()
        episodes = list(pool.episodes)
    steps = [entry for entry in trainer.state.log_history if "reward" in entry]
    return {
        "env": args.env,
        "url": args.url,
        "log": steps,
        "episodes": episodes,
        "env_steps": sum(e["steps"] for e in episodes),
        "valid_calls": sum(e["valid_calls"] for e in episodes),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    summary = train(args)
    text = json.dumps(summary, indent=1)
    if args.summary:
        with open(args.summary, "w") as fh:
            fh.write(text)
    rewards = [round(entry["reward"], 3) for entry in summary["log"]]
    print(
        f"{len(summary['log'])} steps, {len(summary['episodes'])} episodes, {summary['env_steps']} env steps "
        f"({summary['valid_calls']} valid calls); mean reward per step {rewards}",
        file=sys.stderr,
    )
    return summary


if __name__ == "__main__":
    main()
