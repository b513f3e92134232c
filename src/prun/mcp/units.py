"""The MCP server's unit tools (``prun.mcp.server.build`` registers them): one unit outside a
plan (dispatch, receipt) and what a coordinator looks up (quota, ledger, brief)."""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import os
import tempfile
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ..settings import current
from . import args, child, tools
from .args import Argv
from .calls import MAX_WAIT_S, START_S, Cwd, Output, Prun, RunOpt, error, result, too_much
from .catalog import ACTS, READ_ONLY
from .lines import dispatch_fields


def unit_tools(server: MCPServer[Any], st: Prun) -> None:
    """dispatch, receipt, quota, ledger and brief."""
    @server.tool(description="Run one unit on one executor outside a plan (prun dispatch): "
                 "STATE-DIR <dir> at once, the result published atomically at result_file "
                 "(FALLBACK if it failed). Waits up to wait seconds (default 0) for the unit to "
                 "end; a unit still running goes on (running: true). A session unit returns its "
                 "HANDOFF lines; attach the subagent's id with receipt.",
                 annotations=ACTS)
    async def dispatch(prompt_file: Annotated[args.PathText, Field(
                           description="the unit's prompt (a regular file)")],
                       result_file: Annotated[args.PathText, Field(
                           description="a fresh path for the unit's result")],
                       unit_id: Annotated[args.PacketId, Field(
                           description="letters, digits, '.', '_', '-'")],
                       ctx: Context,
                       executor: Annotated[args.Name | None, Field(
                           description="agy (default), claude, gemini, session, command")] = None,
                       mode: Annotated[Literal["accept-edits", "plan"] | None, Field(
                           description="accept-edits or plan (required with add_dir)")] = None,
                       add_dir: Annotated[args.Paths, Field(
                           description="extra directories the unit may use")] = None,
                       continue_from: Annotated[args.PathText | None, Field(
                           description="resume the conversation of this state dir")] = None,
                       command: Annotated[args.Command | None, Field(
                           description="the command executor's program, as shell words")] = None,
                       model: Annotated[args.Name | None, Field(description="the model")] = None,
                       effort: Annotated[args.Name | None, Field(
                           description="the effort")] = None,
                       route_reason: Annotated[args.Line | None, Field(
                           description="why this executor was chosen")] = None,
                       sandbox: Annotated[Literal["auto", "on", "off"] | None, Field(
                           description="auto, on or off")] = None,
                       timeout: Annotated[args.Duration | None, Field(
                           description="the unit's timeout: seconds or a duration (45m)")] = None,
                       wait: Annotated[float, Field(
                           ge=0, le=MAX_WAIT_S, allow_inf_nan=False,
                           description="seconds to wait for the unit to end before "
                           "returning")] = 0,
                       cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("dispatch")
        argv.opt("--prompt-file", args.regular_file("prompt_file", prompt_file, at))
        argv.opt("--result-file", result_file).opt("--unit-id", unit_id)
        argv.opt("--executor", executor).opt("--mode", mode)
        argv.opt("--add-dir", [args.folder("add_dir", d, at) for d in add_dir or []])
        if continue_from is not None:
            argv.opt("--continue-from", args.folder("continue_from", continue_from, at))
        for flag, value in (("--command", command), ("--model", model), ("--effort", effort),
                            ("--route-reason", route_reason), ("--sandbox", sandbox),
                            ("--timeout", timeout)):
            argv.opt(flag, value)
        return await _dispatch(st, argv, unit_id, at, ctx, wait,
                               session=executor == "session")

    @server.tool(description="Attach the subagent's identifier to a session unit (prun "
                 "receipt): the dispatch receipt. RECEIPT <state-dir> attempt-id=<id>.",
                 annotations=ACTS)
    async def receipt(state_dir: Annotated[args.PathText, Field(
                          description="the STATE-DIR of a session unit")],
                      attempt_id: Annotated[args.Receipt, Field(
                          description="the identifier the runtime returned for the subagent")],
                      ctx: Context, cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("receipt").arg(args.folder("state_dir", state_dir, at))
        argv.opt("--attempt-id", attempt_id)
        return await st.lines_of("receipt", argv, at, ctx)

    @server.tool(description="What each quota group has left and when it resets (prun quota "
                 "--json): QUOTA group= state=ok|empty|unknown left= resets= age=, SNAPSHOT.",
                 annotations=READ_ONLY)
    async def quota(ctx: Context,
                    refresh: Annotated[bool, Field(
                        description="re-read every probed group now")] = False,
                    group: Annotated[args.Names, Field(description="only these groups")] = None,
                    cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("quota").flag("--refresh", refresh).opt("--group", group)
        return await st.both_of("quota", argv, at, ctx)

    @server.tool(description="The ledger (prun ledger --json): the latest runs; one run's "
                 "attempts; with events, its event log; with dispatches, standalone dispatches.",
                 annotations=READ_ONLY)
    async def ledger(ctx: Context,
                     run: Annotated[args.Id | None, Field(
                         description="a run id or unique prefix")] = None,
                     events: Annotated[bool, Field(description="the run's event log")] = False,
                     dispatches: Annotated[bool, Field(
                         description="standalone dispatch attempts")] = False,
                     limit: Annotated[int | None, Field(
                         ge=1, le=100_000, description="how many runs (default 20)")] = None,
                     cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("ledger").arg(run).flag("--events", events)
        argv.flag("--dispatches", dispatches).opt("--limit", limit)
        return await st.both_of("ledger", argv, at, ctx)

    @server.tool(description="Exactly what a unit is told (prun brief PACKET --json): the brief "
                 "its latest attempt received, or with plan a preview for a plan not yet run.",
                 annotations=READ_ONLY)
    async def brief(packet: Annotated[args.PacketId, Field(description="the packet id")],
                    ctx: Context, run: RunOpt = None,
                    plan: Annotated[args.PathText | None, Field(
                        description="preview the brief from this plan file")] = None,
                    attempt: Annotated[args.Id | None, Field(
                        description="the brief of this attempt")] = None,
                    cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("brief").arg(packet).opt("--run", run)
        if plan is not None:
            argv.opt("--plan", args.regular_file("plan", plan, at))
        argv.opt("--attempt", attempt)
        return await st.both_of("brief", argv, at, ctx)


async def _dispatch(st: Prun, argv: Argv, unit_id: str, folder: str, ctx: Context,
                    wait: float, session: bool) -> CallToolResult:
    """Start the dispatcher through ``prun.mcp.detach`` and wait up to ``wait`` seconds for
    the unit to end (at least until its STATE-DIR line); a unit still running then goes on,
    reported with ``running: true``. Only the relay is ever ended, never the dispatcher."""
    spec = tools.SPECS["dispatch"]
    fd, err_path = tempfile.mkstemp(prefix=f"dispatch-{unit_id}-", suffix=".stderr",
                                    dir=_stderr_folder())
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
        done = await child.run(child.detached_argv(err_path, child.prun_argv(*argv.words())),
                               cwd=folder, bound=wait + START_S, on_line=on_line, stop=stop)
        tg.cancel_scope.cancel()
    with open(err_path, encoding="utf-8", errors="replace") as f:
        stderr = f.read(64 * 1024)
    fields = dispatch_fields(done.lines)
    if done.over_limit:
        os.unlink(err_path)
        return error(too_much("dispatch"))
    if done.exit_code is None and fields.get("state_dir"):
        # still running: its stderr keeps going to the file
        fields.update(running=True, stderr_file=err_path)
        out = tools.outcome(spec, 0, done.lines, "", extra=fields)
        out.structured["exit_code"] = None
        out.structured["exit_name"] = None
        return result(out)
    os.unlink(err_path)
    if done.exit_code is None:
        return error(f"prun: prun dispatch printed no STATE-DIR line within "
                      f"{wait + START_S:.0f}s, the bound of this call (its wait plus "
                      f"{START_S:.0f} s) and was stopped (see prun dispatch --help)")
    fields["running"] = False
    return result(tools.outcome(spec, done.exit_code, done.lines, stderr, extra=fields))


def _stderr_folder() -> str:
    """Where a standalone dispatcher's stderr goes while the MCP server relays it: the user's
    state folder for prun (``$XDG_STATE_HOME/prun/mcp``)."""
    folder = os.path.join(str(current().user_state), "mcp")
    os.makedirs(folder, exist_ok=True)
    return folder
