"""``sapo/ALFWorld-v0``: ALFWorld's household text games behind the sapo_gym contract.

One game per episode, played by an engine from :mod:`sapo_gym.alfworld.engines` (the reference
engine is TextWorld + alfworld's wrappers, exactly as the paper's baselines ran it). The backend
converts the engine's language once, here: ``help`` is dropped from the listed admissible actions
(verl-agent's prompt never shows it) but stays admissible (the game answers it with its command list),
TextWorld's cumulative score becomes a per-step reward (``success_reward`` on the step that wins,
else 0), and the episode terminates on a win. Games come from the official data or the embedded
generated set (see :mod:`sapo_gym.alfworld.catalog`); ``info["dataset"]`` says which.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from sapo_gym.alfworld.catalog import Catalog, GameRecord, resolve
from sapo_gym.alfworld.engines import (
    ENGINES,
    REPRODUCED_VERSIONS,
    EngineState,
    FileVersion,
    GameEngine,
    engine_versions,
    file_version,
    load_engine,
)
from sapo_gym.alfworld.private import DEFAULT_PRIVATE_GAMES, private_catalog
from sapo_gym.alfworld.search import SearchExpert, SearchGoal
from sapo_gym.core import TaskInfo, TextEnv, Turn
from sapo_gym.private import PRIVATE_SPLIT, check_seed

__all__ = ["EXPERTS", "AlfWorldEnv"]

EXPERTS = ("walkthrough", "planner", "search", "none")
"""``walkthrough``: the game's walkthrough while the agent follows it, then None. ``planner``: the
walkthrough, then Fast Downward replanning from the current state (reference engine only; about
half a second per step off the walkthrough). ``search``: :class:`~sapo_gym.alfworld.search.SearchExpert`,
which uses only what the agent has observed (searches the room, then does the task) and has an
action in every state. ``none``: no ``expert_action``."""


class AlfWorldEnv(TextEnv):
    """ALFWorld (TextWorld) games; see the module docstring and ``docs/alfworld.md``.

    Args (keyword-only):
        data_dir: root holding ``json_2.1.1/``, a generated set file, or ``"embedded"`` (the embedded
            set, whatever else the machine has); default: ``$ALFWORLD_DATA``,
            alfworld's cache, then the embedded generated set. ``"embedded-mini"``: the embedded
            ALFWorld-Mini set (what ``sapo/ALFWorld-Mini-v0`` registers as its default).
        split: ``train``, ``eval_in_distribution`` (valid_seen) or ``eval_out_of_distribution`` (valid_unseen);
            ``private``: ``private_games`` games generated from the secret ``private_seed`` (hex; needs the
            alfworld extra), ALFWorld-Mini sized when ``data_dir="embedded-mini"`` (see :mod:`sapo_gym.alfworld.private`).
        success_reward: reward on the step that wins (10, as in the paper's baselines).
        engine: a name in :data:`sapo_gym.alfworld.engines.ENGINES`: ``compiled`` (default; byte-identical
            to the reference on all 274 golden traces and under differential fuzzing, ~400x faster
            load+reset and >1000x faster steps; a game it cannot compile is played by the reference
            engine and ``info["engine_fallback"]`` says why) or ``reference`` (TextWorld + alfworld).
        expert: one of :data:`EXPERTS`.
        protocol: action-parsing protocol (``verl-agent-v1`` or ``strict-v1``).
        render_mode: ``ansi`` or None.
    """

    env_name = "ALFWorld"
    fallback_chars = 30

    def __init__(
        self,
        *,
        data_dir: str | None = None,
        split: str = "train",
        private_seed: str | None = None,
        private_games: int = DEFAULT_PRIVATE_GAMES,
        success_reward: float = 10.0,
        engine: str = "compiled",
        expert: str = "walkthrough",
        protocol: str = "verl-agent-v1",
        render_mode: str | None = None,
    ):
        if engine not in ENGINES:
            raise ValueError(f"unknown ALFWorld engine {engine!r}; valid choices: {sorted(ENGINES)}")
        if expert not in EXPERTS:
            raise ValueError(f"unknown ALFWorld expert {expert!r}; valid choices: {list(EXPERTS)}")
        super().__init__(protocol=protocol, split=split, render_mode=render_mode)
        self.catalog: Catalog = (
            private_catalog(check_seed(private_seed), private_games, data_dir)
            if split == PRIVATE_SPLIT
            else resolve(split, data_dir)
        )
        self._ids = [g.task_id for g in self.catalog.games]  # once: every reset counts them
        self.success_reward = float(success_reward)
        self.engine_name = engine
        self.expert = expert
        self._engine: GameEngine | None = None
        self._record: GameRecord | None = None
        self._walkthrough: list[str] = []
        self._on_walkthrough = 0  # commands of the walkthrough followed so far; -1 once off it
        self._plan: list[str] | None = None
        self._search: SearchExpert | None = None

    # ---------------------------------------------------------------- TextEnv hooks
    @property
    def task_ids(self) -> Sequence[str]:
        return self._ids

    def _dataset_name(self) -> str:
        return self.catalog.dataset

    def backend_versions(self) -> dict[str, str]:
        # The engine is not part of the spec: both engines give byte-identical episodes (tested), so
        # results from either are comparable; info["engine"] records which one played. The compiled
        # engine plays the pinned versions' logic whatever is installed (nothing, with a plain
        # `pip install sapo-gym`); the reference engine what is installed (the alfworld extra pins the same).
        return dict(REPRODUCED_VERSIONS) if self.engine_name == "compiled" else engine_versions()

    def _load_task(self, index: int) -> tuple[TaskInfo, Turn]:
        record = self.catalog.games[index]
        if self._engine is None or record is not self._record:
            self._engine = None  # free the previous game before loading the next one
            game_file = game_file_of(record)
            self._engine = load_engine(game_file, self.engine_name)
            self._walkthrough = list(walkthrough_of(game_file))
            self._record = record
        state = self._engine.reset()
        self._on_walkthrough, self._plan = 0, None
        if self.expert == "search":
            self._search = SearchExpert(SearchGoal.from_task(record.task_type, record.pddl_params))
            self._search.observe(state.obs)
        sentence = state.obs.rsplit("Your task is to: ", 1)[-1].strip()
        task = TaskInfo(task=sentence, task_id=record.task_id, task_type=record.category, dataset=self.catalog.dataset)
        return task, self._turn_of(state, previous_score=0.0)

    def _backend_step(self, action: str) -> Turn:
        assert self._engine is not None and self._turn is not None
        self._advance_expert(action)
        state = self._engine.step(action)
        if self._search is not None:
            self._search.observe(state.obs)
        return self._turn_of(state, previous_score=self._turn.score)

    def expert_action(self) -> str | None:
        if self.expert == "none":
            return None
        if self.expert == "search":
            turn = self._turn
            return (
                None
                if self._search is None or turn is None or turn.won
                else self._search.action(turn.admissible_actions)
            )
        if 0 <= self._on_walkthrough < len(self._walkthrough):
            return self._walkthrough[self._on_walkthrough]
        if self.expert == "planner" and self._turn is not None and not self._turn.won:
            if self._plan is None:
                replan = getattr(self._engine, "replan", None)
                self._plan = (replan() if replan is not None else None) or []
            return self._plan[0] if self._plan else None
        return None

    def calls_are_short(self) -> bool:
        """The compiled engine's steps and warm resets take about 0.05 and 0.1 ms (a game's first reset in a process
        compiles it, ~1 ms for ALFWorld-Mini); the reference engine and the planner expert take tens to hundreds."""
        return self.engine_name == "compiled" and self.expert != "planner"

    def is_admissible(self, action: str) -> bool:
        """The listed actions, and ``help``: the game accepts it though the prompt does not list it."""
        return action == "help" or super().is_admissible(action)

    # ---------------------------------------------------------------- helpers
    def _turn_of(self, state: EngineState, previous_score: float) -> Turn:
        """Adapt an engine state: drop ``help``; cumulative score (TextWorld: won) -> per-step reward."""
        score = 1.0 if state.won else 0.0
        assert self._record is not None
        return Turn(
            observation=state.obs,
            admissible_actions=[a for a in state.admissible if a != "help"],
            won=state.won,
            score=score,
            reward=self.success_reward * max(0.0, score - previous_score),
            extra={
                "engine": self.engine_name,
                "engine_fallback": getattr(self._engine, "fallback", None),
                "pddl_params": dict(self._record.pddl_params),
                "alfworld_task_type": self._record.task_type,
            },
        )

    def _advance_expert(self, action: str) -> None:
        assert self._turn is not None
        if action not in self._turn.admissible_actions:
            return  # "Nothing happens.": the state, hence the expert's plan, is unchanged
        if (
            self._on_walkthrough >= 0
            and self._on_walkthrough < len(self._walkthrough)
            and action == self._walkthrough[self._on_walkthrough]
        ):
            self._on_walkthrough += 1
        else:
            self._on_walkthrough = -1
        if self._plan:
            self._plan = self._plan[1:] if action == self._plan[0] else None

    def close(self) -> None:
        self._engine = None
        super().close()


WALKTHROUGH_CACHE_SIZE = 1024
"""Game files whose walkthrough a process keeps (a few commands each)."""


def game_file_of(record: GameRecord) -> Path:
    """The ``game.tw-pddl`` of ``record``: the official file, or the generated game's, written once per process."""
    if record.game_file is not None:
        return record.game_file
    return _generated_file(record.generated, os.getpid())


