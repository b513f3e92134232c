"""One tool call of the MCP server: its folder, its bound, its command run (in a child, or
in this process through the library, ``prun.api``) and its result. Every tool module builds on
this; the server (``prun.mcp.server``) registers them.

A tool runs in this process when the library does what its command does and nothing about it
needs a process of its own: ``status``, ``reconcile`` and the result resources. The
others keep a child (docs/mcp.md, "In the server or in a child"): a call with a bound that must
be able to end whatever it started (``wait``, ``cancel``, ``reassign``, ``followup``, ``quota``,
``integrate`` with its check command, ``brief``, ``ledger``, ``review``, ``decide``,
``receipt``), a supervisor or unit that must outlive the call and never share the server's
signals, subreaper or working folder (``run``, ``panel``, ``dispatch``), a call whose files
are named relative to its own ``cwd`` in what it prints (``check``: its messages name the plan's
files as given, which one process cannot do for calls in several folders), and code whose crash
or stray output on stdout must not take the server and its stdio stream down.
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ContentBlock, TextContent
from pydantic import BaseModel, ConfigDict, Field

from .._util.quoting import printable
from ..errors import PrunError
from . import args, child, tools

DEFAULT_WAIT_S = 300
MAX_WAIT_S = 3600
# a child of any other tool is ended after settings.mcp_timeout_s ($PRUN_MCP_TIMEOUT, 10 min);
# seconds past a command's own --wait or --timeout before its child is ended
MARGIN_S = 30.0
BEAT_S = 10.0
# how long a dispatcher may take to print its STATE-DIR line
START_S = 60.0


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
            return error(_stopped(argv.command, bound) if done.timed_out
                          else too_much(argv.command))
        fields = extra(done.lines) if extra is not None else {}
        out = tools.outcome(spec, done.exit_code, done.lines, done.stderr, extra=fields)
        self.remember(out.structured, folder)
        return result(out)

    async def both_of(self, name: str, argv: args.Argv, folder: str, ctx: Context, *,
                      limit: Limit | None = None) -> CallToolResult:
        """Run ``prun <argv> --json`` in ``folder`` and get its lines too
        (``prun.cli.capture``)."""
        spec = tools.SPECS[name]
        envelope, failure = await self.capture(argv, folder, ctx, limit=limit)
        if envelope is None:
            return error(failure)
        data = tools.loads(envelope.get("json"))
        got = envelope.get("lines")
        if not isinstance(got, list):
            got = str(envelope.get("json") or "").splitlines()
        out = tools.outcome(spec, envelope.get("exit_code"), [str(x) for x in got],
                            str(envelope.get("stderr") or ""), data=data)
        self.remember(out.structured, folder)
        return result(out)

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
            return None, too_much(argv.command)
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


def too_much(command: str) -> str:
    return (f"prun: prun {command} printed more than {child.OUTPUT_MAX // (1024 * 1024)} MiB "
            "and was stopped (ask for less: name a run, leave out all or events, or run the "
            "command from a shell)")


def result(out: tools.Outcome) -> CallToolResult:
    content: list[ContentBlock] = [TextContent(type="text", text=out.text or "(no output)")]
    return CallToolResult(content=content, structured_content=out.structured, is_error=out.error)


def error(message: str) -> CallToolResult:
    return result(tools.Outcome(True, message, {"error": message, "exit_code": None,
                                                 "exit_name": None, "lines": []}))


async def in_process(name: str, work: Callable[[], tuple[int, list[str], Any]],
                     st: "Prun", folder: str) -> CallToolResult:
    """Run ``work`` (a library call: exit code, lines, ``--json`` data) on a worker thread and
    make its result as the command's would be; a ``PrunError`` is the command's one line."""
    spec = tools.SPECS[name]
    stderr = ""
    try:
        code, lines, data = await anyio.to_thread.run_sync(work)
    except PrunError as e:   # what the command's error boundary prints, and its exit code
        code, lines, data = e.exit_code, [], None
        stderr = f"prun: {printable(e.line())}\n"
    if data is not None:     # as the command prints it: ``json.dump(..., default=str)``
        data = tools.loads(json.dumps(data, default=str))
    out = tools.outcome(spec, code, lines, stderr, data=data)
    st.remember(out.structured, folder)
    return result(out)

