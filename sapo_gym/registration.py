"""Registration of the sapo_gym ids, by string entry point (``import sapo_gym`` stays light).

Each id's factory builds the backend, checks its keyword arguments (unknown ones are an error
that lists the valid choices) and wraps it in :class:`~sapo_gym.prompts.HistoryPrompt`; gymnasium
adds ``TimeLimit`` from ``max_episode_steps``. Pass ``prompt=None`` to get raw observations, a shipped
template's name (:data:`sapo_gym.prompts.PROMPTS`) or alias (:data:`PROMPT_ALIASES`) or a :class:`~sapo_gym.prompts.PromptTemplate` of your own;
the env's ``spec_fields()["prompt"]`` records the template's name (the registered default's when raw).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

__all__ = [
    "EnvEntry",
    "ENVS",
    "PROMPT_ALIASES",
    "register_all",
    "build",
    "keyword_parameters",
    "named_prompt",
    "parse_env_args",
]


@dataclass(frozen=True)
class EnvEntry:
    """What ``sapo-gym envs`` lists about one registered id."""

    env_id: str
    backend: str
    """``module:Class`` of the backend (imported only when the env is made)."""
    prompt: str
    """``module:NAME`` of the default :class:`PromptTemplate`."""
    horizon: int
    dataset: str
    description: str
    eval_splits: tuple[str, ...] = ()
    """Evaluation splits, the first being the default of ``sapo-gym evaluate`` and of comparisons."""
    protocol: str = "verl-agent-v1"
    defaults: tuple[tuple[str, Any], ...] = ()
    splits: str = ""
    """``module:NAME`` of the backend's split names (the ``split=`` values it accepts; ``sapo-gym envs`` counts
    the tasks of each); empty: only the split the env makes by default is listed."""
    ragged_infos: bool = True
    """Whether ``info["action_mask"]`` (one entry per admissible action) differs in length from env to env. gymnasium's
    own ``SyncVectorEnv``/``AsyncVectorEnv`` stack an array info into one fixed-shape array, so they refuse such an
    id when built (``gym.make_vec(..., vectorization_mode="sync"|"async")``); the id's ``vector_entry_point``
    (``gym.make_vec`` without ``vectorization_mode``) and :func:`sapo_gym.make_vec` batch it per env."""
    needs: tuple[str, ...] = ()
    """The extras (:data:`sapo_gym.extras.EXTRAS`) the env needs beside ``pip install sapo-gym``."""
    programs: tuple[tuple[str, str], ...] = ()
    """(path, how to install it) of each program the env runs."""
    optional: tuple[tuple[str, str], ...] = ()
    """(extra, the features that need it) for the env's optional features."""

    def split_names(self) -> tuple[str, ...]:
        """The backend's split names (imports the module that defines them), or () when the entry names none."""
        return tuple(_load(self.splits)) if self.splits else ()

    def unusable(self) -> str | None:
        """Why the env cannot be made here, or None: each import of its extras and its backend's module is
        tried (the imports its constructor makes lazily are not), its programs looked for."""
        from sapo_gym.extras import unusable

        why = unusable(self.needs)
        if why is None:
            try:
                _backend(self)
            except ImportError as exc:
                why = f"{type(exc).__name__}: {exc}"
        absent = [f"{path} not found ({fix})" for path, fix in self.programs if not os.access(path, os.X_OK)]
        return "; ".join(([why] if why else []) + absent) or None


_ALFWORLD_OPTIONAL = (("alfworld", 'engine="reference", expert="planner"'),)

