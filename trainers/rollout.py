"""Rollouts: drive the members of a ``make_vec`` vector env with an agent, one episode each.

Every iteration resets each member once (member ``w`` of group ``g`` plays the task its
:class:`~sapo_gym.wrappers.TaskSchedule` assigns to episode ``iteration``, so GRPO group members
share a task and a resumed run replays the same schedule), then steps the *active* members only
until every episode has ended: finished episodes are not prompted again.

Why the members and not ``vec.step``: gymnasium's vector API steps every sub-env on every call and
auto-resets finished ones mid-batch, which would prompt finished envs and let group members drift
onto different tasks. The rollout therefore drives the per-member calls (``reset_members`` /
``step_members``) of a ``sync`` vector env (members in this process) or a ``ray`` one (members in Ray
actors, stepped in parallel: ``--env-workers ray``); both play the same episodes.

A member whose Ray worker is lost mid-episode (crashed, killed, silent past the step timeout) ends its
episode there: the episode is *dropped* (its turns leave the batch; :attr:`Rollout.dropped` records it) and
the member plays the next iteration on the replacement worker the vector env started.

The result is one :class:`~trainers.experience.TurnRecord` per env turn (the verl-agent layout): the agent's
output (an LLM policy's :class:`~agents.generation.base.GenerationOutput`, which the batch is padded from), the
env's answer, the trajectory id, the turn index and the group id that the advantage computation needs, the env's
raw observation (GiGPO's anchor state); and per-episode stats.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from trainers.config import ENV_WORKERS
from trainers.experience import TurnRecord

if TYPE_CHECKING:
    from sapo_gym.members import MemberResult

__all__ = ["EpisodeStats", "DroppedEpisode", "Rollout", "collect", "make_train_vec", "worker_ids"]


@dataclass
class EpisodeStats:
    task_id: str
    group_id: int
    won: bool
    score: float
    episode_return: float
    length: int
    invalid: int
    truncated: bool
    """Ended by the horizon (TimeLimit) rather than by success or failure."""


@dataclass
class DroppedEpisode:
    """An episode lost with its env worker: not trained on, not counted in ``Rollout.episodes``."""

    traj_id: int
    stats: EpisodeStats
    """The episode as far as it went."""
    reason: str
    """Why the worker was lost (``MemberResult.lost``)."""


@dataclass
class Rollout:
    turns: list[TurnRecord] = field(default_factory=list)
    episodes: list[EpisodeStats] = field(default_factory=list)
    generation_s: float = 0.0
    """Time inside the agent (sampling)."""
    env_s: float = 0.0
    """Time inside the envs (stepping, which computes the rewards; the paper's 'reward' phase)."""
    dropped: list[DroppedEpisode] = field(default_factory=list)
    """Episodes whose worker was lost mid-episode; their turns are not in ``turns``."""


def make_train_vec(
    env_id: str,
    num_tasks: int,
    group_size: int,
    schedule_seed: int,
    groups: Sequence[int] | None = None,
    *,
    env_workers: str = "sync",
    ray_address: str = "",
    **env_kwargs: Any,
) -> gym.vector.VectorEnv:
    """The training vector env: ``num_tasks`` groups of ``group_size`` members, in this process (``env_workers``
    'sync') or one Ray actor each ('ray'; on the cluster at ``ray_address``, '' = the running Ray or a new local one).

    ``groups`` (one rank's share under data parallelism) keeps only those groups' members; they play
    the tasks, reset seeds and trajectory ids they have in the full env (:func:`worker_ids`)."""
    import sapo_gym  # noqa: F401  (registers the ids)
    from sapo_gym.vector import make_vec

    if env_workers not in ENV_WORKERS:
        raise ValueError(f"env_workers must be one of {list(ENV_WORKERS)}, got {env_workers!r}")
    workers = None if groups is None else [g * group_size + m for g in groups for m in range(group_size)]
    extra: dict[str, Any] = {}
    if env_workers == "ray":
        from sapo_gym.ray_vector import RayWorkers

        extra["ray_workers"] = RayWorkers(address=ray_address or None)
    vec = make_vec(
        env_id,
        num_tasks,
        group_size,
        vectorization=env_workers,
        schedule_seed=schedule_seed,  # type: ignore[arg-type]
        members=workers,
        **extra,
        **env_kwargs,
    )
    if workers is not None:
        vec.worker_ids = workers  # type: ignore[attr-defined]
    return vec


def worker_ids(vec: gym.vector.VectorEnv) -> list[int]:
    """Each member's index in the full training env (its trajectory id and reset-seed offset)."""
    return list(getattr(vec, "worker_ids", range(vec.num_envs)))


def _check_members(vec: gym.vector.VectorEnv) -> None:
    if not hasattr(vec, "step_members"):
        raise ValueError(
            "the rollout steps vector-env members individually: build it with vectorization='sync' "
            "or 'ray' (make_train_vec)"
        )


def _reset(vec: Any, workers: list[int], episode: int, seed: int) -> tuple[list[str], list[dict], list[EpisodeStats]]:
    """Start episode ``episode`` of the schedule on every member (group id = the member's group)."""
    results = vec.reset_members(range(len(workers)), [seed + w for w in workers], episode)
    stats = [
        EpisodeStats(r.info["task_id"], int(g), False, 0.0, 0.0, 0, 0, False)
        for r, g in zip(results, vec.member_groups)
    ]
    return [r.obs for r in results], [r.info for r in results], stats


def collect(
    vec: gym.vector.VectorEnv,
    act: Callable[[Sequence[str], Sequence[dict[str, Any]]], list[Any]],
    episode: int,
    seed: int = 0,
    text_of: Callable[[Any], str] = lambda out: out if isinstance(out, str) else out.text,
    score_reward: float | None = None,
) -> Rollout:
    """Play one episode on every member of ``vec``; ``act`` sees the active members only.

    Args:
        vec: a ``sync`` or ``ray`` vector env from :func:`make_train_vec` (members are TaskSchedule-wrapped).
        act: ``(observations, infos) -> outputs`` for the active envs (e.g. ``LLMAgent.act_detailed``).
        episode: which entry of the task schedule every member plays (the iteration number).
        text_of: the raw text of an output, sent to the env.
        score_reward: if set, the turn that ends an episode is rewarded ``score_reward × info["score"]`` (the
            env's [0, 1] task score) instead of the env's reward (``--train-reward score``); other turns keep theirs.
    """
    _check_members(vec)
    workers = worker_ids(vec)
    obs, infos, stats = _reset(vec, workers, episode, seed + 1000 * episode)
    out = Rollout(episodes=stats)
    active, lost = list(range(len(workers))), {}
    while active:
        t0 = time.perf_counter()
        outputs = act([obs[i] for i in active], [infos[i] for i in active])
        out.generation_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        results = vec.step_members(active, [text_of(o) for o in outputs])
        out.env_s += time.perf_counter() - t0
        still = []
        for i, output, res in zip(active, outputs, results):
            if res.lost is not None:
                lost[i] = res.lost
                continue
            _record_turn(out, stats[i], obs[i], infos[i], output, res, workers[i], score_reward)
            obs[i], infos[i] = res.obs, res.info
            if not (res.terminated or res.truncated):
                still.append(i)
        active = still
    return _drop(out, lost, workers)


def _record_turn(
    out: Rollout,
    st: EpisodeStats,
    obs: str,
    info: dict[str, Any],
    output: Any,
    res: MemberResult,
    traj_id: int,
    score_reward: float | None,
) -> None:
    """Append the turn that answered ``obs`` (and ``info``) with ``output`` to ``out.turns``, and count it in its
    episode's stats ``st``; ``res`` is the env's step result, ``score_reward`` as in :func:`collect`."""
    invalid = not res.info.get("is_action_valid", True)
    score = float(res.info.get("score", 0.0))
    reward = score_reward * score if score_reward is not None and res.terminated else res.reward
    out.turns.append(
        TurnRecord(
            obs,
            output,
            reward,
            res.terminated,
            invalid,
            traj_id,
            st.length,
            st.group_id,
            info.get("raw_observation"),
        )
    )
    st.length += 1
    st.invalid += int(invalid)
    st.episode_return += reward
    st.won, st.score = bool(res.info.get("won", False)), score
    st.truncated = res.truncated and not res.terminated


def _drop(out: Rollout, lost: dict[int, str], workers: list[int]) -> Rollout:
    """Move the episodes of members in ``lost`` (member -> why) out of the trained turns and episode stats."""
    if not lost:
        return out
    gone = {workers[i] for i in lost}
    out.dropped = [DroppedEpisode(workers[i], out.episodes[i], why) for i, why in sorted(lost.items())]
    out.turns = [t for t in out.turns if t.traj_id not in gone]
    out.episodes = [e for i, e in enumerate(out.episodes) if i not in lost]
    return out
