"""The light install, as a new user gets it: ``pip install sapo-gym`` with no extras, in a fresh venv.

The wheel is built from the checkout's files, installed into a venv that has nothing but what the wheel
requires (pip fetches them from the package index), and :mod:`tests.support.light_contract` runs there with
the venv's own python, outside the checkout: ``gym.make`` and ``check_env`` on every env, one expert
episode after another, ``gym.make_vec`` (entry point and gymnasium's own classes, in sync and async), and spec hashes and episode digests equal to
the ones pinned from the full install (``tests/support/light_contract_pins.json``: recorded at 8eeb2ff,
before the light install existed, with spaCy, bm25s, alfworld and textworld installed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.alfworld import find_data

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "tests" / "support"
PINS = json.loads((SUPPORT / "light_contract_pins.json").read_text())
MAX_INSTALL_MB = 150
"""The issue's bound on the installed size (site-packages of the fresh venv, pip and setuptools excluded)."""


def _run(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def _source_tree(dest: Path) -> Path:
    """The checkout's files (tracked, plus untracked ones git does not ignore) copied to ``dest``."""
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], 60, cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    for name in filter(None, listed.stdout.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _site_packages_mb(venv: Path) -> float:
    (site,) = venv.glob("lib/python*/site-packages")
    skip = ("pip", "setuptools", "_distutils_hack", "pkg_resources")
    total = sum(
        f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.relative_to(site).parts[0].startswith(skip)
    )
    return total / 2**20


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("light")
    src = _source_tree(tmp / "src")
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp / "dist"),
            str(src),
        ],
        600,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    (wheel,) = (tmp / "dist").glob("sapo_gym-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], 300)
    assert made.returncode == 0, made.stderr
    start = time.monotonic()
    installed = _run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)], 900)
    seconds = time.monotonic() - start
    assert installed.returncode == 0, installed.stderr[-4000:]
    packages = json.loads(_run([str(venv / "bin" / "pip"), "list", "--format=json"], 120).stdout)
    size = _site_packages_mb(venv)
    print(
        f"\n[light install] wheel {wheel.stat().st_size / 2**10:.0f} KiB; {len(packages)} packages, "
        f"{size:.0f} MiB in site-packages, installed in {seconds:.0f} s: "
        + ", ".join(sorted(p["name"] for p in packages))
    )
    return venv


def _light_env(tmp: Path) -> dict[str, str]:
    """The user's environment: no PYTHONPATH into the checkout, a fresh cache, the data when present (found, not
    taken from this process's $ALFWORLD_DATA, which ``import alfworld`` may have pointed at an empty cache)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ALFWORLD_DATA")}
    env["SAPO_GYM_CACHE"] = str(tmp / "cache")
    env["HOME"] = str(tmp / "home")
    data = find_data()
    if data is not None:
        env["ALFWORLD_DATA"] = str(data)
    return env


def test_light_install_is_small_and_has_no_heavy_packages(light_venv):
    names = {
        p["name"].lower()
        for p in json.loads(_run([str(light_venv / "bin" / "pip"), "list", "--format=json"], 120).stdout)
    }
    heavy = {"torch", "scipy", "spacy", "textworld", "alfworld", "bm25s", "flask", "transformers", "ray"}
    assert not names & heavy, names & heavy
    assert _site_packages_mb(light_venv) < MAX_INSTALL_MB


def test_light_install_plays_every_env_as_the_full_install(light_venv, tmp_path):
    official = find_data() is not None
    out = _run(
        [str(light_venv / "bin" / "python"), "-I", str(SUPPORT / "light_contract.py"), "--vector", "--official"],
        1200,
        cwd=tmp_path,
        env=_light_env(tmp_path),
    )
    assert out.returncode == 0, out.stderr[-6000:]
    result = json.loads(out.stdout)
    assert result["heavy_modules"] == []
    expected = {k: v for k, v in PINS["cases"].items() if official or k != "sapo/ALFWorld-v0:eval_out_of_distribution"}
    for key, pinned in expected.items():
        got = result["cases"][key]
        assert got["spec_hash"] == pinned["spec_hash"], key
        assert got["episodes"] == pinned["episodes"], key
        vector = got["vector_steps"]
        assert vector["entry-sync"] >= 1 and vector["entry-async"] >= 1, key
        ragged = not key.startswith("sapo/Vault")  # ALFWorld's and WebShop's action masks differ in length per env
        assert all((vector[m] == "refused") if ragged else vector[m] >= 1 for m in ("gym-sync", "gym-async")), key
    assert set(result["cases"]) == set(expected)


def test_light_install_cli_says_what_is_usable_and_names_extras(light_venv, tmp_path):
    cli = str(light_venv / "bin" / "sapo-gym")
    envs = _run([cli, "envs", "--no-counts"], 300, cwd=tmp_path, env=_light_env(tmp_path))
    assert envs.returncode == 0, envs.stderr
    blocks = dict(b.split(None, 1) for b in ("\n" + envs.stdout).split("\nsapo/")[1:])
    for env_id in ("ALFWorld-v0", "ALFWorld-Mini-v0", "WebShop-v0", "Vault-v0"):
        assert "usable here: yes" in blocks[env_id], blocks[env_id]
    assert "sapo-gym[browser" in blocks["WebShop-Browser-v0"]
    train = _run(
        [cli, "train", "--env", "sapo/Vault-v0", "--iterations", "1"], 300, cwd=tmp_path, env=_light_env(tmp_path)
    )
    assert train.returncode != 0 and "pip install 'sapo-gym[train]'" in train.stdout + train.stderr
