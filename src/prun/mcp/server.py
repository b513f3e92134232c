"""The MCP server: prun's commands as tools, a run's results as resources (stdio).

Tools are named as the commands (Claude Code shows them as ``mcp__prun__<name>``, Gemini CLI
as ``mcp_prun_<name>``): check, run, status, wait, cancel, reassign, followup, reconcile,
integrate, dispatch, receipt, quota, ledger, brief. Each runs its command in a child
(``prun.mcp.child``) in ``cwd`` (else the server's working folder) and returns the command's
lines as text and, as structured content, its ``--json`` fields (where it has ``--json``) plus
``lines``, ``exit_code`` and ``exit_name``: complete on its own, because Claude Code shows the
model the structured content rather than the text. An error is an MCP tool error whose text
is one line ``prun: <what> (<how to fix>)``: the command's, or the server's own for an
argument ``args`` refused (nothing ran), a bound passed, or a child something else ended.

Resources: ``prun://runs/{run}/results`` lists a run's packets and their result URIs;
``prun://runs/{run}/results/{packet}`` is the result file of the packet's latest attempt.
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, ContentBlock, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import __version__
from .._util.quoting import unquote
from . import args, child, tools
from . import lines as terse

log = logging.getLogger("prun.mcp")

DEFAULT_WAIT_S = 300
MAX_WAIT_S = 3600
# a child of any other tool is ended after settings.mcp_timeout_s ($PRUN_MCP_TIMEOUT, 10 min);
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
Cwd = Annotated[args.PathText | None, Field(
    description="the folder that paths and the repository are resolved against "
    "(default: the server's working folder)")]
RunOpt = Annotated[args.Id | None, Field(
    description="a run id or unique prefix (left out: the latest run of the repository; "
    "never empty)")]
Seconds = Annotated[float | None, Field(
    ge=0, le=MAX_WAIT_S, allow_inf_nan=False, description="seconds")]


@dataclass(frozen=True)
class Limit:
    """How long one call's child may run, and what that bound is called."""

    seconds: float
    what: str
    fix: str


class Prun:
    """The server's state: its working folder, and which folder each run id was seen in (so
    a result resource is found in its own repository's ledger)."""

    def __init__(self, cwd: str | None = None, bound: float | None = None) -> None:
        self.cwd = os.path.abspath(cwd or os.getcwd())
        if bound is None:
            from ..settings import current

            bound = current().mcp_timeout_s
        self.bound = bound
        self.runs: dict[str, str] = {}

    # -- running a command --------------------------------------------------------------

    def folder(self, cwd: str | None) -> str:
        """The tool's folder: ``cwd`` (relative to the server's), else the server's."""
        if not cwd:
            return self.cwd
        given = os.path.expanduser(cwd)
        args.folder("cwd", given, self.cwd)
        return os.path.abspath(os.path.join(self.cwd, given))

    def limit(self, seconds: float | None = None, what: str | None = None) -> Limit:
        """The bound of a call: ``seconds`` (named ``what``), else PRUN_MCP_TIMEOUT."""
        if seconds is None or what is None:
            return Limit(self.bound, f"PRUN_MCP_TIMEOUT, {_secs(self.bound)}",
                         "raise PRUN_MCP_TIMEOUT where the server starts, or run the command "
                         "from a shell")
        return Limit(seconds, what, "give it a longer bound, or see prun status")

    async def lines_of(self, name: str, argv: args.Argv, folder: str, ctx: Context, *,
                       limit: Limit | None = None, progress_total: float | None = None,
                       extra: Any = None) -> CallToolResult:
        """Run ``prun <argv>`` (a command whose stdout is its lines) in ``folder``."""
        spec = tools.SPECS[name]
        bound = limit or self.limit()
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

        done = await child.run(child.prun_argv(*argv.words()), cwd=folder,
                               bound=bound.seconds, on_line=on_line, on_beat=on_beat,
                               beat_every=BEAT_S)
        if done.timed_out or done.over_limit:
            return _error(_stopped(argv.command, bound) if done.timed_out
                          else _too_much(argv.command))
        fields = extra(done.lines) if extra is not None else {}
        out = tools.outcome(spec, done.exit_code, done.lines, done.stderr, extra=fields)
        self.remember(out.structured, folder)
        return _result(out)

    async def both_of(self, name: str, argv: args.Argv, folder: str, ctx: Context, *,
                      limit: Limit | None = None) -> CallToolResult:
        """Run ``prun <argv> --json`` in ``folder`` and get its lines too
        (``prun.cli.capture``)."""
        spec = tools.SPECS[name]
        envelope, failure = await self.capture(argv, folder, ctx, limit=limit)
        if envelope is None:
            return _error(failure)
        data = tools.loads(envelope.get("json"))
        got = envelope.get("lines")
        if not isinstance(got, list):
            got = str(envelope.get("json") or "").splitlines()
        out = tools.outcome(spec, envelope.get("exit_code"), [str(x) for x in got],
                            str(envelope.get("stderr") or ""), data=data)
        self.remember(out.structured, folder)
        return _result(out)

    async def capture(self, argv: args.Argv, folder: str, ctx: Context | None, *,
                      limit: Limit | None = None,
                      lines: bool = True) -> tuple[dict[str, Any] | None, str]:
        """The envelope of ``prun.cli.capture`` for ``argv``, or None and why not."""
        request = json.dumps({"argv": argv.words(), "lines": lines})
        bound = limit or self.limit()
        started = time.monotonic()

        async def on_beat(elapsed: float) -> None:
            if ctx is not None:
                await ctx.report_progress(time.monotonic() - started, None,
                                          f"prun {argv.command}: running for {elapsed:.0f}s")

        done = await child.run(child.capture_argv(request), cwd=folder, bound=bound.seconds,
                               on_beat=on_beat, beat_every=BEAT_S)
        if done.timed_out:
            return None, _stopped(argv.command, bound)
        if done.over_limit:
            return None, _too_much(argv.command)
        try:
            envelope = json.loads("\n".join(done.lines))
        except ValueError:
            envelope = None
        if not isinstance(envelope, dict):
            last = (done.stderr.strip().splitlines() or [""])[-1]
            if last.startswith("prun: "):
                return None, last
            return None, f"prun: {tools.ended(argv.command, done.exit_code, last)}"
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


