"""Run an agent in a process of its own that receives only what the harness hands it.

An agent that runs in the harness's process can read whatever that process holds: the unfiltered
``infos`` in its caller's frame (``sys._getframe(1).f_locals``), the env objects through
``gc.get_objects()`` (and call their oracle), or any module the harness imported. The info filter
(:func:`sapo_gym.core.public_info`) alone does not stop that. :func:`isolate` builds a proxy with the agent
interface (:class:`IsolatedAgent`, an :class:`agents.base.Agent`; :class:`IsolatedResponder`, with ``respond`` too,
when the agent answers one env at a time) whose agent lives in a child process:

* the child is a fresh interpreter (``subprocess``: fork *and exec* of ``sys.executable``, what
  multiprocessing's ``spawn`` does, never a bare ``fork`` of the harness), so none of the harness's
  objects — envs, full infos, frames — are in its memory, whenever the envs were built; unlike
  ``spawn`` it does not re-run the harness's ``__main__`` module, so a script needs no main guard and
  the child builds nothing of the harness's; it talks to the harness over a socket pair (its only
  inherited descriptor besides stdout and stderr; stdin is ``/dev/null``);
* the child imports the agent's module and builds the agent (:func:`agents.registry.load_agent`): the
  submitter's code never runs in the harness's process, not even its import;
* each turn, the pipe carries the observations and the infos the harness passed to ``act`` (for a
  non-privileged agent: :func:`~sapo_gym.core.public_info`) as JSON, and brings back one output string
  per env, as JSON too (nothing the child sends is unpickled). Info values travel as JSON values;
  numpy arrays (``action_mask``) are rebuilt as arrays of their dtype, numpy scalars become Python
  numbers and tuples lists.

It is a process boundary, not a sandbox: the child runs as the same user, so it can still read the
game files and build an env of its own (a lookup of a public game), and where the kernel lets a
process read a same-user process's memory (``/proc/sys/kernel/yama/ptrace_scope`` 0) it could read the
harness's. ``docs/leaderboard.md`` says what the mark this records (``evaluation.harness.agent_process``)
does and does not establish.

:func:`load_for_harness` is how ``sapo-gym evaluate`` builds its agent: the built-in baselines
(:data:`TRUSTED_SPECS`: ``expert``, ``random``, ``search``, this project's code) in process, every
other spec (``module:Class``, HF models, ``smollm2``/``tiny``, ``openai:``) isolated.
"""

from __future__ import annotations

import itertools
import json
import signal
import socket
import subprocess
import sys
import threading
import traceback
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Any

__all__ = [
    "ISOLATED",
    "IN_PROCESS",
    "AGENT_PROCESSES",
    "TRUSTED_SPECS",
    "IsolatedAgent",
    "IsolatedResponder",
    "isolate",
    "AgentProcessError",
    "load_for_harness",
    "agent_process",
]

ISOLATED = "isolated"
IN_PROCESS = "in-process"
AGENT_PROCESSES = (ISOLATED, IN_PROCESS)
"""The values of a bundle's ``evaluation.harness.agent_process``."""
TRUSTED_SPECS = frozenset({"expert", "random", "search"})
"""Built-in baselines (this project's code, ``expert`` declared privileged) that ``auto`` runs in process."""
_ARRAY = "__sapo_ndarray__"
_CHILD = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[2]); "
    "from agents.isolated import _child_main; _child_main(int(sys.argv[1]))"
)
"""What the child runs: the harness's ``sys.path`` (so the agent's module imports as it would here), then :func:`_child_main`."""


class AgentProcessError(RuntimeError):
    """The isolated agent failed (its traceback from the child is in the message) or its process died."""


def _to_json(value: Any) -> Any:
    """``default=`` of :func:`json.dumps`: numpy arrays tagged with their dtype, numpy scalars as numbers, sets as lists."""
    if hasattr(value, "dtype") and hasattr(value, "tolist"):
        return {_ARRAY: value.tolist(), "dtype": str(value.dtype)} if getattr(value, "ndim", 0) else value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"an info value of type {type(value).__name__} cannot be sent to an isolated agent")