@cache
def _generated_file(game: Any, pid: int) -> Path:
    """Render ``game`` (a :class:`~sapo_gym.alfworld.generator.problem.GeneratedGame`) into a file of this process's
    folder, which every env of the process plays it from (a file per game the process plays, as many as its
    catalogs hold at most: unbounded, so that no file is written twice). ``pid`` keys the cache, so that a forked
    child writes its own files rather than naming its parent's, removed when the parent exits."""
    fd, path = tempfile.mkstemp(prefix=f"{game.split}_{game.index:05d}_", suffix=".tw-pddl", dir=_process_folder(pid))
    with os.fdopen(fd, "w") as f:  # a fresh name, returned once written: no other thread reads it before
        json.dump(game.game_data(), f)
    return Path(path)


@cache
def _process_folder(pid: int) -> Path:
    """This process's folder of generated game files, removed when it exits."""
    folder = Path(tempfile.mkdtemp(prefix="sapo-alfworld-"))
    atexit.register(lambda: os.getpid() == pid and shutil.rmtree(folder, ignore_errors=True))
    return folder


def walkthrough_of(game_file: str | os.PathLike[str]) -> tuple[str, ...]:
    """The game file's ``walkthrough`` (empty when it has none), parsed once per process and version of the file."""
    return _walkthrough(file_version(game_file))


@lru_cache(maxsize=WALKTHROUGH_CACHE_SIZE)
def _walkthrough(version: FileVersion) -> tuple[str, ...]:
    return tuple(json.loads(Path(version[0]).read_text()).get("walkthrough") or ())