def _secs(seconds: float) -> str:
    return f"{seconds:.0f} s"


def _stopped(command: str, bound: Limit) -> str:
    return (f"prun: prun {command} was stopped after {_secs(bound.seconds)}, the bound of this "
            f"call ({bound.what}) ({bound.fix})")


def _too_much(command: str) -> str:
    return (f"prun: prun {command} printed more than {child.OUTPUT_MAX // (1024 * 1024)} MiB "
            "and was stopped (ask for less: name a run, leave out all or events, or run the "
            "command from a shell)")


def _result(out: tools.Outcome) -> CallToolResult:
    content: list[ContentBlock] = [TextContent(type="text", text=out.text or "(no output)")]
    return CallToolResult(content=content, structured_content=out.structured, is_error=out.error)


def _error(message: str) -> CallToolResult:
    return _result(tools.Outcome(True, message, {"error": message, "exit_code": None,
                                                 "exit_name": None, "lines": []}))


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
        if key in ("STATE-DIR", "RESULT-FILE", "HANDOFF-FILE", "WORKSPACE"):
            fields[key.lower().replace("-", "_")] = (unquote(value) if value.startswith('"')
                                                     else value)
        elif key == "RECEIPT-CMD":
            fields["receipt_cmd"] = value
    return fields


class _Server(MCPServer[Any]):
    """The SDK's server, with every error as prun's one line (``prun: <tool>: ...``)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            return _error(_one_line(name, e))


def _one_line(tool: str, error: ToolError) -> str:
    """The line a tool error is shown as: what was refused and how to fix it."""
    cause = error.__cause__
    if isinstance(cause, ValidationError):
        return _bad_arguments(tool, cause)
    if isinstance(cause, args.Refused):
        return f"prun: {tool}: {cause}"
    if isinstance(cause, ToolError | ResourceError):
        text = str(cause)
        return text if text.startswith("prun: ") else f"prun: {tool}: {text}"
    if isinstance(cause, OSError):  # a child that could not start, a file not made
        where = f" ({cause.filename})" if cause.filename else ""
        return (f"prun: {tool}: the server could not do it: {cause.strerror or cause}{where} "
                "(check the folder and the arguments, or run the command from a shell)")
    if cause is not None:  # a bug: its traceback goes to the server's log (stderr)
        log.error("tool %s failed", tool, exc_info=cause)
        what = " ".join(f"{type(cause).__name__}: {cause}".split())[:300]
        return (f"prun: {tool}: internal error in the MCP server ({what}) (a bug: please "
                "report it with the server's log)")
    text = " ".join(str(error).split())
    return text if text.startswith("prun: ") else f"prun: {text}"


def _bad_arguments(tool: str, error: ValidationError) -> str:
    parts, schema = [], False
    for err in error.errors(include_url=False):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        where = where.lstrip(".") or "arguments"
        if err["type"] == "value_error" and "error" in err.get("ctx", {}):
            parts.append(f"{where}: {err['ctx']['error']}")
        else:
            parts.append(f"{where}: {err['msg']}")
            schema = True
    return f"prun: {tool}: " + "; ".join(parts) + \
        (" (see the tool's input schema)" if schema else "")


def build(state: Prun | None = None) -> MCPServer[Any]:
    """The server, its tools and its resources."""
    st = state or Prun()

    server: MCPServer[Any] = _Server(name="prun", title="prun (parallel run)",
                                     version=__version__, instructions=INSTRUCTIONS,
                                     log_level="WARNING")

    from .catalog import _control_tools, _results, _watch_tools
    from .panel_tools import _panel_tools
    from .review_tools import _review_tools
    from .units import _unit_tools

    _watch_tools(server, st)
    _control_tools(server, st)
    _unit_tools(server, st)
    _panel_tools(server, st)
    _review_tools(server, st)
    _results(server, st)
    return server


def serve() -> None:
    """Serve on stdio until the client closes the connection."""
    build().run("stdio")
