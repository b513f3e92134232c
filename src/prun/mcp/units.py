"""The MCP server's unit tools (``prun.mcp.server.build`` registers them): one unit outside a
plan (dispatch, receipt) and what a coordinator looks up (quota, ledger, brief)."""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import os
import tempfile
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from . import child, tools
from .catalog import ACTS, READ_ONLY
from .server import (
    MAX_WAIT_S,
    START_S,
    Cwd,
    Output,
    Prun,
    RunOpt,
    _dispatch_fields,
    _error,
    _opt,
    _Refused,
    _result,
)


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
