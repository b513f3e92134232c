"""The fields of packets and plans as the schemas let them through (``PacketFields``,
``PlanFields``), and the checks of single fields that the schemas cannot make: the executor
against the registry and what it can run, the data boundary, ``timeout``, ``sandbox``,
``deadline``; and their conversions (command lines as text). Every refusal is a
``UsageError`` at the field's line.
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
import shlex
from collections.abc import Sequence
from typing import TypedDict

from .. import executors
from .._util import yamldoc
from .._util.bounded import run
from .._util.sizes import parse_size
from .._util.timeparse import parse_duration
from ..errors import UsageError
from ..settings import parse_sandbox
from . import boundary
from .model import DataBoundary, Resources
from .routing import takes_session_tools
from .validation import dotted

Where = Sequence[str | int]     # a path of keys and indexes into a YAML document


class DataFields(TypedDict, total=False):
    """A packet's ``data`` mapping (packet.schema.json)."""

    reachable: str | list[str]
    may_go_to: str | list[str]
    prohibited: str | list[str]
    retention: str


class ResourceFields(TypedDict, total=False):
    """A packet's or plan's ``resources`` once the schema has passed them."""

    memory: int | str
    pids: int
    cpus: int | float


class PacketFields(TypedDict, total=False):
    """A packet's fields, or a plan's ``defaults`` (no ``id``), once the schema has passed
    them (packet.schema.json)."""

    id: str
    scope: str
    kind: str
    executor: str
    command: str | list[str]
    model: str
    effort: str
    mode: str
    owns: list[str]
    generates: list[str]
    reads: list[str]
    shared: dict[str, str]
    state: list[str]
    after: list[str]
    base: str
    timeout: int | float | str
    accept: str | list[str]
    accept_timeout: int | float | str
    followup: str
    followup_max: int
    candidates: int | list[str]
    data: DataFields
    resources: ResourceFields
    requires: list[str]
    session_tools: bool
    subdispatch: bool
    snapshot: bool
    sandbox: str | bool
    prompt: str
    prompt_file: str


class WorkspaceFields(TypedDict, total=False):
    """A plan's ``workspace`` mapping (plan.schema.json)."""

    prime: str | list[str]
    key: list[str]
    share: list[str]


class LimitFields(TypedDict, total=False):
    """A budget's limits (``budget:`` and each of its ``executors``)."""

    usd: int | float
    tokens: int


class BudgetFields(LimitFields, total=False):
    """A plan's ``budget:`` (plan.schema.json)."""

    executors: dict[str, LimitFields]


class PlanFields(TypedDict, total=False):
    """A plan's keys once the schema has passed them (plan.schema.json)."""

    name: str
    base: str
    sandbox: str | bool
    deadline: int | float | str
    cancel_owner: str
    cancel_action: str
    check: str | list[str]
    accept: str | list[str]
    accept_timeout: int | float | str
    parallel: int | str
    resources: ResourceFields
    budget: BudgetFields
    on_event: str | list[str]
    setup: str | list[str]
    workspace: WorkspaceFields
    cluster: str | dict[str, str]
    defaults: PacketFields
    packets: list[str | PacketFields]


def command_words(doc: yamldoc.Doc, where: Where, value: str | list[str] | None) -> None:
    """Refuse a packet's ``command:`` given as shell words that do not parse (an unbalanced
    quote), at its line: the command executor splits it with shell quoting rules."""
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as e:
            raise UsageError(f"{doc.where([*where, 'command'])}: {dotted([*where, 'command'])}: "
                             f"{value!r} is not shell words ({e})",
                             hint="close the quote, or give the command as a list of words")
        if not words:
            raise UsageError(f"{doc.where([*where, 'command'])}: {dotted([*where, 'command'])}: "
                             "names no program", hint="give the program and its arguments")


