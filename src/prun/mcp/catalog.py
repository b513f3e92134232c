"""The tools and resources of the MCP server (``prun.mcp.server.build`` registers them): one
function per group, each tool a thin mapping of its arguments onto its command's flags.

Every argument is typed by its rule in ``args`` (checked before the tool runs); a path is
checked where it is, relative to the tool's folder; the command line is an ``args.Argv``."""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import json
from dataclasses import asdict
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp_types import ToolAnnotations
from pydantic import Field

from .. import api
from .._util.fsutil import read_head
from .._util.quoting import printable
from .._util.timeparse import parse_duration
from ..errors import PrunError, UsageError
from ..views.lines import summary_lines
from . import args
from .args import Argv
from .calls import DEFAULT_WAIT_S, MARGIN_S, MAX_WAIT_S, Cwd, Limit, Output, Prun, RunOpt, Seconds, in_process
from .lines import run_id_fields, wait_fields

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
RESULT_MAX = 4 * 1024 * 1024        # bytes of a result file a resource returns
CHECK_MAX_S = 24 * 3600.0           # the longest check_timeout integrate may be given here
PlanFile = Annotated[args.PathText, Field(description="the plan file (YAML): a regular file")]


def watch_tools(server: MCPServer[Any], st: Prun) -> None:
    """check, run, status and wait."""
    @server.tool(description="The independence test (prun check PLAN): may the plan's packets "
                 "run side by side. Lines: FAIL <rule> <a> <b> ... why= fix=, then OK or FAILED; "
                 "exit_code 1 means a rule failed.",
                 annotations=READ_ONLY)
    async def check(plan: PlanFile, ctx: Context,
                    repo: Annotated[args.PathText | None, Field(
                        description="the repository bases are resolved in")] = None,
                    no_git: Annotated[bool, Field(
                        description="compare bases as written")] = False,
                    cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("check").arg(args.regular_file("plan", plan, at))
        if repo is not None:
            argv.opt("--repo", args.folder("repo", repo, at))
        argv.flag("--no-git", no_git)
        return await st.both_of("check", argv, at, ctx)

    @server.tool(description="Start a plan in the background (prun run PLAN --detach): it is "
                 "checked and frozen, and the run id comes back at once (RUN <id>, run_id). "
                 "Follow it with wait.",
                 annotations=ACTS)
    async def run(plan: PlanFile, ctx: Context,
                  parallel: Annotated[int | None, Field(
                      ge=1, le=10_000,
                      description="units at once (default: the plan's, else 8)")] = None,
                  deadline: Annotated[args.Duration | None, Field(
                      description="the run's terminal deadline: a duration (90m) or ISO "
                      "time")] = None,
                  allow_overlap: Annotated[bool, Field(
                      description="run a plan that fails the independence test (recorded in "
                      "the ledger)")] = False,
                  cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("run").arg(args.regular_file("plan", plan, at)).flag("--detach", True)
        argv.opt("--parallel", parallel).opt("--deadline", deadline)
        argv.flag("--allow-overlap", allow_overlap)
        return await st.lines_of("run", argv, at, ctx, extra=run_id_fields)

    @server.tool(description="A run's state (prun status [RUN] --json): the RUN line, a UNIT "
                 "line per packet that needs attention, a COST line per executor (tokens, usd), "
                 "RESULTS <folder>; with all, every packet. Each unit carries tokens and "
                 "cost_usd; cost holds each executor's totals.",
                 annotations=READ_ONLY)
    async def status(ctx: Context, run: RunOpt = None,
                     all: Annotated[bool, Field(description="a line for every packet")] = False,
                     cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        Argv("status").arg(run).words()   # the bound on the arguments together

        def work() -> tuple[int, list[str], Any]:
            view, doc = api.status_document(run, repo=at)
            return 0, summary_lines(view, everything=all), doc

        return await in_process("status", work, st, at)

    @server.tool(description="Block until the run has something to act on (prun wait): EVENT "
                 "lines, the RUN line, CURSOR <n>. Pass cursor back as since for the next event. "
                 "exit_name says what happened: OK (all succeeded), FAILED (finished otherwise), "
                 "UNIT_FAILED, STALLED, PARKED, HANDOFF (spawn the handoff= subagent, then run "
                 "receipt_cmd=), SUPERVISOR_GONE (prun resume), STOPPED (no receipt), "
                 "UNIT_SUCCEEDED (with any), TIMEOUT (nothing yet). Sends progress while it waits.",
                 annotations=READ_ONLY)
    async def wait(ctx: Context, run: RunOpt = None,
                   since: Annotated[int | None, Field(
                       ge=0, le=2**53,
                       description="only events after this cursor (the last wait's)")] = None,
                   timeout: Annotated[float, Field(
                       gt=0, le=MAX_WAIT_S, allow_inf_nan=False,
                       description="give up after this many seconds (exit_name TIMEOUT)")] = \
                       DEFAULT_WAIT_S,
                   any: Annotated[bool, Field(
                       description="also wake when a unit succeeds")] = False,
                   cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("wait").arg(run).opt("--since", since)
        argv.opt("--timeout", f"{args.num(timeout)}s").flag("--any", any)
        return await st.lines_of("wait", argv, at, ctx, progress_total=timeout,
                                 limit=st.limit(timeout + MARGIN_S,
                                                f"its timeout plus {MARGIN_S:.0f} s"),
                                 extra=wait_fields)


def _waited(st: Prun, wait: float | None) -> Limit:
    seconds = 60.0 if wait is None else wait
    return st.limit(seconds + MARGIN_S, f"its wait ({seconds:.0f} s) plus {MARGIN_S:.0f} s")


def control_tools(server: MCPServer[Any], st: Prun) -> None:
    """cancel, reassign, followup, reconcile and integrate."""
    @server.tool(description="Cancel a run, one attempt (RUN:PACKET:N) or one packet "
                 "(prun cancel): CANCEL <target> status=<s> once the group is confirmed gone; "
                 "exit_code 1: not confirmed within wait seconds (the request stands). run is "
                 "required, never empty.",
                 annotations=ACTS)
    async def cancel(run: Annotated[args.Id, Field(
                         description="a run id, or an attempt id (RUN:PACKET:N)")],
                     ctx: Context,
                     packet: Annotated[args.PacketId | None, Field(
                         description="cancel only this packet of the run")] = None,
                     reason: Annotated[args.Line | None, Field(
                         description="why (recorded in the ledger)")] = None,
                     wait: Seconds = None, cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("cancel").arg(run).opt("--packet", packet).opt("--reason", reason)
        argv.opt("--wait", wait)
        return await st.lines_of("cancel", argv, at, ctx, limit=_waited(st, wait))

    @server.tool(description="A linked successor attempt for a packet, optionally on another "
                 "executor (prun reassign); the predecessor's late output is quarantined. "
                 "REASSIGN <packet> run= executor= predecessor= attempt=.",
                 annotations=ACTS)
    async def reassign(packet: Annotated[args.PacketId, Field(description="the packet id")],
                       ctx: Context, run: RunOpt = None,
                       executor: Annotated[args.Name | None, Field(
                           description="the successor's executor (default: the same)")] = None,
                       reason: Annotated[args.Line | None, Field(
                           description="why (recorded in the ledger)")] = None,
                       wait: Seconds = None, cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("reassign").arg(packet).opt("--run", run).opt("--executor", executor)
        argv.opt("--reason", reason).opt("--wait", wait)
        return await st.lines_of("reassign", argv, at, ctx, limit=_waited(st, wait))

    @server.tool(description="A follow-up turn for a packet (prun followup): a linked attempt "
                 "that resumes its conversation in the same workspace, with a fresh result path. "
                 "FOLLOWUP <packet> run= predecessor= attempt= resume=yes|no.",
                 annotations=ACTS)
    async def followup(packet: Annotated[args.PacketId, Field(description="the packet id")],
                       prompt_file: Annotated[args.PathText, Field(
                           description="the follow-up request (a Markdown file)")],
                       ctx: Context, run: RunOpt = None, wait: Seconds = None,
                       cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("followup").arg(packet)
        argv.opt("--prompt-file", args.regular_file("prompt_file", prompt_file, at))
        argv.opt("--run", run).opt("--wait", wait)
        return await st.lines_of("followup", argv, at, ctx, limit=_waited(st, wait))

    @server.tool(description="Judge every packet of a run before integrating (prun reconcile "
                 "--json): ACCEPTED, REJECTED <packet> reason=, REVIEW <packet> reason=, then "
                 "RECONCILE ... complete=yes|no. exit_name OK, FAILED (rejected) or NEEDS_REVIEW.",
                 annotations=ACTS)
    async def reconcile(ctx: Context, run: RunOpt = None,
                        rescoped: Annotated[args.Rescopes, Field(
                            description="packets whose change of scope the person approved "
                            "(PACKET or PACKET=WHY)")] = None,
                        cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        Argv("reconcile").arg(run).opt("--rescoped", rescoped).words()   # their bound together

        def work() -> tuple[int, list[str], Any]:
            report = api.reconcile(run, rescoped=api.rescoped_map(rescoped or []), repo=at)
            return api.reconcile_exit_code(report), report.lines(), report.as_dict()

        return await in_process("reconcile", work, st, at)

    @server.tool(description="Apply a run's accepted changes to the working tree and run the "
                 "plan's combined check; never commits (prun integrate --json). APPLIED, "
                 "CONFLICT, SKIPPED, CHECK, INTEGRATE ... committed=no. When the check fails, "
                 "prun bisects for the units that break it (CULPRIT), holds them (HELD) and "
                 "checks again. exit_name OK, FAILED (check failed, or culprits held) or "
                 "CONFLICT. Ask the person before any commit.",
                 annotations=ACTS)
    async def integrate(ctx: Context, run: RunOpt = None,
                        include: Annotated[args.PacketIds, Field(
                            description="also apply these rejected or needs-review packets' "
                            "changes")] = None,
                        worktree: Annotated[args.PathText | None, Field(
                            description="apply in a new integration worktree at this path")] = None,
                        no_check: Annotated[bool, Field(
                            description="do not run the combined check")] = False,
                        check_timeout: Annotated[args.Duration | None, Field(
                            description="bound on the combined check (default 1h)")] = None,
                        allow_dirty: Annotated[bool, Field(
                            description="apply over uncommitted local changes to the same "
                            "files")] = False,
                        keep_culprits: Annotated[bool, Field(
                            description="when the check fails, keep every change applied "
                            "(no search for the culprits)")] = False,
                        cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("integrate").arg(run).opt("--include", include).opt("--worktree", worktree)
        argv.flag("--no-check", no_check).opt("--check-timeout", check_timeout)
        argv.flag("--allow-dirty", allow_dirty).flag("--keep-culprits", keep_culprits)
        check_s = _check_seconds(check_timeout)
        limit = st.limit(check_s + st.bound, f"its check_timeout ({check_s:.0f} s) plus "
                         f"PRUN_MCP_TIMEOUT ({st.bound:.0f} s)")
        return await st.both_of("integrate", argv, at, ctx, limit=limit)


def result_resources(server: MCPServer[Any], st: Prun) -> None:
    """A run's result files as resources, by packet id."""
    @server.resource("prun://runs/{run}/results", name="results", mime_type="application/json",
                     description="A run's packets: status, result file and the URI of each "
                     "packet's result")
    async def results(run: str) -> str:
        units = await _units(st, run)
        return json.dumps([{"packet": u.get("packet_id"), "status": u.get("status"),
                            "result_path": u.get("result_path"),
                            "uri": f"prun://runs/{run}/results/{u.get('packet_id')}"}
                           for u in units], indent=1)

    @server.resource("prun://runs/{run}/results/{packet}", name="result",
                     mime_type="text/markdown",
                     description="The result file of a packet's latest attempt in a run (its "
                     f"first {RESULT_MAX // (1024 * 1024)} MiB)")
    async def result(run: str, packet: str) -> str:
        _checked("packet", packet, args.PacketId)
        units = await _units(st, run)
        unit = next((u for u in units if u.get("packet_id") == packet), None)
        if unit is None:
            known = ", ".join(str(u.get("packet_id")) for u in units)
            raise ResourceError(f"prun: no packet {packet!r} in run {run} (packets: {known})")
        path = unit.get("result_path")
        text = _read_result(path) if isinstance(path, str) and path else None
        if text is None:
            raise ResourceError(f"prun: packet {packet} of run {run} has no result yet "
                                f"(status {unit.get('status')}; wait for it)")
        return text


def _checked(name: str, value: str, kind: Any) -> None:
    """A resource's URI part by the rule of ``kind`` (ResourceError, one line, if broken)."""
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(kind).validate_python(value)
    except ValidationError as e:
        err = e.errors(include_url=False)[0]
        what = err.get("ctx", {}).get("error", err["msg"])
        raise ResourceError(f"prun: {name}: {what}") from None


def _read_result(path: str) -> str | None:
    """The result file at ``path``: a regular file only (never a link, a FIFO, a device:
    ``fsutil.read_head``), its first ``RESULT_MAX`` bytes; None when there is none (or it is empty)."""
    data = read_head(path, RESULT_MAX + 1)
    if not data:   # none, empty, or not a regular file
        return None
    text = data[:RESULT_MAX].decode("utf-8", "replace")
    if len(data) > RESULT_MAX:
        text += f"\n\n[cut at {RESULT_MAX:,} bytes: read the file itself, {path}]\n"
    return text


async def _units(st: Prun, run: str) -> list[dict[str, Any]]:
    _checked("run", run, args.Id)
    try:
        view = await anyio.to_thread.run_sync(lambda: api.status(run, repo=st.folder_of(run)))
    except PrunError as e:
        raise ResourceError(f"prun: {printable(e.line())}") from None
    return [asdict(u) for u in view.units]


def _check_seconds(text: str | None) -> float:
    """``integrate``'s check_timeout in seconds (default 1 h), at most ``CHECK_MAX_S``: the
    call stays bounded. A duration that does not parse (or is too long) is refused here."""
    if not text:
        return 3600.0
    try:
        seconds = float(parse_duration(text, what="check_timeout"))
    except UsageError as e:
        raise args.Refused(f"{e.message} (give at most {CHECK_MAX_S / 3600:.0f}h)") from None
    if seconds > CHECK_MAX_S:
        raise args.Refused(f"check_timeout {text!r}: more than {CHECK_MAX_S / 3600:.0f} h "
                           f"(give at most {CHECK_MAX_S / 3600:.0f}h, or run prun integrate "
                           "from a shell)")
    return seconds
