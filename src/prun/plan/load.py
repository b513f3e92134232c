"""Reading packet files and plan files into ``Packet`` and ``Plan``.

Both are validated against the published JSON Schemas (``prun/plan/schemas/*.schema.json``) and
then checked as a whole: unique ids, ``after`` and ``shared`` naming packets that exist, no
cycle in ``after``. The schemas take any executor name; the loader checks it against the
executor registry (``prun.executors``) and asks the executor what it can do. Every refusal is
a ``UsageError`` whose message starts with ``file:line`` and whose hint says how to fix it.
"""

from __future__ import annotations

import dataclasses
import difflib
import glob as _glob
import os
from collections.abc import Mapping, Sequence
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import cast

from .. import executors
from .._util import yamldoc
from .._util.regular import MiB, read_regular
from ..errors import UsageError
from ..settings import parse_cluster_address
from . import template
from .candidates import unit_id
from .fields import (
    BudgetFields,
    PacketFields,
    PlanFields,
    ResourceFields,
    Where,
    WorkspaceFields,
    candidates,
    check_executor,
    check_runs_on,
    command_words,
    data_boundary,
    deadline,
    executor_of,
    join_argv,
    resources,
    sandbox,
    shell_line,
    timeout,
)
from .model import Budget, Packet, Plan, Prime
from .validation import validate

FRONT = "---"


MAX_FILE_BYTES = 16 * MiB    # a plan, a packet file or a prompt file (docs/plans.md)


def _read(path: Path, what: str = "file") -> str:
    """The text of a plan, packet or prompt file: a regular file of at most MAX_FILE_BYTES,
    UTF-8 (``prun._util.regular``)."""
    data = read_regular(path, MAX_FILE_BYTES, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason})", hint="save it as UTF-8")


# ---------------------------------------------------------------------------------------------
# Packets

