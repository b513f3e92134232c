"""Executors: one adapter module per agent CLI, found by name in one registry.

Every executor is registered the same way, built-in or not: an entry point in the
``prun.executors`` group naming its class. prun declares its own in its ``pyproject.toml``::

    [project.entry-points."prun.executors"]
    claude = "prun.executors.claude:Claude"
    agy = "prun.executors.agy:Agy"
    ...

and an outside package declares its executors the same way in its own ``pyproject.toml``
(``name = "package.module:Class"``, a subclass of ``Executor`` whose ``name`` is that name).

``BUILTIN`` repeats prun's own declarations (a test keeps it equal to ``pyproject.toml``). It is
the fallback that finds the built-ins where prun's distribution metadata does not list them: a
source checkout on ``PYTHONPATH`` that was never installed, or an install older than the table
(``pip install -e .`` again brings the metadata up to date). It also answers for a built-in name
without reading any metadata: reading entry points imports ``importlib.metadata``, which costs
more than the dispatcher's whole path to its ``STATE-DIR`` line. A built-in's name always means
the built-in; another distribution's entry point of that name is ignored.

Lookups stay cheap: an executor's module is imported only when its class is needed, and the
entry points are read at most once per process, only for a name that is not a built-in or when
every executor is wanted.

    names()        every registered name, sorted (for messages)
    known(name)    whether ``name`` is registered (no metadata read for a built-in)
    get(name)      an instance of the executor ``name``; refuses codex and unknown names
    all()          an instance of every executor: the built-ins in ``BUILTIN``'s order, then
                   the others by name (quota groups and routing pools are read from these)
    refusal(name)  the UsageError for a name prun refuses whatever else is asked (codex), or None
    missing(env)   name -> why (not-installed, not-signed-in) of each executor that cannot take
                   a unit on this machine
"""

from __future__ import annotations

from functools import cache
from importlib import import_module

from ..errors import UsageError
from .base import Executor

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Mapping

GROUP = "prun.executors"

# prun's own executors, name -> "module:Class", exactly as pyproject.toml declares them. The
# order is the registry's order: ``prun quota`` lists the executors' quota groups in it (the
# coordinator's Claude account first, then agy's two groups, then Gemini CLI's).
BUILTIN = {
    "claude": "prun.executors.claude:Claude",
    "agy": "prun.executors.agy:Agy",
    "gemini": "prun.executors.gemini:Gemini",
    "session": "prun.executors.session:Session",
    "command": "prun.executors.command:Command",
}

# Names prun never runs: name -> (why, what to do instead).
REFUSED = {
    "codex": ("its quota is reserved for the /vet reviewer role",
              "route the unit to agy, claude, gemini, session or command"),
}

_classes: dict[str, type[Executor]] = {}


def refusal(name: str) -> UsageError | None:
    """The refusal of a name prun never runs (``codex``), or None."""
    if name not in REFUSED:
        return None
    why, instead = REFUSED[name]
    return UsageError(f"{name} is not a prun executor: {why}", hint=instead)


def names() -> list[str]:
    """Every registered executor's name, sorted."""
    return sorted(_targets())


def known(name: str) -> bool:
    """Whether an executor called ``name`` is registered (refused names are not)."""
    return name in BUILTIN or name in _declared()


def get(name: str) -> Executor:
    """The executor called ``name``; refused (UsageError) when it is unknown or excluded."""
    refused = refusal(name)
    if refused:
        raise refused
    return _load(name)()


def lookup(name: str | None) -> type[Executor] | None:
    """The class registered as ``name``, or None when none is (a record read back may name
    an executor that is no longer installed): for asking its flags."""
    if not name or not known(name):
        return None
    return _load(name)


def all() -> list[Executor]:  # shadows the builtin here only: callers write executors.all()
    """An instance of every registered executor, built-ins first (in ``BUILTIN``'s order)."""
    return [_load(name)() for name in _targets()]


def missing(env: Mapping[str, str]) -> dict[str, str]:
    """name -> why (``base.NOT_INSTALLED``, ``base.NOT_SIGNED_IN``) of every executor that
    cannot take a unit on this machine (``Executor.missing``)."""
    return {ex.name: why for ex in all() if (why := ex.missing(env))}


def quota_groups() -> tuple[str, ...]:
    """Every quota group the executors declare (``Executor.quota_groups``), in the registry's
    order: what ``prun quota`` lists even before anything was read."""
    return tuple(dict.fromkeys(g for ex in all() for g in ex.quota_groups()))


def _targets() -> dict[str, str]:
    """name -> "module:Class" of every executor: the built-ins, then the others by name."""
    declared = _declared()
    return {**BUILTIN, **{n: declared[n] for n in sorted(declared) if n not in BUILTIN}}


@cache
def _declared() -> dict[str, str]:
    """The ``prun.executors`` entry points of every installed distribution, read once per
    process (the first distribution on ``sys.path`` wins a name, as ``importlib`` finds them).
    A broken third-party distribution must not break prun: its entry points are skipped."""
    from importlib.metadata import entry_points

    found: dict[str, str] = {}
    try:
        for ep in entry_points(group=GROUP):
            found.setdefault(ep.name, ep.value)
    except Exception:
        return found
    return found


def _load(name: str) -> type[Executor]:
    """The class registered as ``name``, imported the first time it is asked for."""
    if name in _classes:
        return _classes[name]
    target = BUILTIN.get(name) or _declared().get(name)
    if not target:
        raise UsageError(f"unknown executor {name!r}", hint="choose one of " + ", ".join(names()))
    module, _, attr = target.partition(":")
    try:
        cls = getattr(import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"executor {name!r} ({target}) cannot be loaded: {e}",
                         hint=f"fix or uninstall the package that declares it in the {GROUP} "
                         "entry points")
    if not (isinstance(cls, type) and issubclass(cls, Executor)) or getattr(cls, "name", None) != name:
        raise UsageError(f"executor {name!r} ({target}) is not an Executor subclass named "
                         f"{name!r}", hint=f"point the {GROUP} entry point {name!r} at a "
                         "subclass of prun.executors.base.Executor whose name is the same")
    _classes[name] = cls
    return cls


def quota_probe(group: str) -> tuple[str, ...] | None:
    """The built-in probe of ``group``: that of the first executor drawing on it that has one
    (``Executor.quota_probe``), or None."""
    for ex in all():
        if group in ex.quota_groups() and (argv := ex.quota_probe(group)):
            return argv
    return None

