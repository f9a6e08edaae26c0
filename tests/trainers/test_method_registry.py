"""The method registry is whole, and everything that names the methods reads it (no hand-kept list).

A method is half-registered when its entry's entry point does not load, loads something that is not a
``Method`` subclass of the same name, or lacks a label or summary, or when a ``Method`` subclass under
``trainers/methods/`` has no entry: :func:`registry_problems` lists each, and it is checked on broken tables too.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainers.method_registry import GROUP_SIZE, METHODS, MethodEntry

ROOT = Path(__file__).resolve().parents[2]


def registry_problems(methods: dict[str, MethodEntry]) -> list[str]:
    """What is half-registered in ``methods`` (empty when the table and trainers/methods/ agree)."""
    import trainers.methods
    from trainers.config import TrainConfig
    from trainers.methods import method_class
    from trainers.methods.base import Method

    problems = []
    for key, entry in methods.items():
        if key != entry.name or not entry.label or not entry.summary:
            problems.append(f"{key}: key, name, label and summary must be set ({entry})")
        unknown = sorted({name for name, _ in entry.settings} - {f.name for f in dataclasses.fields(TrainConfig)})
        if unknown:
            problems.append(f"{key}: settings name no TrainConfig field: {unknown}")
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr("trainers.methods.METHODS", methods)
                method_class(key)
        except (ImportError, AttributeError, TypeError) as exc:
            problems.append(f"{key}: {type(exc).__name__}: {exc}")
    registered = {entry.entry_point for entry in methods.values()}
    for info in pkgutil.iter_modules(trainers.methods.__path__, "trainers.methods."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, Method)
                and cls is not Method
                and cls.__module__ == info.name
                and f"{info.name}:{name}" not in registered
            ):
                problems.append(f"{info.name}:{name} is a Method with no registry entry")
    return problems


def test_every_method_is_registered_whole():
    assert registry_problems(METHODS) == []


def test_half_registered_methods_are_caught():
    rloo = METHODS["rloo"]
    missing = {k: v for k, v in METHODS.items() if k != "rloo"}
    assert registry_problems(missing) == ["trainers.methods.rloo:RLOO is a Method with no registry entry"]
    broken = {
        **METHODS,
        "rloo": dataclasses.replace(rloo, entry_point="trainers.methods.rloo:RLO"),  # a typo: nothing to load
        "nomod": MethodEntry("nomod", "NoMod", "trainers.methods.nomod:NoMod", "a module that is not there"),
        "notamethod": MethodEntry("notamethod", "X", "trainers.config:TrainConfig", "not a Method subclass"),
        "misnamed": MethodEntry("misnamed", "M", "trainers.methods.grpo:GRPO", "a class registered under another name"),
        "nolabel": dataclasses.replace(METHODS["ppo"], name="nolabel", label=""),
        "badsetting": dataclasses.replace(METHODS["sapo-noq"], name="badsetting", settings=(("q_coeff", 0.0),)),
        "unsetvariant": dataclasses.replace(METHODS["sapo-noq"], name="unsetvariant", settings=()),
    }
    found = "\n".join(registry_problems(broken))
    for needle in (
        "rloo: AttributeError",
        "nomod: ModuleNotFoundError",
        "notamethod: TypeError",
        "misnamed: TypeError",
        "nolabel: key, name, label and summary",
        "trainers.methods.rloo:RLOO is a Method with no registry",
        "badsetting: settings name no TrainConfig field: ['q_coeff']",
        "unsetvariant: TypeError",
    ):
        assert needle in found, found


def test_the_method_lists_derive_from_the_registry():
    from trainers.compare.config import label
    from trainers.compare.plots import COLOURS
    from trainers.config import ALGOS, CHOICES, GROUP_ALGOS, TrainConfig, add_arguments

    assert tuple(METHODS) == ALGOS and CHOICES["algo"] == ALGOS
    assert tuple(k for k, e in METHODS.items() if e.group) == GROUP_ALGOS
    for algo, entry in METHODS.items():
        assert TrainConfig(algo=algo).rollouts_per_task == (GROUP_SIZE if entry.group else 1)
        assert label(algo) == entry.label and COLOURS.get(algo, "") == entry.colour  # colour: optional
    assert label("gigpo") == "GiGPO"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    action = next(a for a in parser._actions if a.dest == "algo")
    assert action.choices == list(ALGOS)
    assert all(f"{e.name} ({e.summary})" in action.help for e in METHODS.values()) and "{" not in action.help


def test_the_cli_names_every_method_in_its_help():
    from sapo_cli.compare import register as register_compare
    from sapo_cli.train import register as register_train

    sub = argparse.ArgumentParser().add_subparsers()
    register_train(sub)
    register_compare(sub)
    compare = sub.choices["compare"]
    algos = next(a for a in compare._actions if a.dest == "algos")
    assert ", ".join(METHODS) in algos.help
    for parser in sub._choices_actions:
        assert all(e.label in parser.help for e in METHODS.values()), parser.help


def test_the_config_and_help_load_no_torch():
    code = (
        "import sys, argparse; import trainers.config, trainers.methods, trainers.compare.config; "
        "from sapo_cli.train import register; register(argparse.ArgumentParser().add_subparsers()); "
        "import trainers.methods as m; m.METHODS['sapo'].default_group_size; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_no_hand_kept_list_of_method_names():
    """Outside the registry, no source of the packages or benchmarks spells the methods out as a tuple or list (a set
    of the three a ratio compares, like benchmarks/gpu_check.py's, is not a list of the methods)."""
    pattern = re.compile(r"""[\[(]\s*["']sapo["'],\s*["']ppo["'],\s*["']grpo["']""")
    hits = []
    for top in ("trainers", "sapo_cli", "agents", "leaderboard", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line) and "sapo,ppo,grpo" not in line:
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == [], "\n".join(hits)
