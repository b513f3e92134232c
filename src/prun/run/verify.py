"""A unit's work judged inside the run, as soon as it succeeds: its acceptance check
(``prun.git.accept``) and its result's claims (``prun.git.claims``); and the follow-up prun
starts itself when they find work left undone (``followup: auto``).

The check runs in a worker thread of the unit's own task, which keeps its place among the
run's ``parallel`` until the check ends: at most ``parallel`` workers and checks at once, the
loop never waiting. It is recorded with the attempt exactly as ``prun reconcile`` records it
(``accept.record``), so reconcile reads it and never runs it again. A check that did not pass
is told (``accept-failed``), and so are unverified claims (``unverified``).

An automatic follow-up is due only when the packet says ``followup: auto``, the unit's own
check ``failed`` (a non-zero exit: its output says what to fix; ``timeout`` and ``error`` go to
the person, as they may say nothing of the work) or its result claims what its stream or
diff does not bear out (``unverified-claim``, ``no-tool-calls``, ``claimed-not-changed``),
fewer than ``followup_max`` automatic turns of the packet were started in this run (counted
in the ledger's ``followup`` events, so a resumed supervisor counts them too), the run is
still launching, and the unit's quota pool is not empty. Nothing else triggers one.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

from ..errors import PrunError
from ..executors.base import Executor
from ..git import accept, claims
from ..git.reconcile import judge
from ..git.verdict import AcceptCheck, Reason, UnitInput
from ..ledger import PacketStatus
from ..plan import Packet
from .choices import QuotaPools
from .context import RunContext
from .drive import unit_input
from .ends import End, Settled
from .unit import UnitState

AUTO = "followup: auto"     # the cause of an automatic follow-up (event, packet status)


@dataclass(frozen=True)
class Judged:
    """What the run found of a successful attempt: its check (None: its packet has none) and
    the reasons its claims gave (none: borne out, or its stream records no tool calls)."""

    check: AcceptCheck | None
    unverified: tuple[Reason, ...]


async def verified(ctx: RunContext, u: UnitState, end: End, executor: Executor,
                   model: str | None) -> End:
    """``end``, once a successful attempt of ``u`` is judged: its check run and recorded,
    what did not pass told, and an automatic follow-up due when one is (``Settled.followup``).
    Any other end (and a cluster run's unit, whose clone is on its worker: checked by
    reconcile) is returned as it is."""
    if (not isinstance(end, Settled) or end.status != PacketStatus.SUCCEEDED
            or ctx.cluster is not None or u.cancel_requested):
        return end
    unit = unit_input(ctx, u, "succeeded")
    if not (accept.due(unit, "succeeded", {}) or executor.reports_tool_use):
        return end    # no check to run, no stream of tool calls to read its claims against
    found = await asyncio.to_thread(judged, ctx, u, unit)
    aid = u.current_attempt
    data = dict(end.data)
    if found.check is not None:
        accept.record(ctx.ledger, aid, found.check)
        data["accept"] = found.check.status
        if found.check.status != "passed":
            ctx.emit("accept-failed", u, _check_cause(found.check), accept=found.check.status,
                     exit=found.check.exit_code, log=found.check.log)
    if found.unverified:
        data["unverified"] = len(found.unverified)
        ctx.emit("unverified", u, "; ".join(r.text() for r in found.unverified))
    end = replace(end, data=data)
    asked = request(u.packet, found)
    if asked is None or (turn := await _next_turn(ctx, u, executor, model)) is None:
        return end
    ctx.ledger.record_event("followup", run_id=ctx.run_id, packet_id=u.packet.id,
                            attempt_id=aid, status="followup", cause=AUTO,
                            data={"turn": turn, "of": u.packet.followup_max,
                                  "reasons": [r.code for r in _reasons(found)]})
    return replace(end, followup=asked)


def judged(ctx: RunContext, u: UnitState, unit: UnitInput) -> Judged:
    """Run ``u``'s check (when its packet has one) and read its claims (``unit``: its
    attempt as reconcile reads it), in a worker thread."""
    check = None
    if accept.due(unit, "succeeded", {}):
        log = accept.log_path(str(ctx.paths.root), u.packet.id, u.seq)
        check = accept.check(unit, log, ctx.run["repo_root"], ctx.run["setup"])
    try:
        reasons = judge(unit).reasons
    except (PrunError, OSError):   # its change cannot be read now: reconcile will say so
        reasons = []
    return Judged(check, tuple(r for r in reasons if r.code in claims.REASONS))


def request(p: Packet, found: Judged) -> str | None:
    """The task of an automatic follow-up: the failing check's output, the claims not borne
    out; None when there is no real work left (or the packet does not ask for one)."""
    if not p.auto_followup:
        return None
    parts = []
    c = found.check
    if c is not None and c.status == "failed":
        parts.append(
            f"Your work fails the packet's acceptance check `{p.accept}` (exit {c.exit_code}), "
            "which prun ran on your base plus your change in a fresh clone. Fix the work so "
            "that the check passes (do not change the check), then report again.\n\n"
            f"## The check that failed\n\nThe end of its output (all of it: {c.log}):\n\n"
            f"```\n{c.tail.rstrip()}\n```\n")
    if found.unverified:
        lines = "\n".join(f"- {_claim_line(r)}" for r in found.unverified)
        parts.append(
            "Your result claims what your own work does not show:\n\n" + lines + "\n\n"
            "Run each command you claim and report what it really printed, or take the claim "
            "out; list under Changes only the files your change touches.\n")
    return "\n".join(parts) or None


def _reasons(found: Judged) -> list[Reason]:
    c = found.check
    failed = [Reason("accept-failed")] if c is not None and c.status == "failed" else []
    return failed + list(found.unverified)


def _claim_line(r: Reason) -> str:
    if r.code == "unverified-claim":
        return f"`{r.detail.get('claim')}` is claimed under Verification, but no run of it shows"
    if r.code == "claimed-not-changed":
        return f"`{r.detail.get('path')}` is claimed changed, but your change does not touch it"
    return "verification is claimed, but no tool call at all shows"


def _check_cause(c: AcceptCheck) -> str:
    verb = {"timeout": "timed out", "error": "could not run"}.get(c.status, c.status)
    how = f" (exit {c.exit_code})" if c.exit_code is not None else ""
    return f"its acceptance check {verb}{how}; its output: {c.log}"


async def _next_turn(ctx: RunContext, u: UnitState, executor: Executor,
                     model: str | None) -> int | None:
    """The number of the automatic follow-up turn ``u`` may start now; None when none may:
    no turn left, the run no longer launching or the unit's quota pool empty."""
    state = ctx.state
    if state.stopped or state.cancelled or state.timed_out:
        return None
    turns = _turns(ctx, u.packet.id)
    if turns >= u.packet.followup_max:
        return None
    reset = await QuotaPools(ctx.env).reset_of(executor, model)
    if reset is not None:
        ctx.ledger.record_event("followup", run_id=ctx.run_id, packet_id=u.packet.id,
                                attempt_id=u.attempt_id, status="not-started", cause=AUTO,
                                data={"why": f"the {executor.quota_group(model)} quota pool "
                                      "is empty"})
        return None
    return turns + 1


def _turns(ctx: RunContext, packet_id: str) -> int:
    """The automatic follow-up turns of ``packet_id`` started in this run."""
    return sum(1 for e in ctx.ledger.events(ctx.run_id)
               if e["kind"] == "followup" and e["packet_id"] == packet_id
               and e["status"] == "followup" and e["cause"] == AUTO)