def shell_line(doc: yamldoc.Doc, key: str, value: str | list[str] | None) -> None:
    """Refuse a plan's ``check``, ``setup`` or ``on_event`` given as a shell line that
    ``/bin/sh`` cannot parse (``sh -n``: read, nothing run), at its line."""
    if not isinstance(value, str) or not os.path.exists(SH):
        return

    try:
        done = run([SH, "-n", "-c", value], timeout=10)
    except OSError:
        return
    if done.returncode not in (0, None):
        why = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["bad syntax"])[-1]
        raise UsageError(f"{doc.where([key])}: {key}: {value!r} is not a shell line /bin/sh "
                         f"can read ({why})", hint="fix the quoting, or give it as a list of "
                         "words (an argv)")


SH = "/bin/sh"


def join_argv(value: str | list[str] | None) -> str | None:
    """A command given as an argv list or shell words, as shell words."""
    if value is None:
        return None
    return shlex.join(value) if isinstance(value, list) else str(value)


def executor_of(fields: PacketFields) -> str:
    """The executor ``fields`` name; without one, ``command`` for a packet with a command (the
    packet format's rule), else ``auto`` (routing chooses)."""
    return fields.get("executor") or ("command" if fields.get("command") else "auto")


def check_executor(doc: yamldoc.Doc, where: Where, name: str, key: Where = ("executor",)) -> None:
    """Refuse an executor name the registry does not know (or refuses: codex), at its line
    (``key``: where under ``where`` it is written)."""
    if name == "auto" or executors.known(name):
        return
    at = [*where, *key]
    prefix = f"{doc.source}:{doc.line_of(at)}: {dotted(at)}"
    refused = executors.refusal(name)
    if refused:
        raise UsageError(f"{prefix}: {refused.message}", hint=refused.hint)
    choices = ["auto", *executors.names()]
    close = difflib.get_close_matches(name, choices, n=1)
    raise UsageError(f"{prefix}: unknown executor {name!r}",
                     hint=f"did you mean {close[0]!r}?" if close
                     else "choose one of " + ", ".join(choices))


def check_runs_on(doc: yamldoc.Doc, where: Where, fields: PacketFields, executor: str,
                  key: Where = ("executor",)) -> None:
    """Refuse a packet its named ``executor`` cannot run: one that needs session tools on an
    outside process, or one without a command on an executor that runs a command."""
    check_executor(doc, where, executor, key)
    ex = executors.get(executor)
    if fields.get("session_tools") and not takes_session_tools(ex):
        raise UsageError(f"{doc.source}:{doc.line_of([*where, 'session_tools'])}: packet "
                         f"{fields['id']!r} needs session tools but runs on "
                         f"{executor!r}, an outside process that cannot reach them",
                         hint="use executor: session (or auto), or drop session_tools")
    if ex.takes_command and not fields.get("command"):
        raise UsageError(f"{doc.where(where)}: packet {fields['id']!r} has executor: {executor} "
                         "but no command", hint="add command: [program, arg, ...] (the prompt "
                         "file's path is substituted for {prompt_file}, else the prompt is "
                         "on stdin)")


def candidates(doc: yamldoc.Doc, where: Where, fields: PacketFields,
               executor: str) -> tuple[str, ...]:
    """A packet's ``candidates:`` as one executor per candidate: N times its own executor, or
    the executors listed, each one it can run on; () when it has none. The schema bounds N
    (2 to 16); a code packet comes after no other packet with candidates (``load``)."""
    value = fields.get("candidates")
    if value is None:
        return ()
    if isinstance(value, int):
        return (executor,) * value
    for i, name in enumerate(value):
        if name != "auto":
            check_runs_on(doc, where, fields, name, ("candidates", i))
    return tuple(value)


