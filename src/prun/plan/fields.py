"""The checks of single packet and plan fields that the schemas cannot make: the executor
against the registry, the data boundary, ``sandbox``, ``deadline``; and their conversions
(command lines as text). Every refusal is a ``UsageError`` at the field's line.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from .._util import yamldoc
from .._util.timeparse import parse_duration
from ..errors import UsageError
from .model import DataBoundary
from .validation import _dotted


def _join_argv(value) -> str | None:
    if value is None:
        return None
    return shlex.join(value) if isinstance(value, list) else str(value)


def _executor(fields: Mapping[str, Any]) -> str:
    """The executor ``fields`` name; without one, ``command`` for a packet with a command (the
    packet format's rule), else ``auto`` (routing chooses)."""
    return fields.get("executor") or ("command" if fields.get("command") else "auto")


def _check_executor(doc: yamldoc.Doc, where: Sequence[str | int], name: str) -> None:
    """Refuse an executor name the registry does not know (or refuses: codex), at its line."""
    from .. import executors

    if name == "auto" or executors.known(name):
        return
    at = [*where, "executor"]
    prefix = f"{doc.source}:{doc.line_of(at)}: {_dotted(at)}"
    refused = executors.refusal(name)
    if refused:
        raise UsageError(f"{prefix}: {refused.message}", hint=refused.hint)
    choices = ["auto", *executors.names()]
    close = difflib.get_close_matches(name, choices, n=1)
    raise UsageError(f"{prefix}: unknown executor {name!r}",
                     hint=f"did you mean {close[0]!r}?" if close
                     else "choose one of " + ", ".join(choices))


def _boundary(doc: yamldoc.Doc, where: Sequence[str | int], raw: Mapping[str, Any],
              fields: Mapping[str, Any], who: str) -> DataBoundary:
    """The data boundary of ``fields``, checked (see ``prun.plan.boundary``): every ``may_go_to``
    entry an executor or a family, a ``keep`` retention with a good duration, and a named
    executor inside the boundary. Lines point at the packet's own fields (``raw``)."""
    from .. import executors
    from . import boundary

    data = fields.get("data") or {}
    raw_go = data.get("may_go_to")
    may_go_to = _strs(raw_go)
    bad = boundary.unknown(may_go_to)
    if bad is not None:
        at = [*where, "data", "may_go_to"] + ([may_go_to.index(bad)] if isinstance(raw_go, list)
                                              else [])
        raise UsageError(f"{doc.source}:{doc.line_of(at)}: {_dotted(at)}: {bad!r} is neither "
                         "an executor nor a provider family",
                         hint=f"use executors ({', '.join(executors.names())}) or families "
                         f"({', '.join(boundary.FAMILIES)})")
    try:
        boundary.parse_retention(data.get("retention"))
    except UsageError as e:
        raise UsageError(f"{doc.source}:{doc.line_of([*where, 'data', 'retention'])}: "
                         f"{e.message}", hint=e.hint)
    executor = _executor(fields)
    model = fields.get("model")
    if may_go_to and executor != "auto" and not boundary.allowed(may_go_to, executor, model):
        line = next((doc.line_of([*where, *path]) for path in
                     (("executor",), ("data", "may_go_to"), ("model",)) if path[0] in raw),
                    doc.line_of(where))
        raise boundary.outside(who, executor, model, may_go_to, f"{doc.source}:{line}")
    return DataBoundary(reachable=_strs(data.get("reachable")), may_go_to=may_go_to,
                        prohibited=_strs(data.get("prohibited")),
                        retention=data.get("retention"))


def _sandbox(doc: yamldoc.Doc, where: Sequence[str | int], value) -> str | None:
    """A ``sandbox:`` value as auto, on or off (YAML's unquoted on/off are booleans)."""
    if value is None:
        return None
    from ..settings import parse_sandbox

    try:
        return parse_sandbox(value)
    except UsageError as e:
        raise UsageError(f"{doc.source}:{doc.line_of(list(where))}: {e.message}", hint=e.hint)


def _strs(value) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _deadline(doc, value) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    try:
        parse_duration(value)
        return str(value)
    except UsageError:
        pass
    import datetime as dt

    try:
        dt.datetime.fromisoformat(str(value))
        return str(value)
    except ValueError:
        raise UsageError(f"{doc.source}:{doc.line_of(['deadline'])}: bad deadline {value!r}",
                         hint="give a duration from the start (90m, 2h) or an ISO time "
                         "(2026-12-01T18:00:00Z)")


