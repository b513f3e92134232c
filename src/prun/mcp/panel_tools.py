"""The MCP server's panel tools (``prun.mcp.server.build`` registers them): start a cross-vendor
panel in the background, then read its cross-check once ``wait`` says the run has ended."""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from . import args
from .args import Argv
from .calls import Cwd, Output, Prun
from .catalog import ACTS, READ_ONLY
from .lines import run_id_fields

Count = Annotated[int | None, Field(ge=0, le=100)]


def panel_tools(server: MCPServer[Any], st: Prun) -> None:
    """panel and panel_result."""
    @server.tool(description="Ask a cross-vendor panel in the background (prun panel QUESTION "
                 "--schema S --detach): the same question and JSON Schema to claude, gemini and "
                 "agy read-only units (default one claude, one gemini). RUN <id>, run_id. "
                 "Follow it with wait, then panel_result.",
                 annotations=ACTS)
    async def panel(question_file: Annotated[args.PathText, Field(
                        description="the question (a Markdown file)")],
                    schema: Annotated[args.PathText, Field(
                        description="the JSON Schema every answer must pass (a file)")],
                    ctx: Context,
                    claude: Annotated[Count, Field(description="Claude units")] = None,
                    gemini: Annotated[Count, Field(description="Gemini units")] = None,
                    agy: Annotated[Count, Field(description="agy units")] = None,
                    timeout: Annotated[args.Duration | None, Field(
                        description="each panelist's timeout: seconds or a duration")] = None,
                    deadline: Annotated[args.Duration | None, Field(
                        description="the run's deadline: a duration (30m) or ISO time")] = None,
                    cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("panel").arg(args.regular_file("question_file", question_file, at))
        argv.opt("--schema", args.regular_file("schema", schema, at)).flag("--detach", True)
        for flag, value in (("--claude", claude), ("--gemini", gemini), ("--agy", agy),
                            ("--timeout", timeout), ("--deadline", deadline)):
            argv.opt(flag, value)
        return await st.lines_of("panel", argv, at, ctx, extra=run_id_fields)

    @server.tool(description="The cross-check of a panel run (prun panel --run RUN --json): "
                 "PANEL ... verdict=agree|review|none, a PANELIST line each, FIELD <field> "
                 "agree|disagree|split-within|missing, EVIDENCE <folder>. exit_name OK (all "
                 "agree), NEEDS_REVIEW, or FAILED (no valid answer).",
                 annotations=READ_ONLY)
    async def panel_result(run: Annotated[args.Id, Field(description="the panel's run id")],
                           ctx: Context, cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        return await st.both_of("panel", Argv("panel").opt("--run", run), at, ctx)
