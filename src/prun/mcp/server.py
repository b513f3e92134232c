"""The MCP server: prun's commands as tools, a run's results as resources (stdio).

Tools are named as the commands (Claude Code shows them as ``mcp__prun__<name>``, Gemini CLI
as ``mcp_prun_<name>``): check, run, status, wait, cancel, reassign, followup, reconcile,
integrate, dispatch, receipt, quota, ledger, brief. Each runs its command in a child
(``prun.mcp.child``) in ``cwd`` (else the server's working folder) and returns the command's
lines as text and, as structured content, its ``--json`` fields (where it has ``--json``) plus
``lines``, ``exit_code`` and ``exit_name``: complete on its own, because Claude Code shows the
model the structured content rather than the text. An error is an MCP tool error whose text
is the command's one line ``prun: <what> (<how to fix>)``.

Resources: ``prun://runs/{run}/results`` lists a run's packets and their result URIs;
``prun://runs/{run}/results/{packet}`` is the result file of the packet's latest attempt.
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import json
import os
import tempfile
import time
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, ContentBlock, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import __version__
from . import child, tools
from . import lines as terse

DEFAULT_WAIT_S = 300
MAX_WAIT_S = 3600
# a child of any other tool is ended after this long ($PRUN_MCP_TIMEOUT seconds)
DEFAULT_BOUND_S = 600.0
# seconds past a command's own --wait or --timeout before its child is ended
MARGIN_S = 30.0
BEAT_S = 10.0
# how long a dispatcher may take to print its STATE-DIR line
START_S = 60.0

INSTRUCTIONS = """\
prun runs independent units of a task in parallel as separate agent processes (agy/Gemini,
Claude Sonnet, Gemini CLI, in-session subagents, commands) and gathers, checks and integrates
what they produced. Flow: check a plan, run it (detached, returns the run id), wait on it
(pass the returned cursor back as since) and act on each event, status, reconcile, then
integrate (never commits: ask the person before committing). Each tool returns the command's
terse lines plus its --json fields; exit_name says what a wait, reconcile or integrate found.
Read one unit's result as the resource prun://runs/{run}/results/{packet}."""


class Result(BaseModel):
    """Every tool's structured content: the command's ``--json`` fields, when it has
    ``--json``, and these."""

    model_config = ConfigDict(extra="allow")

    lines: list[str] = Field(description="the command's terse lines, exactly as it prints them")
    exit_code: int | None = Field(description="the command's exit code (null: still running)")
    exit_name: str | None = Field(description="its name in prun's exit code table "
                                  "(OK, FAILED, UNIT_FAILED, STALLED, NEEDS_REVIEW ...)")


Output = Annotated[CallToolResult, Result]
Cwd = Annotated[str | None, Field(
    description="the folder that paths and the repository are resolved against "
    "(default: the server's working folder)")]
RunOpt = Annotated[str | None, Field(
    description="a run id or unique prefix (default: the latest run of the repository)")]
Seconds = Annotated[float | None, Field(ge=0, le=MAX_WAIT_S, description="seconds")]


