"""The load benchmark's visitors (locust; run by benchmarks/leaderboard_load.py from locust's own venv).

It imports nothing of the project: everything comes from the JSON file named by ``SAPO_LOAD_CONFIG``:
``tokens`` (API tokens, one per visitor in turn), ``bundles`` (a file of pre-generated bundles, one JSON
document a line, each new work: its episodes' outputs are nobody's yet), ``spec_hash`` (the board),
``submissions`` (ids with episode views to visit) and ``episodes`` (episodes per submission).

Each visitor loops without waiting (a closed loop: the server's pace sets the rate) over four requests,
weighted: a fresh submission (POST, 201 expected), the board page, an episode view, the JSON listing.
"""

from __future__ import annotations

import itertools
import json
import os
import random

from locust import FastHttpUser, constant, task

with open(os.environ["SAPO_LOAD_CONFIG"]) as _f:
    CONFIG = json.load(_f)
# one bundle a line; read as they are sent (gevent: one reader at a time), open for the process's life
_LINES = open(CONFIG["bundles"], "rb")  # noqa: SIM115
_TOKENS = itertools.cycle(CONFIG["tokens"])
_SUBMISSIONS = list(CONFIG["submissions"])


class Visitor(FastHttpUser):
    """One closed-loop visitor: 2 submissions, 3 board pages, 4 episode views, 1 listing per 10 requests."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.auth = {"Authorization": f"Bearer {next(_TOKENS)}", "Content-Type": "application/json"}

    @task(2)
    def submit(self) -> None:
        body = _LINES.readline()
        if not body:  # counted as a failed submission, without a request
            self.environment.events.request.fire(
                request_type="POST",
                name="submit",
                response_time=0,
                response_length=0,
                exception=RuntimeError("the pre-generated bundles ran out (raise --bundles)"),
            )
            return
        with self.client.post(
            "/api/v1/submissions", data=body, headers=self.auth, name="submit", catch_response=True
        ) as response:
            if response.status_code == 201:
                _SUBMISSIONS.append(response.json()["id"])
                response.success()
            else:
                response.failure(f"{response.status_code}: {(response.text or '')[:200]}")

    @task(3)
    def board(self) -> None:
        self.client.get(f"/board/{CONFIG['spec_hash']}", name="board page")

    @task(4)
    def episode(self) -> None:
        sid = random.choice(_SUBMISSIONS)
        self.client.get(f"/submission/{sid}/episode/{random.randrange(CONFIG['episodes'])}", name="episode view")

    @task(1)
    def listing(self) -> None:
        self.client.get("/api/v1/submissions?limit=50", name="JSON listing")
