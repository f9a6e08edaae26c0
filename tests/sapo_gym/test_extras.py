"""sapo_gym.extras: the extras table agrees with pyproject.toml, and a missing optional package on the env
path is an ImportError naming the extra (checked in subprocesses where the packages are hidden)."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, packages_distributions, requires
from importlib.util import find_spec
from pathlib import Path

import pytest

from sapo_gym.extras import EXTRAS, MissingExtra, install_command, naming_extra
from tests.support.blocked import run_without

ROOT = Path(__file__).resolve().parents[2]
_NO_DEPS = {"openenv"}
"""Installed beside an extra with ``pip install --no-deps`` (install_command says so), not listed in it."""


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0]).lower()


def _pyproject_extras() -> dict[str, set[str]]:
    tomllib = pytest.importorskip("tomllib")
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {extra: {_name(r) for r in reqs} for extra, reqs in table.items()}


def _with_their_requirements(dists: set[str]) -> set[str]:
    out = set(dists)
    for dist in dists:
        try:
            # alfworld requires textworld[pddl], whose pddl extra brings Fast Downward
            out |= {_name(r) for r in requires(dist) or () if "extra ==" not in r or "pddl" in r}
        except PackageNotFoundError:
            pass
    return out


def test_every_module_of_the_table_comes_with_its_extra():
    extras, owners = _pyproject_extras(), packages_distributions()
    checked = 0
    for extra, modules in EXTRAS.items():
        assert extra in extras, extra
        provided = _with_their_requirements(extras[extra])
        for module in modules:
            if module in _NO_DEPS or find_spec(module) is None:
                continue  # not installed here: nothing to check it against
            assert {_name(d) for d in owners.get(module, [])} & provided, (extra, module, owners.get(module))
            checked += 1
    assert checked >= 20  # the dev setup installs most extras


def test_naming_extra_names_the_extra_of_an_optional_module_only():
    named = naming_extra(ModuleNotFoundError("No module named 'torch'", name="torch"), "sapo-gym train")
    assert isinstance(named, MissingExtra) and named.name == "torch"
    assert str(named) == "sapo-gym train needs the train extra (no module named 'torch'): pip install 'sapo-gym[train]'"
    werkzeug = naming_extra(ModuleNotFoundError(name="werkzeug.serving"), "the browser env", ("browser", "webshop"))
    assert str(werkzeug).endswith("pip install 'sapo-gym[browser,webshop]'")  # werkzeug comes with flask
    assert str(naming_extra(ModuleNotFoundError(name="ray"), "sapo-gym train")).endswith("pip install 'sapo-gym[ray]'")
    ours = ModuleNotFoundError(name="sapo_gym.no_such_module")
    assert naming_extra(ours, "x") is ours  # a bug of ours stays what it is
    assert install_command("serve") == "pip install 'sapo-gym[serve]' && pip install --no-deps openenv==0.10.0"


_MAKE = """
import gymnasium as gym, sapo_gym
from sapo_gym.extras import MissingExtra
for env_id, kwargs in {cases!r}:
    try:
        gym.make(env_id, **kwargs).close()
        print(env_id, "made")
    except MissingExtra as exc:
        print(env_id, exc)
"""


@pytest.mark.parametrize(
    ("hidden", "env_id", "kwargs", "fix"),
    [
        (("selenium",), "sapo/WebShop-Browser-v0", {}, "pip install 'sapo-gym[browser,webshop]'"),
        (("flask", "werkzeug"), "sapo/WebShop-Browser-v0", {}, "pip install 'sapo-gym[browser,webshop]'"),
        (
            ("openenv",),
            "sapo/Remote-v0",
            {"url": "http://127.0.0.1:9", "env_id": "sapo/Vault-v0"},
            "pip install 'sapo-gym[serve]' && pip install --no-deps openenv==0.10.0",
        ),
    ],
)
def test_making_an_env_without_its_extra_names_the_extra(hidden, env_id, kwargs, fix):
    done = run_without(_MAKE.format(cases=[(env_id, kwargs)]), hidden, hidden)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"{env_id} ") and done.stdout.rstrip().endswith(fix), done.stdout