ENVS: dict[str, EnvEntry] = {
    e.env_id: e
    for e in (
        EnvEntry(
            "sapo/ALFWorld-v0",
            "sapo_gym.alfworld.env:AlfWorldEnv",
            "sapo_gym.prompts:ALFWORLD_PROMPT",
            50,
            "official ALFWorld games (data_dir / ALFWORLD_DATA / alfworld cache) or the embedded generated set",
            "household tasks in TextWorld (pick, look, clean, heat, cool, pick2)",
            eval_splits=("eval_out_of_distribution", "eval_in_distribution"),
            splits="sapo_gym.alfworld.catalog:SPLITS",
            optional=_ALFWORLD_OPTIONAL,
        ),
        EnvEntry(
            "sapo/ALFWorld-Mini-v0",
            "sapo_gym.alfworld.env:AlfWorldEnv",
            "sapo_gym.prompts:ALFWORLD_PROMPT",
            50,
            "the embedded generated-mini-v1 set (data_dir=embedded-mini; an explicit data_dir wins, ALFWORLD_DATA does not)",
            "CPU-scale ALFWorld variant (not the benchmark): rooms of <= 4 receptacles, 1 distractor object type",
            eval_splits=("eval_out_of_distribution", "eval_in_distribution"),
            splits="sapo_gym.alfworld.catalog:SPLITS",
            defaults=(("data_dir", "embedded-mini"),),
            optional=_ALFWORLD_OPTIONAL,
        ),
        EnvEntry(
            "sapo/WebShop-v0",
            "sapo_gym.webshop.env:WebShopEnv",
            "sapo_gym.prompts:WEBSHOP_PROMPT",
            15,
            "WebShop files (data_dir / SAPO_WEBSHOP_DATA) or the embedded generated catalog",
            "online shopping in a text web shop (in-process)",
            eval_splits=("test", "verl-agent-test"),
            splits="sapo_gym.webshop.catalog:SPLITS",
        ),
        EnvEntry(
            "sapo/WebShop-Mini-v0",
            "sapo_gym.webshop.env:WebShopEnv",
            "sapo_gym.prompts:WEBSHOP_PROMPT",
            15,
            "the embedded generated catalog, 200 products (about 7 per product type); human-style goals, the first "
            "100 held out ('test'), the other 300 for training ('train')",
            "CPU-scale WebShop variant (not the benchmark): the same shop, pages, reward, parsing and horizon over "
            "fewer products",
            eval_splits=("test",),
            splits="sapo_gym.webshop.catalog:SPLITS",
            defaults=(("num_products", 200), ("test_goals", 100)),
        ),
        EnvEntry(
            "sapo/WebShop-Browser-v0",
            "sapo_gym.webshop.browser:WebShopBrowserEnv",
            "sapo_gym.prompts:WEBSHOP_PROMPT",
            15,
            "as sapo/WebShop-v0",
            "the same shop served by flask, driven by selenium + headless Chromium",
            eval_splits=("test", "verl-agent-test"),
            splits="sapo_gym.webshop.catalog:SPLITS",
            needs=("browser", "webshop"),
            programs=(
                ("/usr/bin/chromium", "apt-get install chromium"),
                ("/usr/bin/chromedriver", "apt-get install chromium-driver"),
            ),
        ),
        EnvEntry(
            "sapo/Vault-v0",
            "sapo_gym.diagnostic:VaultEnv",
            "sapo_gym.prompts:PLAIN_PROMPT",
            4,
            "generated (16 train / 16 test codes)",
            "diagnostic: press buttons in order, sparse terminal reward",
            eval_splits=("test",),
            splits="sapo_gym.diagnostic:SPLITS",
            ragged_infos=False,
        ),
    )
}


