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
import time
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ContentBlock, TextContent
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .. import __version__
from . import child, tools
from . import lines as terse

DEFAULT_WAIT_S = 300
MAX_WAIT_S = 3600
# a child of any other tool is ended after settings.mcp_timeout_s ($PRUN_MCP_TIMEOUT, 10 min)
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
        if bound is None:
            from ..settings import current

            bound = current().mcp_timeout_s
        self.bound = bound
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
