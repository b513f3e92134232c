"""The MCP server's panel tools (``prun.mcp.server.build`` registers them): start a cross-vendor
panel in the background, then read its cross-check once ``wait`` says the run has ended."""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from .catalog import ACTS, READ_ONLY
from .server import Cwd, Output, Prun, _opt, _run_id


def _panel_tools(server: MCPServer[Any], st: Prun) -> None:
    """panel and panel_result."""
    @server.tool(description="Ask a cross-vendor panel in the background (prun panel QUESTION "
                 "--schema S --detach): the same question and JSON Schema to claude, gemini and "
                 "agy read-only units (default one claude, one gemini). RUN <id>, run_id. "
                 "Follow it with wait, then panel_result.",
                 annotations=ACTS)
    async def panel(question_file: Annotated[str, Field(
                        description="the question (a Markdown file)")],
                    schema: Annotated[str, Field(
                        description="the JSON Schema every answer must pass")],
                    ctx: Context,
                    claude: Annotated[int | None, Field(ge=0, description="Claude units")] = None,
                    gemini: Annotated[int | None, Field(ge=0, description="Gemini units")] = None,
                    agy: Annotated[int | None, Field(ge=0, description="agy units")] = None,
                    timeout: Annotated[str | None, Field(
                        description="each panelist's timeout: seconds or a duration")] = None,
                    deadline: Annotated[str | None, Field(
                        description="the run's deadline: a duration (30m) or ISO time")] = None,
                    cwd: Cwd = None) -> Output:
        argv = ["panel", question_file, "--schema", schema, "--detach"]
        for flag, value in (("--claude", claude), ("--gemini", gemini), ("--agy", agy),
                            ("--timeout", timeout), ("--deadline", deadline)):
            _opt(argv, flag, value)
        return await st.lines_of("panel", argv, cwd, ctx, extra=_run_id)

    @server.tool(description="The cross-check of a panel run (prun panel --run RUN --json): "
                 "PANEL ... verdict=agree|review|none, a PANELIST line each, FIELD <field> "
                 "agree|disagree|split-within|missing, EVIDENCE <folder>. exit_name OK (all "
                 "agree), NEEDS_REVIEW, or FAILED (no valid answer).",
                 annotations=READ_ONLY)
    async def panel_result(run: Annotated[str, Field(description="the panel's run id")],
                           ctx: Context, cwd: Cwd = None) -> Output:
        return await st.both_of("panel", ["panel", "--run", run], cwd, ctx)