def data_boundary(doc: yamldoc.Doc, where: Where, raw: PacketFields, fields: PacketFields,
                  who: str) -> DataBoundary:
    """The data boundary of ``fields``, checked (see ``prun.plan.boundary``): every ``may_go_to``
    entry an executor or a family, a ``keep`` retention with a good duration, and a named
    executor inside the boundary. Lines point at the packet's own fields (``raw``)."""
    data = fields.get("data") or {}
    raw_go = data.get("may_go_to")
    may_go_to = _strs(raw_go)
    bad = boundary.unknown(may_go_to)
    if bad is not None:
        at = [*where, "data", "may_go_to"] + ([may_go_to.index(bad)] if isinstance(raw_go, list)
                                              else [])
        raise UsageError(f"{doc.source}:{doc.line_of(at)}: {dotted(at)}: {bad!r} is neither "
                         "an executor nor a provider family",
                         hint=f"use executors ({', '.join(executors.names())}) or families "
                         f"({', '.join(boundary.FAMILIES)})")
    try:
        boundary.parse_retention(data.get("retention"))
    except UsageError as e:
        raise UsageError(f"{doc.source}:{doc.line_of([*where, 'data', 'retention'])}: "
                         f"{e.message}", hint=e.hint)
    executor = executor_of(fields)
    model = fields.get("model")
    if may_go_to and executor != "auto" and not boundary.allowed(may_go_to, executor, model):
        line = next((doc.line_of([*where, *path]) for path in
                     (("executor",), ("data", "may_go_to"), ("model",)) if path[0] in raw),
                    doc.line_of(where))
        raise boundary.outside(who, executor, model, may_go_to, f"{doc.source}:{line}")
    return DataBoundary(reachable=_strs(data.get("reachable")), may_go_to=may_go_to,
                        prohibited=_strs(data.get("prohibited")),
                        retention=data.get("retention"))


def timeout(doc: yamldoc.Doc, where: Where, value: int | float | str | None,
            key: str = "timeout") -> float | None:
    """A ``timeout:`` (or the field ``key``) in seconds (a number of seconds or a duration)."""
    if value is None:
        return None
    try:
        seconds = parse_duration(value, what=key)
        if seconds <= 0:
            raise UsageError(f"{key} must be more than 0 s (got {value!r})",
                             hint="give seconds or a duration such as 45m")
        return seconds
    except UsageError as e:
        raise UsageError(f"{doc.source}:{doc.line_of([*where, key])}: {e.message}",
                         hint=e.hint)


def resources(doc: yamldoc.Doc, where: Where, own: ResourceFields | None,
              plan: ResourceFields | None) -> Resources:
    """A packet's ``resources``: its own keys over the plan's (each a default), the size of
    ``memory`` parsed, at its line when it is not a size."""
    merged: ResourceFields = {**(plan or {}), **(own or {})}
    memory = merged.get("memory")
    at = [*where, "resources", "memory"] if own and "memory" in own else ["resources", "memory"]
    try:
        size = parse_size(memory, what="resources.memory") if memory is not None else None
    except UsageError as e:
        raise UsageError(f"{doc.where(at)}: {e.message}", hint=e.hint) from None
    cpus = merged.get("cpus")
    return Resources(memory=size, pids=merged.get("pids"),
                     cpus=float(cpus) if cpus is not None else None)


def sandbox(doc: yamldoc.Doc, where: Where, value: str | bool | None) -> str | None:
    """A ``sandbox:`` value as auto, on or off (YAML's unquoted on/off are booleans)."""
    if value is None:
        return None

    try:
        return parse_sandbox(value)
    except UsageError as e:
        raise UsageError(f"{doc.source}:{doc.line_of(list(where))}: {e.message}", hint=e.hint)


def _strs(value: str | list[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def deadline(doc: yamldoc.Doc, value: int | float | str) -> str:
    """A plan's ``deadline:`` as written, once it reads as a duration or an ISO time."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    try:
        parse_duration(value)
        return str(value)
    except UsageError:
        pass

    try:
        dt.datetime.fromisoformat(str(value))
        return str(value)
    except ValueError:
        raise UsageError(f"{doc.source}:{doc.line_of(['deadline'])}: bad deadline {value!r}",
                         hint="give a duration from the start (90m, 2h) or an ISO time "
                         "(2026-12-01T18:00:00Z)")
