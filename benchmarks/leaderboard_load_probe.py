"""What benchmarks/leaderboard_load.py samples from ``/proc`` while locust runs: each server process's RSS
(``VmRSS``), CPU seconds of a process tree (a server and its workers, PostgreSQL's postmaster and its
backends), the whole machine's busy share, PostgreSQL's client backends; and the machine's line for the table."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Sampler", "cpu_snapshot", "machine_line", "children", "rss_kib"]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the command name (state first), or None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None and int(fields[1]) == pid:
                found.append(int(entry))
    return sorted(found)


def rss_kib(pid: int) -> int | None:
    """``VmRSS`` of ``pid`` in KiB (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _cpu(pid: int) -> float:
    """Seconds of CPU of ``pid`` and of its children it has waited for (utime, stime, cutime, cstime)."""
    fields = _stat(pid)
    return sum(int(v) for v in fields[11:15]) / _TICK if fields else 0.0


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid``, its waited-for children and every live process under it (a server's nginx and gunicorn
    workers, PostgreSQL's backends)."""
    return _cpu(pid) + sum(tree_cpu(c) for c in children(pid))


def tree(pid: int) -> list[int]:
    """``pid`` and every live process under it."""
    return [pid, *(p for c in children(pid) for p in tree(c))]


def _machine() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs since boot, from ``/proc/stat``."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)


def cpu_snapshot(server_pid: int, postmaster_pid: int) -> dict[str, Any]:
    """CPU seconds so far of the server tree and PostgreSQL's, and the machine's jiffies."""
    return {"server": tree_cpu(server_pid), "postgres": tree_cpu(postmaster_pid), "machine": _machine()}


def machine_line() -> str:
    """CPU model, core count and the vector/matrix flags (avx2, avx512*, amx*), for above the table."""
    model, flags = "unknown CPU", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model == "unknown CPU":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = " ".join(f for f in value.split() if f.startswith(("avx2", "avx512", "amx")))
    except OSError:
        pass
    return f"Machine: {model}, {os.cpu_count()} cores; flags: {flags or 'no avx2/avx512/amx'}"


class Sampler:
    """Every ``interval`` s, in a thread: each server process's RSS (max kept per pid) and PostgreSQL's client
    backends (max; this sampler's own connection not counted)."""

    def __init__(self, server_pid: int, db_url: str, postmaster_pid: int, interval: float = 0.5):
        self.server_pid, self.db_url, self.postmaster_pid, self.interval = server_pid, db_url, postmaster_pid, interval
        self.rss: dict[int, int] = {}
        self.backends = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        import psycopg2

        from tests.support.postgres import plain_dsn

        conn = psycopg2.connect(plain_dsn(self.db_url))
        conn.autocommit = True
        try:
            while not self._done.is_set():
                for pid in tree(self.server_pid):
                    kib = rss_kib(pid)
                    if kib is not None:
                        self.rss[pid] = max(self.rss.get(pid, 0), kib)
                with conn.cursor() as cur:
                    cur.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                        "AND pid <> pg_backend_pid()"
                    )
                    self.backends = max(self.backends, cur.fetchone()[0])
                self._done.wait(self.interval)
        finally:
            conn.close()

    def stop(self) -> None:
        self._done.set()
        self._thread.join(10)

    def finish(
        self, before: Mapping[str, Any], after: Mapping[str, Any], locust_cpu: float, elapsed: float
    ) -> dict[str, Any]:
        """The configuration's sampled numbers: processes, RSS, backends, CPU cores busy over ``elapsed`` seconds."""
        self.stop()
        workers = [self.rss[p] / 1024 for p in sorted(self.rss) if p != self.server_pid]
        parent = self.rss.get(self.server_pid, 0) / 1024
        busy = (after["machine"][0] - before["machine"][0]) / max(after["machine"][1] - before["machine"][1], 1)
        cores = {
            "server processes": (after["server"] - before["server"]) / elapsed,
            "PostgreSQL": (after["postgres"] - before["postgres"]) / elapsed,
            "locust": locust_cpu / elapsed,
        }
        machine = busy * (os.cpu_count() or 1)
        return {
            "server processes": 1 + len(workers),
            "RSS per server process, max MiB": [parent, *workers] if workers else [parent],
            "RSS of all server processes, MiB": parent + sum(workers),
            "PostgreSQL client backends, max": self.backends,
            **{f"CPU cores: {name}": value for name, value in cores.items()},
            "CPU cores: anything else (this sampler, other jobs)": max(machine - sum(cores.values()), 0.0),
            "CPU cores busy, whole machine": machine,
        }

    def reap(self) -> None:
        """Kill any server worker still alive after its parent stopped (only pids this sampler saw serve)."""
        for pid in self.rss:
            try:
                if b"sapo_cli" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