def _load(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def parse_env_args(pairs: list[str]) -> dict[str, Any]:
    """``--env-arg KEY=VALUE`` entries as ``gym.make`` keyword arguments (train, compare, evaluate, env serve).

    A value that reads as a Python literal (``25``, ``True``, ``[1, 2]``) or as JSON (``true``, ``null``) is
    taken as such, anything else as a string (``data_dir=/a=b`` keeps ``/a=b``).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--env-arg takes KEY=VALUE, got {pair!r}")
        try:
            value: Any = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
        out[key.strip()] = value
    return out


def keyword_parameters(cls: type) -> list[str]:
    """Keyword-only ``__init__`` parameters of ``cls``, following ``**kwargs`` up to the base classes."""
    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = inspect.signature(init).parameters.values()
        names |= {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            break
    return sorted(names)


def _backend(entry: EnvEntry) -> type:
    """The backend class of ``entry``; a missing optional package is an ImportError naming the extra."""
    from sapo_gym.extras import naming_extra, require

    require(entry.needs, entry.env_id)
    try:
        return _load(entry.backend)
    except ImportError as exc:
        raise naming_extra(exc, entry.env_id, entry.needs)  # noqa: B904 (naming_extra chains exc as its cause)


def build_remote(**kwargs: Any) -> gym.Env:
    """Factory behind :data:`REMOTE_ID`: a missing serve package is an ImportError naming the extra."""
    from sapo_gym.extras import naming_extra

    try:
        from sapo_gym.remote.client import RemoteEnv
    except ImportError as exc:
        raise naming_extra(exc, REMOTE_ID, ("serve",))  # noqa: B904 (naming_extra chains exc as its cause)
    return RemoteEnv(**kwargs)


PROMPT_ALIASES: dict[str, str] = {"plain": "plain-v1"}
"""Short names ``prompt=`` takes beside ``"default"`` (the id's registered template) and the shipped templates' own
(:data:`sapo_gym.prompts.PROMPTS`): ``"plain"`` is :data:`~sapo_gym.prompts.PLAIN_PROMPT` (``sapo-gym train --prompt plain``)."""


def named_prompt(name: str) -> Any:
    """The shipped :class:`~sapo_gym.prompts.PromptTemplate` named ``name`` or by its alias (:data:`PROMPT_ALIASES`);
    an unknown name is a ValueError listing the valid ones."""
    from sapo_gym.prompts import PROMPTS, get_prompt

    try:
        return get_prompt(PROMPT_ALIASES.get(name, name))
    except ValueError:
        raise ValueError(f"unknown prompt {name!r}; valid choices: {sorted({*PROMPTS, *PROMPT_ALIASES})}") from None


def build(env_id: str, prompt: Any = "default", history_length: int = 2, **kwargs: Any) -> gym.Env:
    """Factory behind every registered id (gymnasium calls it through the entry point)."""
    entry = ENVS[env_id]
    cls = _backend(entry)
    valid = keyword_parameters(cls)
    unknown = sorted(set(kwargs) - set(valid))
    if unknown:
        raise TypeError(
            f"{env_id}: unknown keyword argument(s) {unknown}; valid choices: "
            f"{sorted(valid + ['prompt', 'history_length', 'max_episode_steps'])}"
        )
    env = cls(**{**dict(entry.defaults), **kwargs})
    if entry.ragged_infos:
        env.observation_space.gym_vector_refusal = _gym_vector_refusal(env_id)
    from sapo_gym.prompts import HistoryPrompt, tool_call_prompt

    if prompt is None or prompt == "default":
        template = _load(entry.prompt)
    else:
        template = named_prompt(prompt) if isinstance(prompt, str) else prompt
    if env.protocol.action_format == "tool-call":  # the prompt asks for a tool call, not <think>/<action> tags
        template = tool_call_prompt(template)
    # The spec records the prompt results are produced under; a raw env (boards, replay) the default one.
    env.prompt_name = template.name
    if prompt is None:
        return env
    from sapo_gym.messages import attach_chat

    return HistoryPrompt(env, template, history_length=history_length, chat=attach_chat)


def _gym_vector_refusal(env_id: str) -> str:
    return (
        f"gymnasium's SyncVectorEnv/AsyncVectorEnv cannot batch {env_id}'s infos: info['action_mask'] has one entry "
        "per admissible action, envs list different numbers of them, and gymnasium stacks an array info into one "
        f"fixed-shape array. Use gym.make_vec({env_id!r}, num_envs=N) without vectorization_mode (sapo's vector entry "
        "point; vectorization='async' for one process per env), or sapo_gym.make_vec (task groups, Ray)."
    )


REMOTE_ID = "sapo/Remote-v0"
"""A served env (``sapo-gym env serve``) as a local one: ``gym.make(REMOTE_ID, url=..., env_id=...)``. Not in
:data:`ENVS`: it has no backend, data or horizon of its own (the server's env has them); needs the serve extra."""


def register_all() -> None:
    if REMOTE_ID not in gym.registry:
        gym.register(id=REMOTE_ID, entry_point="sapo_gym.registration:build_remote")
    for entry in ENVS.values():
        if entry.env_id not in gym.registry:
            gym.register(
                id=entry.env_id,
                entry_point="sapo_gym.registration:build",
                max_episode_steps=entry.horizon,
                kwargs={"env_id": entry.env_id},
                vector_entry_point="sapo_gym.vector:gym_vector_env",
            )
