"""The MCP server's review tools (``prun.mcp.server.build`` registers them): what the review
page shows, as data, and a decision recorded for ``prun integrate`` when the person asks."""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from . import args
from .args import Argv
from .calls import Cwd, Output, Prun, RunOpt
from .catalog import ACTS, READ_ONLY


def review_tools(server: MCPServer[Any], st: Prun) -> None:
    """review and decide."""
    @server.tool(description="What the person's review page shows, as data (prun review "
                 "[RUN] --json): each packet's verdict and reasons, result, change per file, "
                 "required sections, cost and decision, and the combined check's log. For "
                 "the page itself, ask the person to run prun review.",
                 annotations=READ_ONLY)
    async def review(ctx: Context, run: RunOpt = None, cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        return await st.both_of("review", Argv("review").arg(run), at, ctx)

    @server.tool(description="Record the person's decision on a packet (prun review RUN "
                 "--decide PACKET accept|reject|include): prun integrate honours it as it does "
                 "--include and a rejection. Only when the person said so. DECIDED <packet> "
                 "decision= attempt= who= at=.",
                 annotations=ACTS)
    async def decide(packet: Annotated[args.PacketId, Field(description="the packet id")],
                     decision: Annotated[Literal["accept", "reject", "include"], Field(
                         description="accept or include: apply its change; reject: leave it "
                         "out")],
                     ctx: Context, run: RunOpt = None,
                     note: Annotated[args.Note | None, Field(
                         description="why (recorded in the ledger)")] = None,
                     who: Annotated[args.Line | None, Field(
                         description="whose decision it is (default: the user's name)")] = None,
                     cwd: Cwd = None) -> Output:
        at = st.folder(cwd)
        argv = Argv("review").arg(run).pair("--decide", packet, decision)
        argv.opt("--note", note).opt("--as", who)
        return await st.lines_of("decide", argv, at, ctx)