def split_front_matter(text: str, source: str) -> tuple[str, str]:
    """(front matter YAML, body) of a packet file."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != FRONT:
        raise UsageError(f"{source}:1: a packet file starts with a '---' line (its front matter)",
                         hint="put '---', the YAML fields (id: ..., kind: ...), '---', then the "
                         "prompt; `prun packet new ID` writes a template")
    for i in range(1, len(lines)):
        if lines[i].strip() in (FRONT, "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1:])
    raise UsageError(f"{source}:1: the front matter is not closed",
                     hint="add a line '---' after the YAML fields, before the prompt")


def load_packet(path: str | os.PathLike[str], *, defaults: PacketFields | None = None,
                plan_resources: ResourceFields | None = None) -> Packet:
    """Read one packet file (YAML front matter + Markdown prompt)."""
    p = Path(path)
    text = _read(p, "packet file")
    front, body = split_front_matter(text, str(p))
    doc = yamldoc.load(front, str(p), offset=1)
    if not isinstance(doc.data, dict):
        raise UsageError(f"{p}:2: the front matter must be a mapping of fields",
                         hint="write 'id: my-packet' and the other fields, one per line")
    validate(doc, "packet")
    raw = cast(PacketFields, doc.data)  # the shape the schema has just checked
    # its body starts after the opening '---', the front matter and the closing '---'
    return _packet(doc, (), raw, body=body, base_dir=p.parent, defaults=defaults,
                   plan_resources=plan_resources, body_line=front.count("\n") + 3)


def _packet(doc: yamldoc.Doc, where: Where, raw: PacketFields, *, body: str | None,
            base_dir: Path, defaults: PacketFields | None,
            plan_resources: ResourceFields | None = None, body_line: int = 0) -> Packet:
    """The packet of ``raw`` (its own fields, at ``where`` in ``doc``) over the plan's
    ``defaults``, every field checked."""
    fields: PacketFields = {**(defaults or {}), **raw}
    prompt = _prompt(doc, where, fields, body, base_dir)
    timeout_s = timeout(doc, where, fields.get("timeout"))
    executor = executor_of(fields)
    if executor != "auto":
        check_runs_on(doc, where, fields, executor)
    command = fields.get("command")
    command_words(doc, where, raw.get("command"))   # the defaults' is checked with the plan
    return Packet(
        id=fields["id"],
        prompt=prompt,
        scope=fields.get("scope"),
        kind=fields.get("kind", "read-only"),
        executor=executor,
        command=tuple(command) if isinstance(command, list) else command,
        model=fields.get("model"),
        effort=fields.get("effort"),
        mode=fields.get("mode"),
        owns=tuple(fields.get("owns", ())),
        generates=tuple(fields.get("generates", ())),
        reads=tuple(fields.get("reads", ())),
        shared=dict(fields.get("shared", {})),
        state=tuple(fields.get("state", ())),
        after=tuple(fields.get("after", ())),
        base=fields.get("base"),
        timeout_s=timeout_s,
        accept=join_argv(fields.get("accept")),
        accept_timeout_s=timeout(doc, where, fields.get("accept_timeout"), "accept_timeout"),
        followup=fields.get("followup"),
        followup_max=fields.get("followup_max", 1),
        candidates=candidates(doc, where, fields, executor),
        data=data_boundary(doc, where, raw, fields, f"packet {fields['id']!r}"),
        resources=resources(doc, where, fields.get("resources"), plan_resources),
        requires=tuple(fields.get("requires", ())),
        session_tools=bool(fields.get("session_tools", False)),
        subdispatch=bool(fields.get("subdispatch", False)),
        snapshot=bool(fields.get("snapshot", True)),
        sandbox=sandbox(doc, [*where, "sandbox"], fields.get("sandbox")),
        source=doc.source,
        line=doc.line_of(where),
        lines={k: doc.key_line(where, k) for k in raw},
        placeholders=template.found(doc, where, raw, body, body_line),
    )


def _prompt(doc: yamldoc.Doc, where: Where, fields: PacketFields, body: str | None,
            base_dir: Path) -> str:
    """The prompt: the body of a packet file, ``prompt:`` or the file ``prompt_file:`` names
    (relative to ``base_dir``); exactly one of them."""
    inline = fields.get("prompt")
    pfile = fields.get("prompt_file")
    body = body if body and body.strip() else None
    given = [x for x in (("the body", body), ("prompt", inline), ("prompt_file", pfile)) if x[1]]
    if len(given) > 1:
        raise UsageError(f"{doc.where(where)}: packet {fields['id']!r} has a prompt in both "
                         f"{given[0][0]} and {given[1][0]}", hint="keep one of them")
    if pfile:
        target = base_dir / pfile
        if not target.exists():
            raise UsageError(f"{doc.source}:{doc.line_of([*where, 'prompt_file'])}: "
                             f"prompt_file {pfile!r} not found (looked at {target})",
                             hint="give a path relative to the file that names it")
        return _read(target, "prompt file")
    text = body or inline
    if not text or not text.strip():
        raise UsageError(f"{doc.where(where)}: packet {fields['id']!r} has no prompt",
                         hint="write the prompt below the front matter (or give prompt: or "
                         "prompt_file:)")
    return text.lstrip("\n")


# ---------------------------------------------------------------------------------------------
# Plans

_GLOB_CHARS = set("*?[")


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan file and every packet it names; check ids, ``after`` and ``shared``."""
    p = Path(path)
    doc = yamldoc.load(_read(p, "plan"), str(p))
    if not isinstance(doc.data, dict):
        raise UsageError(f"{p}:1: a plan is a YAML mapping with a 'packets' list",
                         hint="see docs/plans.md for an example")
    validate(doc, "plan")
    data = cast(PlanFields, doc.data)   # the shape the schema has just checked
    defaults: PacketFields = data.get("defaults") or {}
    if defaults:
        command_words(doc, ("defaults",), defaults.get("command"))
        if defaults.get("executor"):
            check_executor(doc, ("defaults",), defaults["executor"])
        data_boundary(doc, ("defaults",), defaults, defaults, "defaults")
    limits = data.get("resources")
    packets: list[Packet] = []
    for i, entry in enumerate(data["packets"]):
        if isinstance(entry, str):
            for f in _expand(doc, i, entry, p.parent):
                packets.append(load_packet(f, defaults=defaults, plan_resources=limits))
        else:
            packets.append(_packet(doc, ("packets", i), entry, body=None, base_dir=p.parent,
                                   defaults=defaults, plan_resources=limits))
    shell_line(doc, "check", data.get("check"))
    shell_line(doc, "accept", data.get("accept"))
    accept = join_argv(data.get("accept"))
    accept_timeout = timeout(doc, (), data.get("accept_timeout"), "accept_timeout")
    packets = [_plan_accept(pk, accept, accept_timeout) for pk in packets]
    shell_line(doc, "setup", data.get("setup"))
    shell_line(doc, "on_event", data.get("on_event"))
    written = data.get("deadline")
    plan = Plan(
        packets=tuple(packets),
        path=str(p.resolve()),
        name=data.get("name") or p.stem,
        deadline=deadline(doc, written) if written is not None else None,
        cancel_owner=data.get("cancel_owner"),
        cancel_action=data.get("cancel_action", "cancel"),
        check=join_argv(data.get("check")),
        parallel=data.get("parallel"),
        on_event=join_argv(data.get("on_event")),
        setup=join_argv(data.get("setup")),
        workspace=_workspace(doc, data.get("workspace")),
        base=data.get("base"),
        sandbox=sandbox(doc, ["sandbox"], data.get("sandbox")),
        **_cluster(doc, data.get("cluster")),
        budget=budget(doc, data.get("budget")),
        lines={k: doc.key_line((), k) for k in data},
    )
    check_plan(plan)
    return plan