class Prun:
    """The server's state: its working folder, and which folder each run id was seen in (so
    a result resource is found in its own repository's ledger)."""

    def __init__(self, cwd: str | None = None, bound: float | None = None) -> None:
        self.cwd = os.path.abspath(cwd or os.getcwd())
        self.bound = bound if bound is not None else _bound_from_env()
        self.runs: dict[str, str] = {}

    # -- running a command --------------------------------------------------------------

    def folder(self, cwd: str | None) -> str:
        if not cwd:
            return self.cwd
        path = os.path.abspath(os.path.join(self.cwd, os.path.expanduser(cwd)))
        if not os.path.isdir(path):
            raise _Refused(f"prun: cwd {cwd}: not a folder (give an existing folder)")
        return path

    async def lines_of(self, name: str, argv: list[str], cwd: str | None, ctx: Context, *,
                       bound: float | None = None, progress_total: float | None = None,
                       extra: Any = None) -> CallToolResult:
        """Run ``prun <argv>`` (a command whose stdout is its lines)."""
        spec = tools.SPECS[name]
        try:
            folder = self.folder(cwd)
        except _Refused as e:
            return _error(spec, str(e))
        started = time.monotonic()
        last = [0.0]

        async def progress(message: str) -> None:
            value = max(time.monotonic() - started, last[0] + 0.001)
            last[0] = value
            await ctx.report_progress(value, progress_total, message)

        async def on_line(line: str) -> None:
            await progress(line)

        async def on_beat(elapsed: float) -> None:
            await progress(f"prun {name}: running for {elapsed:.0f}s")

        done = await child.run(child.prun_argv(*argv), cwd=folder,
                               bound=bound if bound is not None else self.bound,
                               on_line=on_line, on_beat=on_beat, beat_every=BEAT_S)
        if done.timed_out:
            return _error(spec, f"prun: prun {name} took longer than {bound or self.bound:.0f}s "
                          "and was stopped (give it a longer timeout, or see prun status)")
        fields = extra(done.lines) if extra is not None else {}
        out = tools.outcome(spec, done.exit_code, done.lines, done.stderr, extra=fields)
        self.remember(out.structured, folder)
        return _result(out)

    async def both_of(self, name: str, argv: list[str], cwd: str | None, ctx: Context, *,
                      bound: float | None = None) -> CallToolResult:
        """Run ``prun <argv> --json`` and get its lines too (``prun.cli.capture``)."""
        spec = tools.SPECS[name]
        try:
            folder = self.folder(cwd)
        except _Refused as e:
            return _error(spec, str(e))
        envelope, failure = await self.capture(argv, folder, ctx, bound=bound)
        if envelope is None:
            return _error(spec, failure)
        data = tools.loads(envelope.get("json"))
        got = envelope.get("lines")
        if not isinstance(got, list):
            got = str(envelope.get("json") or "").splitlines()
        out = tools.outcome(spec, envelope.get("exit_code"), [str(x) for x in got],
                            str(envelope.get("stderr") or ""), data=data)
        self.remember(out.structured, folder)
        return _result(out)

    async def capture(self, argv: list[str], folder: str, ctx: Context | None, *,
                      bound: float | None = None,
                      lines: bool = True) -> tuple[dict[str, Any] | None, str]:
        """The envelope of ``prun.cli.capture`` for ``argv``, or None and why not."""
        request = json.dumps({"argv": argv, "lines": lines})
        started = time.monotonic()

        async def on_beat(elapsed: float) -> None:
            if ctx is not None:
                await ctx.report_progress(time.monotonic() - started, None,
                                          f"prun {argv[0]}: running for {elapsed:.0f}s")

        limit = bound if bound is not None else self.bound
        done = await child.run(child.capture_argv(request), cwd=folder, bound=limit,
                               on_beat=on_beat, beat_every=BEAT_S)
        if done.timed_out:
            return None, (f"prun: prun {argv[0]} took longer than {limit:.0f}s and was stopped "
                          "(raise PRUN_MCP_TIMEOUT, or run it from a shell)")
        try:
            envelope = json.loads("\n".join(done.lines))
        except ValueError:
            envelope = None
        if not isinstance(envelope, dict):
            last = (done.stderr.strip().splitlines() or [f"exit code {done.exit_code}"])[-1]
            return None, last if last.startswith("prun: ") else f"prun: prun {argv[0]}: {last}"
        return envelope, ""

    def remember(self, structured: dict[str, Any], folder: str) -> None:
        run = structured.get("run")
        run_id = run.get("id") if isinstance(run, dict) else run
        for value in (structured.get("run_id"), run_id):
            if isinstance(value, str) and value:
                self.runs[value] = folder

    def folder_of(self, run: str) -> str:
        if run in self.runs:
            return self.runs[run]
        for known, folder in self.runs.items():
            if known.startswith(run):
                return folder
        return self.cwd


