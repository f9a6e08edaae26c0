"""The supervisor's children: each started under the scheduling policy asked for (Linux's SCHED_BATCH or the default
SCHED_OTHER), kept across the child's exec."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from sapo_cli.deploy.supervise import Supervisor

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="Linux scheduling policies")

PRINT_POLICY = "import os; print(os.sched_getscheduler(0), flush=True); import time; time.sleep(60)"


@pytest.mark.parametrize(("batch", "expected"), [(True, "SCHED_BATCH"), (False, "SCHED_OTHER")], ids=["batch", "other"])
def test_a_child_runs_under_the_policy_it_was_started_with(batch: bool, expected: str) -> None:
    read, write = os.pipe()
    with Supervisor(drain_seconds=1.0) as supervisor:
        child = supervisor.start(
            "probe",
            [sys.executable, "-c", f"import os; os.dup2({write}, 1); {PRINT_POLICY}"],
            signal.SIGTERM,
            pass_fds=[write],
            batch=batch,
        )
        os.close(write)
        with os.fdopen(read) as out:
            seen = int(out.readline())  # what the child's own Python sees after exec
        assert seen == getattr(os, expected) == os.sched_getscheduler(child.proc.pid)


def test_a_refused_policy_fails_the_start_and_names_the_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the policy is refused (a sandbox's syscall filter), the child is not started under another one quietly:
    the start fails and says which option avoids it."""

    def refuse(*args: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)  # the child forks with it: its set-up runs this
    with Supervisor(drain_seconds=1.0) as supervisor:
        with pytest.raises(RuntimeError, match="could not start probe under SCHED_BATCH .*--scheduling other"):
            supervisor.start("probe", [sys.executable, "-c", "pass"], signal.SIGTERM, batch=True)
        assert supervisor.children == []
