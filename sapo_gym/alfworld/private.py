"""ALFWorld's private split: games generated from a secret seed, never published.

``AlfWorldEnv(split="private", private_seed=<hex>, private_games=N)`` generates N games with the
generator of ``sapo-gym data alfworld --generate`` (so it needs the alfworld extra: Fast Downward
plans each game and the reference engine checks the plan wins) on AI2-THOR's *test* floor plans, as
``eval_out_of_distribution``'s. The generator's RNG strings start with a seed derived from the secret
(:func:`sapo_gym.private.derive`), which no public set's do. ALFWorld-Mini sizes (``data_dir=
"embedded-mini"``, that env's default: at most 4 receptacles, 1 distractor type) or full-size rooms
(any other ``data_dir``). A game equal to one of a public generated set (``generated-v1``,
``generated-mini-v1``, every split: same room, objects, places, agent and goal) is never kept.

The split's dataset name ends in a digest of the games, so the env's spec hash covers them; the task
ids are opaque (``private/007``: the public ids name the task type, object, receptacle and scene).
Games are generated once per process (cached by seed and count).
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from sapo_gym.alfworld import TASK_TYPES
from sapo_gym.alfworld.catalog import EMBEDDED_MINI, EMBEDDED_MINI_SET, EMBEDDED_SET, Catalog, GameRecord
from sapo_gym.private import derive

__all__ = ["DEFAULT_PRIVATE_GAMES", "MINI_LIMITS", "game_key", "private_catalog", "private_games", "public_game_keys"]

DEFAULT_PRIVATE_GAMES = 24
MINI_LIMITS = (4, 1)
"""(max_receptacles, max_distractors) of ALFWorld-Mini's games (the embedded generated-mini-v1's header)."""
_SCENES = "eval_out_of_distribution"
"""The generator's split whose floor plans the private games use (AI2-THOR's test scenes)."""


def game_key(game: Any) -> tuple:
    """What makes a game the same game: the room, its objects and their places, the agent's start, the goal."""
    return (
        game.scene,
        tuple(game.agent),
        tuple(sorted(map(tuple, game.objects))),
        tuple(sorted(game.receptacles)),
        game.task_type,
        game.object_target,
        game.parent_target,
        game.toggle_target,
    )


@functools.lru_cache(maxsize=1)
def public_game_keys() -> frozenset:
    """The keys of every game of the public generated sets shipped in the package (every split)."""
    from sapo_gym.alfworld.generator.build import read_set

    return frozenset(game_key(g) for path in (EMBEDDED_SET, EMBEDDED_MINI_SET) for g in read_set(path)[1])


def private_games(seed: str, n_games: int, mini: bool = True, workers: int = 1) -> list[Any]:
    """``n_games`` generated games for the secret ``seed``, none equal to a public one (deterministic in the seed,
    whatever ``workers``). One process by default: the env is built inside servers whose threads make forking unsafe."""
    from sapo_gym.alfworld.generator.build import generate, generate_game

    if n_games < 1:
        raise ValueError("private_games must be >= 1")
    k, d = MINI_LIMITS if mini else (None, None)
    rng_seed = "private-" + derive(seed, "alfworld-mini" if mini else "alfworld")
    public = public_game_keys()
    games = [
        g
        for g in generate({_SCENES: n_games}, seed=rng_seed, workers=workers, max_receptacles=k, max_distractors=d)
        if game_key(g) not in public
    ]
    index = n_games
    while len(games) < n_games:  # a game equal to a public one was dropped: draw the next index instead
        game = generate_game(rng_seed, _SCENES, index, k, d)
        index += 1
        if game_key(game) not in public:
            games.append(game)
    return games


def _digest(games: list[Any]) -> str:
    blob = json.dumps([g.to_json() for g in games], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def private_catalog(seed: str, n_games: int = DEFAULT_PRIVATE_GAMES, data_dir: str | None = EMBEDDED_MINI) -> Catalog:
    """The private split's catalog: its games under opaque ids, named by a digest of their content."""
    from sapo_gym.alfworld.generator.build import dataset_name

    mini = data_dir == EMBEDDED_MINI
    games = private_games(seed, n_games, mini)
    records = tuple(
        GameRecord(
            f"private/{i:03d}",
            TASK_TYPES[g.task_type],
            g.task_type,
            {
                "object_target": g.object_target,
                "object_sliced": False,
                "mrecep_target": "",
                "parent_target": g.parent_target,
                "toggle_target": g.toggle_target,
            },
            generated=g,
        )
        for i, g in enumerate(games)
    )
    name = dataset_name(*(MINI_LIMITS if mini else (None, None)))
    return Catalog(f"{name}-private-{_digest(games)}", "private", records)