def _from_json(obj: dict[str, Any]) -> Any:
    if _ARRAY in obj and set(obj) == {_ARRAY, "dtype"}:
        import numpy as np

        return np.asarray(obj[_ARRAY], dtype=obj["dtype"])
    return obj


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, default=_to_json, ensure_ascii=False).encode()


def _hello(agent: Any, spec: str) -> dict[str, Any]:
    from sapo_gym.interfaces import TurnResponder
    from sapo_gym.records import is_privileged

    constrain = getattr(agent, "constrain", None)
    generation = getattr(agent, "generation", None)
    return {
        "name": str(getattr(agent, "name", spec)),
        "privileged": is_privileged(agent),
        "constrain": constrain if isinstance(constrain, str) else None,
        "respond": isinstance(agent, TurnResponder),
        "generation": generation if isinstance(generation, dict) else None,
    }


def _handle(agent: Any, msg: dict[str, Any]) -> dict[str, Any]:
    try:
        if msg["op"] == "reset":
            agent.reset(int(msg["num_envs"]))
            return {"id": msg.get("id"), "ok": None}
        if msg["op"] == "respond":
            return {"id": msg.get("id"), "ok": agent.respond(msg["observation"], msg["info"], msg.get("turn_seed"))}
        return {"id": msg.get("id"), "ok": list(agent.act(msg["observations"], msg["infos"]))}
    except BaseException:  # SystemExit or KeyboardInterrupt of the agent's code too: every request gets its answer
        return {"id": msg.get("id"), "error": traceback.format_exc()}


def _encoded(agent: Any, msg: dict[str, Any]) -> bytes:
    """The reply to ``msg``, encoded; an answer that cannot be (a lone surrogate, a value JSON has no form for)
    becomes an error reply to the same request, so the harness's request never waits for a reply that never comes."""
    reply = _handle(agent, msg)
    try:
        return _dumps(reply)
    except Exception as exc:  # noqa: BLE001 (anything an encoder of the agent's values may raise)
        return json.dumps(
            {
                "id": msg.get("id"),
                "error": f"the agent's answer cannot be sent to the harness as JSON "
                f"(UTF-8): {type(exc).__name__}: {str(exc)[:500]}",
            }
        ).encode()  # ASCII: always encodes


def _serve(conn: Any, spec: str, seed: int, config: dict[str, Any] | None = None) -> None:
    """The child's loop: build the agent, then answer ``reset``/``act``/``respond`` until ``close`` or the pipe ends.

    ``respond`` requests (agents that answer one env at a time) run concurrently on threads, up to the
    config's concurrency; each reply carries its request's ``id``."""
    from concurrent.futures import ThreadPoolExecutor

    from agents.config import config_from_dict
    from agents.registry import load_agent

    try:
        cfg = config_from_dict(config)
        agent = load_agent(spec, seed=seed, config=cfg)
        conn.send_bytes(_dumps(_hello(agent, spec)))
    except Exception as exc:  # the harness reports it as a bad spec
        conn.send_bytes(_dumps({"error": f"{exc}", "load": True}))
        return
    lock = threading.Lock()

    def reply(msg: dict[str, Any]) -> None:
        data = _encoded(agent, msg)
        with lock:
            conn.send_bytes(data)

    with ThreadPoolExecutor(max_workers=max(1, int(cfg.concurrency or 8))) as pool:
        while True:
            try:
                msg = json.loads(conn.recv_bytes(), object_hook=_from_json)
            except EOFError:  # the harness is gone
                return
            if msg["op"] == "close":
                return
            if msg["op"] == "respond":
                pool.submit(reply, msg)
            else:
                reply(msg)