def _bound_from_env() -> float:
    """``$PRUN_MCP_TIMEOUT``: seconds, or a duration such as ``15m``."""
    raw = os.environ.get("PRUN_MCP_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_BOUND_S
    from .._util.timeparse import parse_duration

    value = float(parse_duration(raw, what="PRUN_MCP_TIMEOUT"))
    if value <= 0:
        from ..errors import UsageError

        raise UsageError(f"PRUN_MCP_TIMEOUT={raw}: not a positive duration",
                         hint="give seconds or a duration such as 15m")
    return value


class _Refused(Exception):
    """A tool argument refused before any child ran (the message is prun's one line)."""


def _result(out: tools.Outcome) -> CallToolResult:
    content: list[ContentBlock] = [TextContent(type="text", text=out.text or "(no output)")]
    return CallToolResult(content=content, structured_content=out.structured, is_error=out.error)


def _error(spec: tools.Spec, message: str) -> CallToolResult:
    return _result(tools.Outcome(True, message, {"error": message, "exit_code": None,
                                                 "exit_name": None, "lines": []}))


def _opt(argv: list[str], flag: str, value: Any) -> None:
    """Add ``flag value`` (or a bare flag for True; each item of a list) when given."""
    if value is None or value is False:
        return
    if value is True:
        argv.append(flag)
    elif isinstance(value, list | tuple):
        for item in value:
            argv += [flag, str(item)]
    else:
        argv += [flag, _num(value)]


def _num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _run_id(lines: list[str]) -> dict[str, Any]:
    rec = terse.first(lines, "RUN")
    return {"run_id": rec["args"][0]} if rec and rec["args"] else {}


def _wait_fields(lines: list[str]) -> dict[str, Any]:
    fields = _run_id(lines)
    cursor = terse.first(lines, "CURSOR")
    if cursor and cursor["args"]:
        try:
            fields["cursor"] = int(cursor["args"][0])
        except ValueError:
            fields["cursor"] = cursor["args"][0]
    events = []
    for line in lines:
        if line.startswith("EVENT "):
            rec = terse.parse(line)
            args = rec.pop("args")
            rec.pop("word")
            event: dict[str, Any] = {"seq": int(args[0]) if args and args[0].isdigit() else None,
                                     "kind": args[1] if len(args) > 1 else None}
            event.update(rec)
            events.append(event)
    fields["events"] = events
    return fields


def _dispatch_fields(lines: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for line in lines:
        key, _, value = line.partition(" ")
        if key in ("STATE-DIR", "RESULT-FILE", "HANDOFF-FILE", "RECEIPT-CMD", "WORKSPACE"):
            fields[key.lower().replace("-", "_")] = value
    return fields


class _Server(MCPServer[Any]):
    """The SDK's server, with prun's one-line errors for arguments its schemas refuse."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            cause = e.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_bad_arguments(name, cause)) from None
            message = str(e)
            raise ToolError(message if message.startswith("prun: ") else f"prun: {message}") \
                from None


def _bad_arguments(tool: str, error: ValidationError) -> str:
    what = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                     for err in error.errors(include_url=False))
    return f"prun: {tool}: bad arguments: {what} (see the tool's input schema)"


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)


def build(state: Prun | None = None) -> MCPServer[Any]:
    """The server, its tools and its resources."""
    st = state or Prun()

    server: MCPServer[Any] = _Server(name="prun", title="prun (parallel run)",
                                     version=__version__, instructions=INSTRUCTIONS,
                                     log_level="WARNING")

    _watch_tools(server, st)
    _control_tools(server, st)
    _unit_tools(server, st)
    _results(server, st)
    return server


def _watch_tools(server: MCPServer[Any], st: Prun) -> None:
    """check, run, status and wait."""
    @server.tool(description="The independence test (prun check PLAN): may the plan's packets "
                 "run side by side. Lines: FAIL <rule> <a> <b> ... why= fix=, then OK or FAILED; "
                 "exit_code 1 means a rule failed.",
                 annotations=READ_ONLY)
    async def check(plan: Annotated[str, Field(description="the plan file (YAML)")],
                    ctx: Context,
                    repo: Annotated[str | None, Field(
                        description="the repository bases are resolved in")] = None,
                    no_git: Annotated[bool, Field(
                        description="compare bases as written")] = False,
                    cwd: Cwd = None) -> Output:
        argv = ["check", plan]
        _opt(argv, "--repo", repo)
        _opt(argv, "--no-git", no_git)
        return await st.both_of("check", argv, cwd, ctx)

    @server.tool(description="Start a plan in the background (prun run PLAN --detach): it is "
                 "checked and frozen, and the run id comes back at once (RUN <id>, run_id). "
                 "Follow it with wait.",
                 annotations=ACTS)
    async def run(plan: Annotated[str, Field(description="the plan file (YAML)")],
                  ctx: Context,
                  parallel: Annotated[int | None, Field(
                      ge=1, description="units at once (default: the plan's, else 8)")] = None,
                  deadline: Annotated[str | None, Field(
                      description="the run's terminal deadline: a duration (90m) or ISO "
                      "time")] = None,
                  allow_overlap: Annotated[bool, Field(
                      description="run a plan that fails the independence test (recorded in "
                      "the ledger)")] = False,
                  cwd: Cwd = None) -> Output:
        argv = ["run", plan, "--detach"]
        _opt(argv, "--parallel", parallel)
        _opt(argv, "--deadline", deadline)
        _opt(argv, "--allow-overlap", allow_overlap)
        return await st.lines_of("run", argv, cwd, ctx, extra=_run_id)

    @server.tool(description="A run's state (prun status [RUN] --json): the RUN line, a UNIT "
                 "line per packet that needs attention, RESULTS <folder>; with all, every packet.",
                 annotations=READ_ONLY)
    async def status(ctx: Context, run: RunOpt = None,
                     all: Annotated[bool, Field(description="a line for every packet")] = False,
                     cwd: Cwd = None) -> Output:
        argv = ["status"]
        if run:
            argv.append(run)
        _opt(argv, "--all", all)
        return await st.both_of("status", argv, cwd, ctx)

    @server.tool(description="Block until the run has something to act on (prun wait): EVENT "
                 "lines, the RUN line, CURSOR <n>. Pass cursor back as since for the next event. "
                 "exit_name says what happened: OK (all succeeded), FAILED (finished otherwise), "
                 "UNIT_FAILED, STALLED, PARKED, HANDOFF (spawn the handoff= subagent, then run "
                 "receipt_cmd=), SUPERVISOR_GONE (prun resume), STOPPED (no receipt), "
                 "UNIT_SUCCEEDED (with any), TIMEOUT (nothing yet). Sends progress while it waits.",
                 annotations=READ_ONLY)
    async def wait(ctx: Context, run: RunOpt = None,
                   since: Annotated[int | None, Field(
                       ge=0, description="only events after this cursor (the last wait's)")] = None,
                   timeout: Annotated[float, Field(
                       gt=0, le=MAX_WAIT_S, description="give up after this many seconds "
                       "(exit_name TIMEOUT)")] = DEFAULT_WAIT_S,
                   any: Annotated[bool, Field(
                       description="also wake when a unit succeeds")] = False,
                   cwd: Cwd = None) -> Output:
        argv = ["wait"]
        if run:
            argv.append(run)
        _opt(argv, "--since", since)
        argv += ["--timeout", f"{_num(timeout)}s"]
        _opt(argv, "--any", any)
        return await st.lines_of("wait", argv, cwd, ctx, bound=timeout + MARGIN_S,
                                 progress_total=timeout, extra=_wait_fields)



def _control_tools(server: MCPServer[Any], st: Prun) -> None:
    """cancel, reassign, followup, reconcile and integrate."""
    @server.tool(description="Cancel a run, one attempt (RUN:PACKET:N) or one packet "
                 "(prun cancel): CANCEL <target> status=<s> once the group is confirmed gone; "
                 "exit_code 1: not confirmed within wait seconds (the request stands).",
                 annotations=ACTS)
    async def cancel(run: Annotated[str, Field(description="a run id, or an attempt id")],
                     ctx: Context,
                     packet: Annotated[str | None, Field(
                         description="cancel only this packet of the run")] = None,
                     reason: Annotated[str | None, Field(
                         description="why (recorded in the ledger)")] = None,
                     wait: Seconds = None, cwd: Cwd = None) -> Output:
        argv = ["cancel", run]
        _opt(argv, "--packet", packet)
        _opt(argv, "--reason", reason)
        _opt(argv, "--wait", wait)
        return await st.lines_of("cancel", argv, cwd, ctx, bound=(wait or 60) + MARGIN_S)

    @server.tool(description="A linked successor attempt for a packet, optionally on another "
                 "executor (prun reassign); the predecessor's late output is quarantined. "
                 "REASSIGN <packet> run= executor= predecessor= attempt=.",
                 annotations=ACTS)
    async def reassign(packet: Annotated[str, Field(description="the packet id")], ctx: Context,
                       run: RunOpt = None,
                       executor: Annotated[str | None, Field(
                           description="the successor's executor (default: the same)")] = None,
                       reason: Annotated[str | None, Field(
                           description="why (recorded in the ledger)")] = None,
                       wait: Seconds = None, cwd: Cwd = None) -> Output:
        argv = ["reassign", packet]
        _opt(argv, "--run", run)
        _opt(argv, "--executor", executor)
        _opt(argv, "--reason", reason)
        _opt(argv, "--wait", wait)
        return await st.lines_of("reassign", argv, cwd, ctx, bound=(wait or 60) + MARGIN_S)

    @server.tool(description="A follow-up turn for a packet (prun followup): a linked attempt "
                 "that resumes its conversation in the same workspace, with a fresh result path. "
                 "FOLLOWUP <packet> run= predecessor= attempt= resume=yes|no.",
                 annotations=ACTS)
    async def followup(packet: Annotated[str, Field(description="the packet id")],
                       prompt_file: Annotated[str, Field(
                           description="the follow-up request (a Markdown file)")],
                       ctx: Context, run: RunOpt = None, wait: Seconds = None,
                       cwd: Cwd = None) -> Output:
        argv = ["followup", packet, "--prompt-file", prompt_file]
        _opt(argv, "--run", run)
        _opt(argv, "--wait", wait)
        return await st.lines_of("followup", argv, cwd, ctx, bound=(wait or 60) + MARGIN_S)

    @server.tool(description="Judge every packet of a run before integrating (prun reconcile "
                 "--json): ACCEPTED, REJECTED <packet> reason=, REVIEW <packet> reason=, then "
                 "RECONCILE ... complete=yes|no. exit_name OK, FAILED (rejected) or NEEDS_REVIEW.",
                 annotations=ACTS)
    async def reconcile(ctx: Context, run: RunOpt = None,
                        rescoped: Annotated[list[str] | None, Field(
                            description="packets whose change of scope the person approved "
                            "(PACKET or PACKET=WHY)")] = None,
                        cwd: Cwd = None) -> Output:
        argv = ["reconcile"]
        if run:
            argv.append(run)
        _opt(argv, "--rescoped", rescoped)
        return await st.both_of("reconcile", argv, cwd, ctx)

    @server.tool(description="Apply a run's accepted changes to the working tree and run the "
                 "plan's combined check; never commits (prun integrate --json). APPLIED, "
                 "CONFLICT, SKIPPED, CHECK, INTEGRATE ... committed=no. exit_name OK, FAILED "
                 "(check failed) or CONFLICT. Ask the person before any commit.",
                 annotations=ACTS)
    async def integrate(ctx: Context, run: RunOpt = None,
                        include: Annotated[list[str] | None, Field(
                            description="also apply these rejected or needs-review packets' "
                            "changes")] = None,
                        worktree: Annotated[str | None, Field(
                            description="apply in a new integration worktree at this path")] = None,
                        no_check: Annotated[bool, Field(
                            description="do not run the combined check")] = False,
                        check_timeout: Annotated[str | None, Field(
                            description="bound on the combined check (default 1h)")] = None,
                        allow_dirty: Annotated[bool, Field(
                            description="apply over uncommitted local changes to the same "
                            "files")] = False,
                        cwd: Cwd = None) -> Output:
        argv = ["integrate"]
        if run:
            argv.append(run)
        _opt(argv, "--include", include)
        _opt(argv, "--worktree", worktree)
        _opt(argv, "--no-check", no_check)
        _opt(argv, "--check-timeout", check_timeout)
        _opt(argv, "--allow-dirty", allow_dirty)
        bound = max(st.bound, _duration(check_timeout, 3600.0) + st.bound)
        return await st.both_of("integrate", argv, cwd, ctx, bound=bound)



def _unit_tools(server: MCPServer[Any], st: Prun) -> None:
    """dispatch, receipt, quota, ledger and brief."""
    @server.tool(description="Run one unit on one executor outside a plan (prun dispatch): "
                 "STATE-DIR <dir> at once, the result published atomically at result_file "
                 "(FALLBACK if it failed). Waits up to wait seconds (default 0) for the unit to "
                 "end; a unit still running goes on (running: true). A session unit returns its "
                 "HANDOFF lines; attach the subagent's id with receipt.",
                 annotations=ACTS)
    async def dispatch(prompt_file: Annotated[str, Field(description="the unit's prompt")],
                       result_file: Annotated[str, Field(
                           description="a fresh path for the unit's result")],
                       unit_id: Annotated[str, Field(
                           description="letters, digits, '.', '_', '-'")],
                       ctx: Context,
                       executor: Annotated[str | None, Field(
                           description="agy (default), claude, gemini, session, command")] = None,
                       mode: Annotated[str | None, Field(
                           description="accept-edits or plan (required with add_dir)")] = None,
                       add_dir: Annotated[list[str] | None, Field(
                           description="extra directories the unit may use")] = None,
                       continue_from: Annotated[str | None, Field(
                           description="resume the conversation of this state dir")] = None,
                       command: Annotated[str | None, Field(
                           description="the command executor's program, as shell words")] = None,
                       model: Annotated[str | None, Field(description="the model")] = None,
                       effort: Annotated[str | None, Field(description="the effort")] = None,
                       route_reason: Annotated[str | None, Field(
                           description="why this executor was chosen")] = None,
                       sandbox: Annotated[str | None, Field(
                           description="auto, on or off")] = None,
                       timeout: Annotated[str | None, Field(
                           description="the unit's timeout: seconds or a duration (45m)")] = None,
                       wait: Annotated[float, Field(
                           ge=0, le=MAX_WAIT_S, description="seconds to wait for the unit to "
                           "end before returning")] = 0,
                       cwd: Cwd = None) -> Output:
        argv = ["dispatch", "--prompt-file", prompt_file, "--result-file", result_file,
                "--unit-id", unit_id]
        for flag, value in (("--executor", executor), ("--mode", mode), ("--add-dir", add_dir),
                            ("--continue-from", continue_from), ("--command", command),
                            ("--model", model), ("--effort", effort),
                            ("--route-reason", route_reason), ("--sandbox", sandbox),
                            ("--timeout", timeout)):
            _opt(argv, flag, value)
        return await _dispatch(st, argv, cwd, ctx, wait, session=executor == "session")

    @server.tool(description="Attach the subagent's identifier to a session unit (prun "
                 "receipt): the dispatch receipt. RECEIPT <state-dir> attempt-id=<id>.",
                 annotations=ACTS)
    async def receipt(state_dir: Annotated[str, Field(
                          description="the STATE-DIR of a session unit")],
                      attempt_id: Annotated[str, Field(
                          description="the identifier the runtime returned for the subagent")],
                      ctx: Context, cwd: Cwd = None) -> Output:
        return await st.lines_of("receipt", ["receipt", state_dir, "--attempt-id", attempt_id],
                                 cwd, ctx)

    @server.tool(description="What each quota group has left and when it resets (prun quota "
                 "--json): QUOTA group= state=ok|empty|unknown left= resets= age=, SNAPSHOT.",
                 annotations=READ_ONLY)
    async def quota(ctx: Context,
                    refresh: Annotated[bool, Field(
                        description="re-read every probed group now")] = False,
                    group: Annotated[list[str] | None, Field(
                        description="only these groups")] = None,
                    cwd: Cwd = None) -> Output:
        argv = ["quota"]
        _opt(argv, "--refresh", refresh)
        _opt(argv, "--group", group)
        return await st.both_of("quota", argv, cwd, ctx)

    @server.tool(description="The ledger (prun ledger --json): the latest runs; one run's "
                 "attempts; with events, its event log; with dispatches, standalone dispatches.",
                 annotations=READ_ONLY)
    async def ledger(ctx: Context,
                     run: Annotated[str | None, Field(
                         description="a run id or unique prefix")] = None,
                     events: Annotated[bool, Field(description="the run's event log")] = False,
                     dispatches: Annotated[bool, Field(
                         description="standalone dispatch attempts")] = False,
                     limit: Annotated[int | None, Field(
                         ge=1, description="how many runs (default 20)")] = None,
                     cwd: Cwd = None) -> Output:
        argv = ["ledger"]
        if run:
            argv.append(run)
        _opt(argv, "--events", events)
        _opt(argv, "--dispatches", dispatches)
        _opt(argv, "--limit", limit)
        return await st.both_of("ledger", argv, cwd, ctx)

    @server.tool(description="Exactly what a unit is told (prun brief PACKET --json): the brief "
                 "its latest attempt received, or with plan a preview for a plan not yet run.",
                 annotations=READ_ONLY)
    async def brief(packet: Annotated[str, Field(description="the packet id")], ctx: Context,
                    run: RunOpt = None,
                    plan: Annotated[str | None, Field(
                        description="preview the brief from this plan file")] = None,
                    attempt: Annotated[str | None, Field(
                        description="the brief of this attempt")] = None,
                    cwd: Cwd = None) -> Output:
        argv = ["brief", packet]
        _opt(argv, "--run", run)
        _opt(argv, "--plan", plan)
        _opt(argv, "--attempt", attempt)
        return await st.both_of("brief", argv, cwd, ctx)



def _results(server: MCPServer[Any], st: Prun) -> None:
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
                     description="The result file of a packet's latest attempt in a run")
    async def result(run: str, packet: str) -> str:
        units = await _units(st, run)
        unit = next((u for u in units if u.get("packet_id") == packet), None)
        if unit is None:
            known = ", ".join(str(u.get("packet_id")) for u in units)
            raise ResourceError(f"prun: no packet {packet!r} in run {run} (packets: {known})")
        path = unit.get("result_path")
        if not path or not os.path.isfile(path):
            raise ResourceError(f"prun: packet {packet} of run {run} has no result yet "
                                f"(status {unit.get('status')}; wait for it)")
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()



async def _units(st: Prun, run: str) -> list[dict[str, Any]]:
    envelope, failure = await st.capture(["status", run], st.folder_of(run), None, lines=False)
    if envelope is None:
        raise ResourceError(failure)
    data = tools.loads(envelope.get("json"))
    if envelope.get("exit_code") != 0 or not isinstance(data, dict):
        last = (str(envelope.get("stderr") or "").strip().splitlines() or ["no such run"])[-1]
        raise ResourceError(last if last.startswith("prun: ") else f"prun: {last}")
    units = data.get("units")
    return [u for u in units if isinstance(u, dict)] if isinstance(units, list) else []


def _duration(text: str | None, default: float) -> float:
    if not text:
        return default
    from .._util.timeparse import parse_duration

    try:
        return float(parse_duration(text, what="check_timeout"))
    except Exception:
        return default


async def _dispatch(st: Prun, argv: list[str], cwd: str | None, ctx: Context,
                    wait: float, session: bool) -> CallToolResult:
    """Start the dispatcher through ``prun.mcp.detach`` and wait up to ``wait`` seconds for
    the unit to end (at least until its STATE-DIR line); a unit still running then goes on,
    reported with ``running: true``. Only the relay is ever ended, never the dispatcher."""
    spec = tools.SPECS["dispatch"]
    try:
        folder = st.folder(cwd)
    except _Refused as e:
        return _error(spec, str(e))
    fd, err_path = tempfile.mkstemp(prefix=f"dispatch-{argv[argv.index('--unit-id') + 1]}-",
                                    suffix=".stderr", dir=_stderr_folder())
    os.close(fd)
    seen, stop = anyio.Event(), anyio.Event()

    async def on_line(line: str) -> None:
        if line.startswith("STATE-DIR "):
            seen.set()
            await ctx.report_progress(1, None, line)

    async def watch() -> None:
        await anyio.sleep(wait)
        await seen.wait()
        if not session:  # a session unit prints its hand-off lines and ends at once
            stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        done = await child.run(child.detached_argv(err_path, child.prun_argv(*argv)),
                               cwd=folder, bound=wait + START_S, on_line=on_line, stop=stop)
        tg.cancel_scope.cancel()
    with open(err_path, encoding="utf-8", errors="replace") as f:
        stderr = f.read()
    fields = _dispatch_fields(done.lines)
    if done.exit_code is None and fields.get("state_dir"):
        # still running: its stderr keeps going to the file
        fields.update(running=True, stderr_file=err_path)
        out = tools.outcome(spec, 0, done.lines, "", extra=fields)
        out.structured["exit_code"] = None
        out.structured["exit_name"] = None
        return _result(out)
    os.unlink(err_path)
    if done.exit_code is None:
        return _error(spec, f"prun: prun dispatch printed no STATE-DIR line within "
                      f"{wait + START_S:.0f}s (see prun dispatch --help)")
    fields["running"] = False
    return _result(tools.outcome(spec, done.exit_code, done.lines, stderr, extra=fields))


def _stderr_folder() -> str:
    """Where a standalone dispatcher's stderr goes while the MCP server relays it: the user's
    state folder for prun (``$XDG_STATE_HOME/prun/mcp``)."""
    from ..settings import current

    folder = os.path.join(str(current().user_state), "mcp")
    os.makedirs(folder, exist_ok=True)
    return folder


def serve() -> None:
    """Serve on stdio until the client closes the connection."""
    build().run("stdio")
