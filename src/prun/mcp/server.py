"""The MCP server: prun's commands as tools, a run's results as resources (stdio).

Tools are named as the commands (Claude Code shows them as ``mcp__prun__<name>``, Gemini CLI
as ``mcp_prun_<name>``): check, run, status, wait, cancel, reassign, followup, reconcile,
integrate, dispatch, receipt, quota, ledger, brief, panel, panel_result, review, decide. Each
does what its command does in ``cwd`` (else the server's working folder): through the library
in this process, or in a child where the call needs one (``prun.mcp.calls`` says which and
why), and returns the command's lines as text and, as structured content, its ``--json``
fields (where it has ``--json``) plus ``lines``, ``exit_code`` and ``exit_name``: complete on
its own, because Claude Code shows the model the structured content rather than the text. An
error is an MCP tool error whose text is one line ``prun: <what> (<how to fix>)``: the
command's, or the server's own for an argument ``args`` refused (nothing ran), a bound passed,
or a child something else ended.

Resources: ``prun://runs/{run}/results`` lists a run's packets and their result URIs;
``prun://runs/{run}/results/{packet}`` is the result file of the packet's latest attempt.
"""

# No ``from __future__ import annotations``: the SDK reads these signatures at run time.

import logging
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import ValidationError

from .. import __version__
from . import args
from .calls import Prun, error
from .catalog import control_tools, result_resources, watch_tools
from .panel_tools import panel_tools
from .review_tools import review_tools
from .units import unit_tools

log = logging.getLogger("prun.mcp")

INSTRUCTIONS = """\
prun runs independent units of a task in parallel as separate agent processes (agy/Gemini,
Claude Sonnet, Gemini CLI, in-session subagents, commands) and gathers, checks and integrates
what they produced. Flow: check a plan, run it (detached, returns the run id), wait on it
(pass the returned cursor back as since) and act on each event, status, reconcile, then
integrate (never commits: ask the person before committing). Each tool returns the command's
terse lines plus its --json fields; exit_name says what a wait, reconcile or integrate found.
Read one unit's result as the resource prun://runs/{run}/results/{packet}."""


class _Server(MCPServer[Any]):
    """The SDK's server, with every error as prun's one line (``prun: <tool>: ...``)."""

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[Any, Any] | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            return error(_one_line(name, e))


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

    watch_tools(server, st)
    control_tools(server, st)
    unit_tools(server, st)
    panel_tools(server, st)
    review_tools(server, st)
    result_resources(server, st)
    return server


def serve() -> None:
    """Serve on stdio until the client closes the connection."""
    build().run("stdio")