def _child_main(fd: int) -> None:
    """The child's entry point: read the spec from the socket ``fd``, then :func:`_serve`. Ctrl-C is the harness's
    to handle (it closes the pipe, which ends this process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    setup = json.loads(conn.recv_bytes())
    _serve(conn, setup["spec"], int(setup["seed"]), setup.get("config"))


def _shutdown(conn: Any, proc: subprocess.Popen) -> None:
    try:
        conn.send_bytes(_dumps({"op": "close"}))
    except (OSError, ValueError):
        pass
    conn.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _receive(conn: Any, proc: subprocess.Popen, spec: str) -> dict[str, Any]:
    try:
        data = conn.recv_bytes()
    except (EOFError, OSError, TypeError):  # TypeError: the harness closed the connection under the read
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        raise AgentProcessError(f"the process of agent {spec!r} ended (exit code {code})") from None
    try:
        reply = json.loads(data)
    except ValueError as exc:  # not JSON
        raise AgentProcessError(f"agent {spec!r} sent a malformed reply: {exc}") from None
    if not isinstance(reply, dict):
        raise AgentProcessError(f"agent {spec!r} sent {type(reply).__name__}, not an object")
    return reply


class _Replies:
    """The reader thread's side: hands each reply to the pending request with its id; when the child goes (or
    sends a reply to no request), every pending request fails with :class:`AgentProcessError`."""

    def __init__(self, conn: Any, proc: subprocess.Popen, spec: str):
        self.conn, self.proc, self.spec = conn, proc, spec
        self.pending: dict[int, Future] = {}
        self.dead: AgentProcessError | None = None

    def run(self) -> None:
        while True:
            try:
                reply = _receive(self.conn, self.proc, self.spec)
            except AgentProcessError as exc:
                self.dead = exc
                break
            future = self.pending.pop(reply["id"], None) if isinstance(reply.get("id"), int) else None
            if future is None:
                self.dead = AgentProcessError(f"agent {self.spec!r} sent a reply to no request")
                break
            future.set_result(reply)
        for key in list(self.pending):
            future = self.pending.pop(key, None)
            if future is not None:
                future.set_exception(self.dead)


class _Child:
    """The agent's process and the pipe to it: started with the spec and its hello read; requests are multiplexed by id
    (a reader thread hands each reply to its request). It ends when :attr:`finalizer` runs: on ``close``, when this
    object is collected, at exit, or when the harness dies and the pipe closes."""

    def __init__(self, spec: str, seed: int, config: Any):
        from agents.config import config_to_dict

        mine, theirs = socket.socketpair()
        with theirs:  # exec'd: a fresh interpreter, nothing of this process's memory is copied
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(theirs.fileno()), json.dumps(sys.path)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        self.conn = Connection(mine.detach())
        self.finalizer = weakref.finalize(self, _shutdown, self.conn, self.proc)
        self.spec = spec
        self.conn.send_bytes(
            _dumps({"spec": str(spec), "seed": int(seed), "config": config_to_dict(config) if config else None})
        )
        self.hello = _receive(self.conn, self.proc, spec)
        if "error" in self.hello:
            self.finalizer()
            raise ValueError(self.hello["error"])
        self._ids = itertools.count()
        self._send_lock = threading.Lock()
        self._replies = _Replies(self.conn, self.proc, spec)  # the reader thread holds no reference to self
        threading.Thread(target=self._replies.run, name=f"agent-reader-{self.proc.pid}", daemon=True).start()

    def call(self, msg: dict[str, Any]) -> Any:
        """Send ``msg`` and wait for its reply's ``ok`` value; :class:`AgentProcessError` when the agent failed."""
        if not self.finalizer.alive:
            raise AgentProcessError(f"agent {self.spec!r} is closed")
        if self._replies.dead is not None:
            raise self._replies.dead
        future: Future = Future()
        with self._send_lock:
            key = next(self._ids)
            data = _dumps(
                {**msg, "id": key}
            )  # before the request is pending: one that cannot be sent waits for nothing
            self._replies.pending[key] = future
            self.conn.send_bytes(data)
        dead = self._replies.dead  # the reader may have ended between the check above and the registration
        if dead is not None and self._replies.pending.pop(key, None) is not None:
            future.set_exception(dead)
        reply = future.result()
        if "error" in reply:
            raise AgentProcessError(f"agent {self.spec!r} failed in its process:\n{reply['error']}")
        return reply.get("ok")