def _plan_accept(packet: Packet, command: str | None, seconds: float | None) -> Packet:
    """``packet`` with the plan's acceptance check when it names none and writes code, and
    the plan's ``accept_timeout`` when it gives none."""
    return dataclasses.replace(
        packet, accept=packet.accept or (command if packet.writes_code else None),
        accept_timeout_s=packet.accept_timeout_s or seconds)


def _workspace(doc: yamldoc.Doc, value: WorkspaceFields | None) -> Prime | None:
    """A plan's ``workspace:`` section: its prime command (a shell line ``/bin/sh`` reads, or
    an argv), and ``key`` and ``share`` paths relative to the repository, inside it, never in
    ``.git``."""
    if value is None:
        return None
    shell_line(doc, "workspace", value.get("prime"))
    for field, paths in (("key", value.get("key") or []), ("share", value.get("share") or [])):
        for i, path in enumerate(paths):
            parts = path.replace("\\", "/").split("/")
            if path.startswith("/") or ".." in parts or ".git" in parts or path.strip("/.") == "":
                raise UsageError(f"{doc.where(['workspace', field, i])}: workspace.{field}: "
                                 f"{path!r} is not a path inside the repository",
                                 hint="give a path relative to the repository's top, outside "
                                 ".git, such as node_modules")
    return Prime(join_argv(value["prime"]) or "", tuple(value.get("key") or ()),
                 tuple(p.strip("/") for p in value["share"]))


def budget(doc: yamldoc.Doc, fields: BudgetFields | None) -> Budget | None:
    """The plan's ``budget:`` (its shape checked by the schema), or None; an executor name
    the registry does not know is refused at its line."""
    if not fields:
        return None
    per = fields.get("executors") or {}
    for name in per:
        if not executors.known(name):
            at = ["budget", "executors", name]
            raise UsageError(f"{doc.where(at)}: budget.executors: unknown executor {name!r}",
                             hint="choose one of " + ", ".join(executors.names()))
    return Budget(fields.get("usd"), fields.get("tokens"), tuple(
        (name, Budget(limit.get("usd"), limit.get("tokens"))) for name, limit in per.items()))


