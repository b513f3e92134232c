"""The brief: what a unit of a run is told.

Each agent starts cold, so prun hands it everything its packet defines (the seed's dispatch
packet): a short contract generated from the packet's fields, then the packet's own body
under ``## Task``. The contract states, in plain words a model follows: the packet id and
scope; where it works (a throwaway clone it may edit freely, or a scratch dir) and the one hard
rule; the exact owned paths, and that touching anything else means stopping and reporting it;
shared paths with their integration owner; the concrete state it may use (ports as numbers);
the data boundary; where the read-only view of the code is; the results of the units it comes
after; the result file, its required sections and "write it in one operation"; and whether it
may start agents of its own.

The contract is kept short on purpose: the coordinator pays for every byte of it in every
worker's context (measured in ``bench/bench_brief.py``). Paths that are only known at launch
(the result file, ports assigned then) are filled in when the attempt starts; the rendered
brief is frozen in the ledger with the attempt, and ``prun brief`` prints it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..plan import Packet, Plan

HARD_RULE = ("The one hard rule: never commit, push, or run destructive git (commit, push, "
             "branch or tag changes, reset --hard, clean, checkout or restore over your "
             "edits).")
LEAVE_UNCOMMITTED = " Leave your changes uncommitted; the coordinator reviews the diff."
TASK_HEADING = "## Task"


@dataclass(frozen=True)
class Ports:
    """The ports a unit holds: its own range, ports assigned by name, fixed ports."""

    range_base: int | None = None
    range_count: int = 0
    named: Mapping[str, int] = field(default_factory=dict)   # NAME -> port
    fixed: tuple[str, ...] = ()                              # "8000", "8000-8010"

    def words(self) -> list[str]:
        out = []
        if self.range_base is not None and self.range_count:
            last = self.range_base + self.range_count - 1
            out.append(f"ports {self.range_base}-{last} (PRUN_PORT_BASE, PRUN_PORT_COUNT)")
        out += [f"port {port} (PRUN_PORT_{name})" for name, port in self.named.items()]
        out += [f"port {p}" for p in self.fixed]
        return out


@dataclass(frozen=True)
class PortsByName:
    """The ports of a unit that gets them on the machine that runs it (a cluster's worker):
    they are reserved there as it starts, so the brief names their variables, whose values
    the unit finds in its environment."""

    count: int = 0                       # its own range: PRUN_PORT_BASE, PRUN_PORT_COUNT
    variables: tuple[str, ...] = ()      # PRUN_PORT_<NAME> of each port assigned by name
    fixed: tuple[str, ...] = ()          # "8000", "8000-8010"

    def words(self) -> list[str]:
        out = []
        if self.count:
            out.append(f"the {self.count} ports from $PRUN_PORT_BASE (PRUN_PORT_BASE, "
                       "PRUN_PORT_COUNT)")
        out += [f"port ${v}" for v in self.variables]
        if out:
            out[-1] += (", reserved for you on the machine you run on (read their numbers "
                        "from your environment)")
        return out + [f"port {p}" for p in self.fixed]


@dataclass(frozen=True)
class Context:
    """What the contract says beyond the packet: decided by the run for one attempt."""

    workspace: str                       # "clone" or "scratch"
    result_file: str
    base: str | None = None              # the commit the workspace starts from
    applied: tuple[str, ...] = ()        # predecessors whose accepted changes it starts with
    snapshot: str | None = None          # the read-only view of the code (read-only units)
    may_write: tuple[str, ...] = ()      # owns, generates, and shared paths it owns
    shared: Mapping[str, str] = field(default_factory=dict)   # plan-wide path -> owner
    ports: Ports | PortsByName = field(default_factory=Ports)
    predecessors: Mapping[str, str] = field(default_factory=dict)  # packet id -> result path
    mode: str = "accept-edits"


def context(plan: Plan, packet: Packet, *, workspace: str, result_file: str,
            base: str | None = None, applied: Sequence[str] = (), snapshot: str | None = None,
            ports: Ports | PortsByName | None = None, predecessors: Mapping[str, str] | None = None
            ) -> Context:
    """The context of one attempt of ``packet`` in ``plan``: what the plan decides (the paths
    it may write, the shared paths and their owners) plus what the run decided."""
    return Context(
        workspace=workspace, result_file=result_file, base=base, applied=tuple(applied),
        snapshot=snapshot, may_write=plan.may_write(packet),
        shared=plan.shared,
        ports=ports or Ports(), predecessors=dict(predecessors or {}),
        mode=packet.effective_mode)


def contract(packet: Packet, ctx: Context) -> str:
    """The generated contract section (Markdown), without the task body."""
    lines = [f"# prun unit `{packet.id}`"]
    if packet.scope:
        lines.append(f"Scope: {packet.scope.strip()}")
    lines += ["You are one unit of a parallel run and start cold: this brief is all you get.",
              ""]
    lines += [f"- {item}" for item in _items(packet, ctx)]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Earlier:
    """An earlier attempt of the same packet whose work a fresh attempt carries on."""

    attempt_id: str
    why: str                             # why this attempt starts fresh
    result_file: str | None = None
    excerpt: str | None = None           # the start of its (partial) result


def render(packet: Packet, ctx: Context, *, followup: str | None = None,
           earlier: Earlier | None = None) -> str:
    """The whole brief a worker receives: the contract, then the packet's body as the task;
    for a fresh follow-up attempt, what the earlier attempt left and the follow-up request."""
    parts = [contract(packet, ctx), f"{TASK_HEADING}\n\n{packet.prompt.strip()}\n"]
    if earlier is not None:
        where = f" Its result is at {earlier.result_file}." if earlier.result_file else ""
        text = f"## Your earlier attempt\n\n{earlier.why}{where}"
        if ctx.workspace == "clone":
            text += " What it changed is already in your workspace."
        if earlier.excerpt:
            text += f"\n\n{earlier.excerpt.strip()}"
        parts.append(text + "\n")
    if followup:
        parts.append(f"## Follow-up\n\n{followup.strip()}\n")
    return "\n".join(parts)


def resumed_turn(packet: Packet, ctx: Context, text: str) -> str:
    """The prompt of a follow-up turn in the same conversation: the request, and the fresh
    result path this attempt publishes (the earlier turn's path is taken)."""
    sections = (", with the sections " + ", ".join(packet.requires)) if packet.requires else ""
    return (f"{text.strip()}\n\nWrite the result of this turn to {ctx.result_file} in one "
            f"operation when you are done{sections} (a fresh path: the earlier one is "
            "taken).\n")


# How a result's claims are written so that reconcile can check them (``prun.git.claims``).
CLAIMS_RULE = ("Under Verification, write each command you ran in backticks or a code block "
               "(`$ ` before each command when the block shows its output too), as you ran it: "
               "prun checks each against the commands your session ran. Under Changes, write "
               "each file you changed as its path in backticks.")


def _items(p: Packet, ctx: Context) -> list[str]:
    at = f" at commit {ctx.base[:12]}" if ctx.base else ""
    items = []
    if ctx.workspace == "clone":
        with_ = (" with the accepted changes of " + _ids(ctx.applied) + " applied"
                 if ctx.applied else "")
        items.append(f"Workspace: your current directory, a throwaway clone of the "
                     f"repository{at}{with_}. Edit freely there.")
    else:
        items.append("Workspace: your current directory, a scratch folder of your own; the "
                     "repository is not in it.")
    items.append(HARD_RULE + (LEAVE_UNCOMMITTED if ctx.workspace == "clone" else ""))
    if ctx.mode == "plan":
        items.append("Read-only: create, change or delete no file except the result file.")
    if p.writes_code:
        owned = _globs(ctx.may_write) if ctx.may_write else "any path (no owns declared)"
        items.append(f"You own: {owned}. Change nothing else: if the task needs another "
                     "file, stop and report it under \"Open items\".")
    elif ctx.mode != "plan":
        items.append("Change no file outside your workspace.")
    items += _shared(p, ctx)
    state = ctx.ports.words() + [f"`{s}`" for s in p.state
                                 if not s.strip().lower().startswith(("port:", "ports:"))]
    if state:
        items.append("State you may use: " + ", ".join(state) + ". Use no other ports.")
    data = _data(p)
    if data:
        items.append(f"Data: {data}")
    if ctx.snapshot:
        items.append(f"Code to read: a read-only copy of the repository{at} is at "
                     f"{ctx.snapshot}; change nothing there.")
    if ctx.predecessors:
        done = "; ".join(f"`{pid}`: {path}" for pid, path in ctx.predecessors.items())
        items.append(f"Results of the units before you: {done}.")
    sections = (", with the sections " + ", ".join(p.requires)) if p.requires else ""
    items.append(f"Result: write it to {ctx.result_file} in one operation when you are "
                 f"done{sections}.")
    if any(name.strip().lower().startswith("verification") for name in p.requires):
        items.append(CLAIMS_RULE)
    if p.subdispatch:
        items.append("You may start agents of your own for parts of this task; you reconcile "
                     "what they return and they stay inside what you own.")
    else:
        items.append("Start no other agents: report what more is needed instead.")
    return items


def _shared(p: Packet, ctx: Context) -> list[str]:
    """Shared paths this packet may meet: those it declares, and those it is the owner of."""
    mine = {path: owner for path, owner in ctx.shared.items() if owner == p.id}
    mine.update(p.shared)
    out = []
    for path, owner in mine.items():
        if owner == p.id:
            out.append(f"Shared: `{path}`: you are its integration owner; keep the edits "
                       "others need in mind.")
        else:
            out.append(f"Shared: `{path}`: its integration owner is `{owner}`; do not edit "
                       "it, report the change you need.")
    return out


def _data(p: Packet) -> str:
    d = p.data
    parts = []
    for label, values in (("reachable", d.reachable), ("may go to", d.may_go_to),
                          ("prohibited", d.prohibited)):
        if values:
            parts.append(f"{label}: {', '.join(values)}")
    if d.retention:
        parts.append(f"retention: {d.retention}")
    return "; ".join(parts) + ("." if parts else "")


def _globs(globs: Sequence[str]) -> str:
    return ", ".join(f"`{g}`" for g in globs)


def _ids(ids: Sequence[str]) -> str:
    return ", ".join(f"`{i}`" for i in ids)


def environment(packet: Packet, ctx: Context, brief_file: str) -> dict[str, str]:
    """The same facts as environment variables, for command units (and every unit)."""
    env = {"PRUN_PACKET_ID": packet.id, "PRUN_BRIEF_FILE": brief_file,
           "PRUN_WORKSPACE_KIND": ctx.workspace,
           "PRUN_OWNS": json.dumps(list(ctx.may_write)),
           "PRUN_REQUIRES": json.dumps(list(packet.requires))}
    if packet.scope:
        env["PRUN_SCOPE"] = packet.scope.strip()
    if ctx.base:
        env["PRUN_BASE"] = ctx.base
    if ctx.snapshot:
        env["PRUN_REPO_SNAPSHOT"] = ctx.snapshot
    if ctx.predecessors:
        env["PRUN_PREDECESSOR_RESULTS"] = json.dumps(dict(ctx.predecessors))
    return env
