"""Executors: one adapter module per agent CLI, looked up by name.

Built-ins are registered here; an outside package can add one through the ``prun.executors``
entry point group (``name = "package.module:ExecutorClass"``).
"""

from __future__ import annotations

from importlib import import_module

from ..errors import UsageError
from .base import Executor

# name -> "module:Class", imported only when used
BUILTIN = {
    "agy": "prun.executors.agy:Agy",
    "claude": "prun.executors.claude:Claude",
    "command": "prun.executors.command:Command",
    "gemini": "prun.executors.gemini:Gemini",
    "session": "prun.executors.session:Session",
}

REFUSED = {
    "codex": "codex is not a prun executor: its quota is reserved for the /vet reviewer role "
             "(route the unit to agy, claude, gemini, session or command)",
}


def names() -> list[str]:
    return sorted(BUILTIN) + sorted(n for n in _plugins() if n not in BUILTIN)


def get(name: str) -> Executor:
    """The executor called ``name``; refused (UsageError) when it is unknown or excluded."""
    if name in REFUSED:
        raise UsageError(REFUSED[name])
    target = BUILTIN.get(name) or _plugins().get(name)
    if not target:
        raise UsageError(f"unknown executor {name!r}", hint="choose one of " + ", ".join(names()))
    module, _, cls = target.partition(":")
    return getattr(import_module(module), cls)()


def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points

    try:
        return {ep.name: ep.value for ep in entry_points(group="prun.executors")}
    except Exception:  # a broken third-party distribution must not break prun
        return {}
