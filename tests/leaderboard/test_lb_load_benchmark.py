"""benchmarks/leaderboard_load.py without locust or PostgreSQL: its CSV parsing and table on a synthetic locust
``*_stats.csv``, its /proc probes on this process, and the bundles it generates (each one new work, admitted)."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.leaderboard_load import ROWS, mixed_bundle, read_stats, summarize, table
from benchmarks.leaderboard_load_probe import children, machine_line, rss_kib, tree_cpu
from leaderboard.server.works import episode_works

HEADER = (
    "Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
    "Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%"
)


def _csv(tmp_path: Path, name: str, rows: list[tuple[str, str, int, int, int, int]]) -> Path:
    """A locust 2.x stats CSV: (type, name, requests, failures, p50, p95) per row."""
    lines = [HEADER]
    for kind, label, n, fails, p50, p95 in rows:
        lines.append(
            f"{kind},{label},{n},{fails},{p50},{p50 + 1.5},1.0,{p95 + 10},1000.0,{n / 60},{fails / 60},"
            f"{p50},{p50},{p50},{p95},{p95},{p95},{p95},{p95},{p95},{p95},{p95 + 10}"
        )
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _probe(workers: int) -> dict:
    return {
        "server processes": workers + (workers > 1),
        "RSS per server process, max MiB": [100.0] * (workers + (workers > 1)),
        "RSS of all server processes, MiB": 100.0 * (workers + (workers > 1)),
        "PostgreSQL client backends, max": 4 * workers,
        "CPU cores: server processes": 0.9 * workers,
        "CPU cores: PostgreSQL": 0.2,
        "CPU cores: locust": 0.1,
        "CPU cores: anything else (this sampler, other jobs)": 0.1,
        "CPU cores busy, whole machine": 1.3,
    }


def test_locust_csv_is_parsed_into_the_side_by_side_table(tmp_path: Path) -> None:
    one = read_stats(
        _csv(
            tmp_path,
            "w1_stats.csv",
            [
                ("POST", "submit", 600, 0, 290, 720),
                ("GET", "board page", 900, 3, 260, 390),
                ("GET", "episode view", 1200, 0, 190, 310),
                ("GET", "JSON listing", 300, 0, 160, 240),
                ("", "Aggregated", 3000, 3, 220, 370),
            ],
        )
    )
    assert one["board page"] == {"requests": 900, "failures": 3, "rps": 15.0, "p50": 260, "p95": 390}
    four = read_stats(
        _csv(
            tmp_path,
            "w4_stats.csv",
            [
                ("POST", "submit", 1200, 0, 150, 360),
                ("GET", "board page", 1800, 0, 130, 195),
                ("GET", "episode view", 2400, 0, 95, 155),
                ("", "Aggregated", 5400, 0, 110, 185),
            ],
        )
    )
    results = {1: summarize(one, 60.0, _probe(1)), 4: summarize(four, 60.0, _probe(4))}
    assert results[1]["submissions/s"] == 10.0 and results[4]["submissions/s"] == 20.0
    assert results[1]["error rate"] == 0.001 and results[4]["error rate"] == 0.0
    assert results[1]["board page p50 / p95 ms"] == (260, 390)
    text = table(results).splitlines()
    assert text[0] == "|  | 1 process | 4 processes | 4 / 1 |"
    assert len(text) == 2 + len(ROWS)
    row = {line.split(" | ")[0].lstrip("| "): line.split(" | ")[1:] for line in text[2:]}
    assert row["submissions/s"] == ["10", "20", "2.00 |"]
    assert row["board page p50 / p95 ms"] == ["260 / 390", "130 / 195", "0.50 / 0.50 |"]
    assert row["JSON listing p50 / p95 ms"][1] == "– / –"  # no such request at 4: shown as missing, not as 0
    assert row["RSS per server process, max MiB"][1] == "100, 100, 100, 100, 100"
    assert row["error rate"][:2] == ["0.0010", "0"]
    assert row["CPU cores: server processes"] == ["0.9", "3.6", "4.00 |"]


def test_a_single_configuration_has_no_ratio_column(tmp_path: Path) -> None:
    stats = read_stats(
        _csv(tmp_path, "s.csv", [("POST", "submit", 60, 6, 100, 200), ("", "Aggregated", 60, 6, 100, 200)])
    )
    text = table({1: summarize(stats, 30.0, _probe(1))})
    assert text.splitlines()[0] == "|  | 1 process |" and "| submissions/s | 1.8 |" in text


def test_the_proc_probes_read_this_process() -> None:
    assert rss_kib(os.getpid()) > 1000 and rss_kib(2**22 + 12345) is None
    assert tree_cpu(os.getpid()) > 0
    assert os.getpid() not in children(os.getpid())
    assert machine_line().startswith("Machine: ") and f"{os.cpu_count()} cores" in machine_line()


def test_generated_bundles_are_each_new_work_and_admitted(client, store, expert_bundle, random_bundle) -> None:  # type: ignore[no-untyped-def]
    bundles = [mixed_bundle(expert_bundle, random_bundle, i, 4, f"load {i}") for i in range(4)]
    works = [set(episode_works(b)) for b in bundles]
    assert all(not (works[i] & works[j]) for i in range(4) for j in range(i))
    assert bundles[0]["aggregates"]["all"]["success"] < bundles[3]["aggregates"]["all"]["success"]
    for i, bundle in enumerate(bundles):  # two tokens in turn, as the visitors submit: none refused as another's work
        _, token = store.create_token(f"visitor {i % 2}")
        response = client.post("/api/v1/submissions", json=bundle, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 201, response.get_json()