class IsolatedAgent:
    """An agent run in a child process of its own (:func:`isolate` builds it): a batch agent.

    Same interface as the agents (``name``, ``reset``, ``act``; ``privileged``, ``constrain`` and ``generation``
    as the child's agent declares them); :meth:`close` ends the child (it also ends when this object is collected,
    at exit, or when the harness dies and the pipe closes). An exception in the agent raises
    :class:`AgentProcessError`.
    """

    agent_process = ISOLATED

    def __init__(self, child: _Child):
        hello = child.hello
        self._child, self.spec = child, child.spec
        self.name: str = hello["name"]
        self.privileged: bool = hello["privileged"] is True
        if hello["constrain"] is not None:
            self.constrain: str = hello["constrain"]
        if isinstance(hello.get("generation"), dict):
            self.generation: dict[str, Any] = hello["generation"]

    def reset(self, num_envs: int) -> None:
        self._child.call({"op": "reset", "num_envs": int(num_envs)})

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        outputs = self._child.call({"op": "act", "observations": list(observations), "infos": list(infos)})
        if not (
            isinstance(outputs, list) and len(outputs) == len(observations) and all(isinstance(o, str) for o in outputs)
        ):
            raise AgentProcessError(f"agent {self.spec!r} must return one string per observation ({len(observations)})")
        return outputs

    def close(self) -> None:
        """End the child process (idempotent)."""
        self._child.finalizer()

    def __enter__(self) -> IsolatedAgent:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class IsolatedResponder(IsolatedAgent):
    """An isolated agent whose agent answers one env at a time: ``respond`` too (a
    :class:`~sapo_gym.interfaces.TurnResponder`, which the pool plays)."""

    def respond(self, observation: str, info: dict[str, Any], turn_seed: int | None = None) -> dict[str, Any]:
        """One env's turn (thread-safe: requests are multiplexed over the pipe)."""
        answer = self._child.call({"op": "respond", "observation": observation, "info": info, "turn_seed": turn_seed})
        if not (isinstance(answer, dict) and isinstance(answer.get("output"), str)):
            raise AgentProcessError(f"agent {self.spec!r}: respond must return a dict with an 'output' string")
        return answer


def isolate(spec: str, seed: int = 0, config: Any = None) -> IsolatedAgent:
    """The agent named by ``spec`` (any :func:`agents.registry.load_agent` spec, built with ``seed`` and ``config``)
    in a child process of its own: an :class:`IsolatedResponder` when that agent answers one env at a time, else an
    :class:`IsolatedAgent`. A bad spec raises :class:`ValueError`, as :func:`~agents.registry.load_agent` does."""
    child = _Child(spec, seed, config)
    return IsolatedResponder(child) if child.hello.get("respond") is True else IsolatedAgent(child)


def load_for_harness(spec: str, seed: int = 0, process: str = "auto", config: Any = None) -> Any:
    """The agent an evaluation harness runs: ``process`` ``auto`` (the :data:`TRUSTED_SPECS` in process,
    every other spec isolated), ``isolated`` or ``in-process`` (any spec); ``config``: an
    :class:`agents.config.AgentConfig` applied to it."""
    if process not in ("auto", *AGENT_PROCESSES):
        raise ValueError(f"unknown agent process {process!r}; valid choices: auto, {', '.join(AGENT_PROCESSES)}")
    if process == IN_PROCESS or (process == "auto" and spec in TRUSTED_SPECS):
        from agents.registry import load_agent

        return load_agent(spec, seed=seed, config=config)
    return isolate(spec, seed=seed, config=config)


def agent_process(agent: Any) -> str:
    """How ``agent`` runs: :data:`ISOLATED` for an :class:`IsolatedAgent`, else :data:`IN_PROCESS`."""
    return ISOLATED if isinstance(agent, IsolatedAgent) else IN_PROCESS
