"""The methods, as the small parts of the shared loop where they differ; :data:`METHODS` lists them.

Importing this package loads no torch (``trainers.config`` reads :mod:`trainers.method_registry`): the classes
(``SAPO``, ``PPO``, ..., ``Method``) are imported on first use, through their registry entry points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainers.method_registry import GROUP_SIZE, METHODS, MethodEntry, method_label

if TYPE_CHECKING:
    from trainers.config import TrainConfig
    from trainers.methods.base import Method

__all__ = [
    "Method",
    "SAPO",
    "PPO",
    "GRPO",
    "GiGPO",
    "RLOO",
    "GROUP_SIZE",
    "METHODS",
    "MethodEntry",
    "make_method",
    "method_class",
    "method_label",
]


def method_class(algo: str) -> type[Method]:
    """The class registered as ``algo`` (imports it); a :class:`TypeError` when its entry point is not a ``Method``
    subclass whose ``name`` is ``algo``, or for an entry with ``settings``, the class of the entry named by it."""
    from trainers.methods.base import Method

    entry = METHODS[algo]
    cls = entry.load()
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise TypeError(f"method {algo!r}: entry point {entry.entry_point} is not a Method subclass")
    base = METHODS.get(cls.name)
    if cls.name != algo and not (entry.settings and base is not None and base.entry_point == entry.entry_point):
        raise TypeError(
            f"method {algo!r}: entry point {entry.entry_point} is a Method subclass named {cls.name!r}, "
            f"not {algo!r} (only an entry with settings may reuse a registered method's class)"
        )
    return cls


def make_method(cfg: TrainConfig, policy: Any) -> Method:
    """The method named by ``cfg.algo`` over ``policy`` (PPO builds its critic here)."""
    return method_class(cfg.algo)(cfg, policy)


def __getattr__(name: str) -> Any:
    """``trainers.methods.SAPO`` and the like: the registered class whose entry point ends in ``name``."""
    if name == "Method":
        from trainers.methods.base import Method

        return Method
    for entry in METHODS.values():
        if entry.entry_point.rpartition(":")[2] == name:
            return method_class(entry.name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
