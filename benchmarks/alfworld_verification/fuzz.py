"""Live differential fuzzing of the compiled engine against the reference engine.

Both engines play the same game side by side; every observation, admissible list and ``won`` flag
is compared byte for byte, the reset included. Commands come from :class:`ChainPolicy`, which is
biased towards the chains where the two implementations could plausibly disagree: taking an object
and moving it to another receptacle at the same spot, then looking (TextWorld's stale
``not_inreceptacle`` facts); heating / cooling / cleaning / slicing, then examining; plus walkthrough
prefixes (winning states), stale commands from earlier states and junk.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import tarfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.alfworld_verification.diff import Mismatch, first_difference
from benchmarks.alfworld_verification.missions import Mission
from sapo_gym.alfworld.engines.compiled import CompiledEngine
from sapo_gym.alfworld.engines.reference import ReferenceEngine

__all__ = ["ChainPolicy", "GameReport", "extract_games", "fuzz_game", "generated_games", "sampled"]

_VERB_WEIGHTS = {
    "heat": 40.0,
    "cool": 40.0,
    "clean": 40.0,
    "slice": 40.0,
    "take": 8.0,
    "move": 8.0,
    "use": 6.0,
    "open": 6.0,
    "close": 2.0,
    "go": 4.0,
    "examine": 2.0,
    "look": 1.5,
    "inventory": 1.5,
    "help": 0.3,
}
_APPLIANCES = ("microwave", "fridge", "sinkbasin", "countertop", "diningtable")
_JUNK = ("jump", "go to nowhere", "Look", "LOOK", "take", "examine", "go to", "", "   ", "help me", "inventory please")


@dataclass
class ChainPolicy:
    """Chooses the next command from the admissible list (seeded; black box over the engine)."""

    rng: random.Random
    junk_rate: float = 0.06
    """Probability of a command that is not admissible (junk, a stale command or a near miss)."""
    stale_rate: float = 0.04
    """Probability of replaying a command that was admissible earlier but is not now."""
    followups: list[str] = field(default_factory=list)
    """Pending chain: prefixes of the commands to try next, first first."""
    seen: set[str] = field(default_factory=set)

    def choose(self, admissible: list[str]) -> str:
        self.seen.update(admissible)
        while self.followups:
            prefix = self.followups.pop(0)
            matches = [c for c in admissible if c.startswith(prefix)]
            if matches:
                return self._chain(self.rng.choice(matches))
        roll = self.rng.random()
        if roll < self.junk_rate:
            return self._junk(admissible)
        if roll < self.junk_rate + self.stale_rate:
            stale = sorted(self.seen.difference(admissible))
            if stale:
                return self.rng.choice(stale)
        weights = [self._weight(c) for c in admissible]
        return self._chain(self.rng.choices(admissible, weights)[0])

    def _weight(self, command: str) -> float:
        verb = command.split(" ", 1)[0]
        if verb == "go" and any(name in command for name in _APPLIANCES):
            return 12.0
        return _VERB_WEIGHTS.get(verb, 1.0)

    def _chain(self, command: str) -> str:
        """Queue the follow-ups of ``command`` (the chains the fuzzer is biased towards)."""
        words = command.split(" ")
        if words[0] == "take":  # take X from R -> move X to (R or a neighbour) -> look
            obj = command[5 : command.index(" from ")]
            self.followups = [f"move {obj} to ", "look"] if self.rng.random() < 0.6 else ["look"]
        elif words[0] in ("heat", "cool", "clean"):
            obj = command[len(words[0]) + 1 : command.index(" with ")]
            self.followups = [f"examine {obj}", "inventory", "look"]
        elif words[0] == "slice":  # slice X with K -> put K down -> take X -> examine X
            obj, knife = command[6:].split(" with ", 1)
            self.followups = [f"examine {knife}", f"move {knife} to ", f"take {obj} from ", f"examine {obj}"]
        elif words[0] == "go" and self.rng.random() < 0.5:
            self.followups = [self.rng.choice(["open ", "look", "examine ", "take "])]
        elif words[0] == "open" and self.rng.random() < 0.5:
            self.followups = ["take ", "close "]
        return command

    def _junk(self, admissible: list[str]) -> str:
        choice = self.rng.randrange(4)
        if choice == 0 or not admissible:
            return self.rng.choice(_JUNK)
        command = self.rng.choice(admissible)
        if choice == 1:
            return command.capitalize() if command[:1].islower() else command.lower()
        if choice == 2:  # padded: valid after strip()
            return " " * self.rng.randint(1, 3) + command + "\t"
        words = command.split(" ")
        return (
            " ".join(w if not w.isdigit() else "99" for w in words)
            if any(w.isdigit() for w in words)
            else command + "s"
        )


@dataclass
class GameReport:
    """Outcome of fuzzing one game."""

    game: str
    steps: int = 0
    mismatch: Mismatch | None = None
    verbs: Counter = field(default_factory=Counter)
    reference_s: float = 0.0
    compiled_s: float = 0.0


def game_key(game_file: str) -> str:
    """A game's identity independent of where the data lives.

    ``<task folder>/<trial>/game.tw-pddl`` for official games, the file name for others. Seeding on
    the absolute path made the commands, and so the coverage, depend on the checkout location and
    on pytest's temporary directory.
    """
    path = Path(game_file)
    return "/".join(path.parts[-3:]) if path.name == "game.tw-pddl" else path.name


def fuzz_game(
    game_file: str, steps: int, seed: int, walkthrough_rate: float = 0.3, mission_rate: float = 0.8
) -> GameReport:
    """Play ``steps`` commands of ``game_file`` on both engines (after a reset), comparing everything.

    The commands start with a walkthrough prefix (probability ``walkthrough_rate``) or else a
    :class:`.missions.Mission` (probability ``mission_rate``), then follow :class:`ChainPolicy`.
    """
    rng = random.Random(f"{seed}:{game_key(game_file)}")
    report = GameReport(game=game_file)
    t0 = time.perf_counter()
    reference = ReferenceEngine(game_file)
    t1 = time.perf_counter()
    compiled = CompiledEngine(game_file)
    report.compiled_s += time.perf_counter() - t1
    report.reference_s += t1 - t0
    if compiled.fallback is not None:
        report.mismatch = Mismatch(0, None, "fallback", None, compiled.fallback)
        return report
    with open(game_file) as f:
        walkthrough = list(json.load(f).get("walkthrough") or [])
    prefix = walkthrough[: rng.randint(0, len(walkthrough))] if rng.random() < walkthrough_rate else []
    mission = Mission(compiled, rng) if not prefix and rng.random() < mission_rate else None
    policy = ChainPolicy(rng)
    command: str | None = None
    for step in range(steps + 1):
        t0 = time.perf_counter()
        ref_state = reference.reset() if command is None else reference.step(command)
        t1 = time.perf_counter()
        comp_state = compiled.reset() if command is None else compiled.step(command)
        report.compiled_s += time.perf_counter() - t1
        report.reference_s += t1 - t0
        report.steps = step
        diff = first_difference(ref_state, comp_state)
        if diff is not None:
            report.mismatch = Mismatch(step, command, *diff)
            return report
        if step == steps:
            break
        command = prefix.pop(0) if prefix else mission.next(ref_state.admissible) if mission else None
        if command is None:
            command, mission = policy.choose(ref_state.admissible), None
        report.verbs[
            command.strip().split(" ", 1)[0] if command.strip() in ref_state.admissible else "<not admissible>"
        ] += 1
    return report


def sampled(name: str, seed: int, fraction: float) -> bool:
    """Deterministic hash sample: keeps about ``fraction`` of all names, the same ones every run."""
    digest = hashlib.sha256(f"{seed}:{name}".encode()).hexdigest()
    return int(digest[:8], 16) < fraction * 2**32


def extract_games(
    tarball: str | os.PathLike[str], dest: str | os.PathLike[str], fraction: float, seed: int
) -> list[str]:
    """Stream ``tarball`` once and extract a hash sample of its ``game.tw-pddl`` files under ``dest``."""
    out: list[str] = []
    with tarfile.open(tarball, "r|xz") as tar:
        for member in tar:
            if member.isfile() and member.name.endswith("game.tw-pddl") and sampled(member.name, seed, fraction):
                tar.extract(member, dest, filter="data")
                out.append(os.path.join(dest, member.name))
    return sorted(out)


def generated_games(dest: str | os.PathLike[str], count: int) -> list[str]:
    """Write ``count`` games of the embedded generated set (evenly spread) as game files under ``dest``."""
    from sapo_gym.alfworld.catalog import EMBEDDED_SET
    from sapo_gym.alfworld.generator.build import read_set

    _, games = read_set(EMBEDDED_SET)
    picked = [games[i * len(games) // count] for i in range(min(count, len(games)))]
    out = []
    for i, game in enumerate(picked):
        path = Path(dest) / f"generated_{i:03d}.tw-pddl"
        path.write_text(json.dumps(game.game_data()))
        out.append(str(path))
    return out
