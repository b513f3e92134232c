"""Serve prun over MCP on stdio, or write the entry that makes a coordinating CLI start it.

    prun mcp                                       serve on stdio (needs prun-agents[mcp])
    prun mcp install --for claude|gemini [--user | --project DIR] [--command CMD] [--force]
    prun mcp uninstall --for claude|gemini [--user | --project DIR]

Tools, named as the commands (Claude Code: mcp__prun__<name>; Gemini CLI: mcp_prun_<name>):
check, run, status, wait, cancel, reassign, followup, reconcile, integrate, dispatch, receipt,
quota, ledger, brief, panel, panel_result, review, decide. Each returns its command's lines as
text and its --json fields plus `lines`, `exit_code` and `exit_name` as structured content.
A run's results are resources: prun://runs/{run}/results/{packet}. See docs/coordinators.md.

Where the entry goes (the project defaults to the repository root):

    claude  DIR/.mcp.json                 --user: ~/.claude.json
    gemini  DIR/.gemini/settings.json     --user: ~/.gemini/settings.json

The `prun` entry is merged under `mcpServers`; every other key and server is kept. It runs
`prun mcp` as PATH finds it (a project commits .mcp.json: no path of this machine's goes
in it), unless --command gives another command line; with no `prun` on PATH it runs this
interpreter (`<python> -m prun mcp`) and a note on stderr says why.
Claude Code starts a project's .mcp.json servers only once approved (a headless `claude -p`
leaves them pending), so a project install for claude also approves `prun`, and only it, in
DIR/.claude/settings.local.json (enabledMcpjsonServers; a note on stderr says so);
uninstall withdraws it. A note names each file the install created; where git neither tracks
nor ignores one, it gives the `.gitignore` line that leaves it out (or commit it to share it).

    ADDED|UNCHANGED|REPLACED for=<t> scope=project|user path=<file> command="<argv>"
    REMOVED|ABSENT for=<t> scope=project|user path=<file>

exit codes: 0 done; 2 bad usage, no MCP SDK (`prun mcp` without the extra), a config file that
is not a JSON object, or another `prun` entry without --force (nothing is written).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from importlib.util import find_spec

from .._util.quoting import word
from .._util.untracked import untracked_note
from ..errors import UsageError
from ..mcp import config
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    for name, text in (("install", "write the server's entry into a CLI's MCP configuration"),
                       ("uninstall", "remove the server's entry from a CLI's MCP configuration")):
        a = sub.add_parser(name, help=text, description=text)
        a.add_argument("--for", dest="target", required=True, choices=("claude", "gemini"),
                       help="the CLI: claude (Claude Code) or gemini (Gemini CLI)")
        where = a.add_mutually_exclusive_group()
        where.add_argument("--user", action="store_true", help="the user's configuration")
        where.add_argument("--project", metavar="DIR", type=options.path,
                           help="the project's configuration (default: the repository root)")
        if name == "install":
            a.add_argument("--command", metavar="CMD",
                           help="the command line that starts the server (default: this "
                           "Python running `-m prun mcp`)")
            a.add_argument("--force", action="store_true",
                           help="replace a prun entry that runs another command")


def _word(key: str, value: object) -> str:
    """``key=value``, the value quoted when it is not plain (``prun._util.quoting``)."""
    return word(key, value)


def run(args: argparse.Namespace) -> int:
    if args.action is None:
        return _serve()


    cfg = config.config_file(args.target, user=args.user, project=args.project)
    where = [_word("for", cfg.target), _word("scope", cfg.scope), _word("path", cfg.path)]
    if args.action == "uninstall":
        print(" ".join([config.uninstall(cfg).upper(), *where]))
        return 0
    command = config.server_command(args.command)
    approval = config.approval_file(cfg)
    files = [f for f in (cfg.path, approval) if f is not None and not f.exists()]
    action = config.install(cfg, command.argv, force=args.force)
    print(" ".join([action.upper(), *where, _word("command", shlex.join(command.argv))]))
    if command.note:
        print(f"prun: note: {command.note}", file=sys.stderr)
    if approval is not None:
        print(f"prun: note: the prun server is approved in {approval} (Claude Code starts a "
              "project's .mcp.json servers only once approved)", file=sys.stderr)
    if (note := untracked_note([f for f in files if f.exists()])) is not None:
        print(f"prun: note: {note}", file=sys.stderr)
    if find_spec("mcp") is None:
        print("prun: note: the MCP SDK is not installed here, so the server will not start "
              "(pip install 'prun-agents[mcp]')", file=sys.stderr)
    return 0


def _serve() -> int:
    if find_spec("mcp") is None or find_spec("mcp.server.mcpserver") is None:
        raise UsageError("prun mcp needs the MCP SDK (mcp 2.x), which is not installed",
                         hint="pip install 'prun-agents[mcp]'")
    from ..mcp.server import serve

    serve()
    return 0
