"""``sapo-gym bundle``: an adapter's rollouts file (episodes filed under "sapo_gym") becomes a bundle that is
replayed before it is written, with the per-category table and the board check; rollouts that do not replay are
refused and no bundle is written."""

from __future__ import annotations

import json

from sapo_cli import main
from sapo_gym.bundle import check_bundle
from sapo_gym.integrations.episodes import PAYLOAD_KEY, EpisodePlay, task_rows
from tests.support.integrations import expert_script

VAULT = "sapo/Vault-v0"


def _rollouts(path, limit=None):
    """Expert episodes of Vault's test split, one JSON line each, nested as an ecosystem's output nests them."""
    script = expert_script(VAULT, "test", (0,), 16)
    with open(path, "w") as fh:
        for row, _ in task_rows(VAULT, "test", limit=limit):
            episode = EpisodePlay(row)
            while not episode.done:
                episode.step(script[episode.observation])
            episode.close()
            fh.write(json.dumps({"traces": [{"info": {PAYLOAD_KEY: episode.payload()}}]}) + "\n")


def test_bundle_from_rollouts_lands_on_the_board(tmp_path, capsys):
    _rollouts(tmp_path / "traces.jsonl")
    out = tmp_path / "bundle.json"
    assert main(["bundle", str(tmp_path / "traces.jsonl"), "--out", str(out), "--agent-name", "scripted expert"]) == 0
    printed = capsys.readouterr()
    bundle = json.loads(out.read_text())
    check_bundle(bundle)
    assert bundle["agent"]["name"] == "scripted expert" and bundle["evaluation"]["mode"] == {"name": "every-task"}
    assert len(bundle["episodes"]) == 16 and bundle["aggregates"]["all"]["success"] == 1.0
    assert "replay: all 16 episodes reproduced exactly" in printed.err
    assert "board check: the bundle can land on board sapo/Vault-v0:test" in printed.err
    assert "all" in printed.out and f"wrote {out}: 16 episodes" in printed.out


def test_part_of_a_split_is_written_but_cannot_land(tmp_path, capsys):
    _rollouts(tmp_path / "traces.jsonl", limit=3)
    assert main(["bundle", str(tmp_path / "traces.jsonl"), "--out", str(tmp_path / "b.json")]) == 0
    assert "board check: the bundle cannot land on a board" in capsys.readouterr().err


def test_rollouts_that_do_not_replay_are_refused(tmp_path, capsys):
    _rollouts(tmp_path / "traces.jsonl", limit=2)
    lines = (tmp_path / "traces.jsonl").read_text().splitlines()
    forged = json.loads(lines[1])
    forged["traces"][0]["info"][PAYLOAD_KEY]["record"]["turns"][0]["observation"] = "The vault swings open."
    (tmp_path / "traces.jsonl").write_text(lines[0] + "\n" + json.dumps(forged) + "\n")
    assert main(["bundle", str(tmp_path / "traces.jsonl"), "--out", str(tmp_path / "b.json")]) == 2
    assert "do not replay: episode 1" in capsys.readouterr().err and not (tmp_path / "b.json").exists()