def _cluster(doc: yamldoc.Doc, value: object) -> dict[str, str]:
    """A plan's ``cluster:``: an address, or a mapping of ``address`` and ``worker_lost``."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {"cluster": parse_cluster_address(value.get("address"),
                                                 doc.where(["cluster", "address"])),
                "worker_lost": str(value.get("worker_lost") or "fail")}
    return {"cluster": parse_cluster_address(value, doc.where(["cluster"]))}


def _expand(doc: yamldoc.Doc, i: int, entry: str, root: Path) -> list[Path]:
    where = doc.where(["packets", i])
    if _GLOB_CHARS & set(entry):
        found = sorted(Path(f) for f in _glob.glob(str(root / entry), recursive=True)
                       if os.path.isfile(f))
        if not found:
            raise UsageError(f"{where}: {entry!r} matches no packet file (relative to {root})",
                             hint="fix the glob, or write the packet files first "
                             "(`prun packet new ID`)")
        return found
    target = root / entry
    if target.is_dir():
        found = sorted(target.glob("*.md"))
        if not found:
            raise UsageError(f"{where}: folder {entry!r} holds no *.md packet file",
                             hint="add packet files or name them one by one")
        return found
    if not target.is_file():
        raise UsageError(f"{where}: packet file {entry!r} not found (looked at {target})",
                         hint="give a path relative to the plan file")
    return [target]


def check_plan(plan: Plan) -> None:
    """Ids unique; ``after`` and ``shared`` owners name packets of the plan; no ``after`` cycle."""
    seen: dict[str, Packet] = {}
    for pk in plan.packets:
        if pk.id in seen:
            first = seen[pk.id]
            raise UsageError(f"{_at(pk)}: duplicate packet id {pk.id!r} (also at {_at(first)})",
                             hint="give every packet its own id")
        seen[pk.id] = pk
    check_candidates(plan, seen)
    for pk in plan.packets:
        for dep in pk.after:
            if dep == pk.id:
                raise UsageError(f"{pk.where('after')}: packet {pk.id!r} comes after itself",
                                 hint="remove it from its own after list")
            if dep not in seen:
                raise UsageError(f"{pk.where('after')}: packet {pk.id!r} comes after unknown "
                                 f"packet {dep!r}", hint=_suggest(dep, seen))
        for path, owner in pk.shared.items():
            if owner not in seen:
                raise UsageError(f"{pk.where('shared')}: packet {pk.id!r} names unknown packet "
                                 f"{owner!r} as integration owner of {path!r}",
                                 hint=_suggest(owner, seen))
    cycle = find_cycle({pk.id: pk.after for pk in plan.packets})
    if cycle:
        raise UsageError(f"{seen[cycle[0]].where('after')}: the after lists form a cycle: "
                         + " -> ".join([*cycle, cycle[0]]),
                         hint="a dependency is a sequence: remove one of these after entries, "
                         "or group the packets into one")


def check_candidates(plan: Plan, seen: Mapping[str, Packet]) -> None:
    """A packet with candidates is no other packet's ``after`` nor a shared path's integration
    owner (which of its candidates would it be?), and no packet takes the id of one of its
    candidates' units (``prun.plan.candidates``)."""
    for pk in plan.packets:
        for k in range(1, len(pk.candidates) + 1):
            unit = unit_id(pk.id, k)
            if unit in seen:
                raise UsageError(f"{_at(seen[unit])}: packet id {unit!r} is the id of candidate "
                                 f"{k} of packet {pk.id!r} ({pk.where('candidates')})",
                                 hint="rename this packet")
    many = {pk.id for pk in plan.packets if pk.candidates}
    for pk in plan.packets:
        for dep in pk.after:
            if dep in many:
                raise UsageError(f"{pk.where('after')}: packet {pk.id!r} comes after {dep!r}, "
                                 "which has candidates; a packet cannot come after one",
                                 hint=f"run {pk.id!r} in a later plan, once a candidate of "
                                 f"{dep!r} is integrated")
        for path, owner in pk.shared.items():
            if owner in many:
                raise UsageError(f"{pk.where('shared')}: packet {owner!r} has candidates and "
                                 f"cannot be the integration owner of {path!r}",
                                 hint="name a packet without candidates as its owner")


def _at(pk: Packet) -> str:
    return pk.where()


def _suggest(name: str, seen: Mapping[str, Packet]) -> str:
    close = difflib.get_close_matches(name, list(seen), n=1)
    return f"did you mean {close[0]!r}?" if close else "known ids: " + ", ".join(sorted(seen))


def find_cycle(after: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A list of ids forming a cycle through ``after`` edges (each comes after the next, the
    last after the first), starting at its smallest id; None when there is no cycle."""
    try:
        TopologicalSorter(after).prepare()
    except CycleError as e:
        # graphlib's cycle runs the other way (each node comes before the next) and repeats
        # its first node at the end
        cycle = list(reversed(e.args[1][1:]))
        start = cycle.index(min(cycle))
        return cycle[start:] + cycle[:start]
    return None
