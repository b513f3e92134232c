"""The entry that makes a coordinating CLI start ``prun mcp``, merged into its configuration.

| target | project (`--project DIR`, default the repository root) | user (`--user`) |
|---|---|---|
| claude (Claude Code) | `DIR/.mcp.json` | `~/.claude.json` |
| gemini (Gemini CLI) | `DIR/.gemini/settings.json` | `~/.gemini/settings.json` |

Both keep their servers in an ``mcpServers`` object; the server is named ``prun``, so Claude
Code shows its tools as ``mcp__prun__<tool>`` and Gemini CLI as ``mcp_prun_<tool>``. Every
other key and server in the file is kept as it was; a file that is not a JSON object is
refused, never rewritten; an existing ``prun`` entry that differs is replaced only with force.
The file is replaced atomically.

Claude Code starts a project's ``.mcp.json`` servers only once they are approved: an
interactive session asks, a headless ``claude -p`` leaves them ``pending`` and offers none of
their tools. A project install for Claude therefore also approves ``prun`` (and only it) in
the project's local settings, ``DIR/.claude/settings.local.json`` (``enabledMcpjsonServers``);
uninstall withdraws that approval.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._util.fsutil import atomic_write
from ..errors import UsageError

SERVER = "prun"
TARGETS = ("claude", "gemini")
# The longest a wait tool may block (its timeout's upper bound) plus a margin: Gemini CLI's own
# default for a call (10 minutes) would cut a long wait short.
GEMINI_TIMEOUT_MS = 3_700_000


@dataclass(frozen=True)
class ConfigFile:
    target: str
    scope: str  # "project" or "user"
    path: Path


def config_file(target: str, *, user: bool = False,
                project: str | os.PathLike[str] | None = None,
                home: Path | None = None) -> ConfigFile:
    """Which file holds ``target``'s MCP servers, for the user or for a project."""
    if target not in TARGETS:
        raise UsageError(f"unknown target {target!r}", hint=f"choose one of {', '.join(TARGETS)}")
    if user:
        base = home if home is not None else Path.home()
        path = base / (".claude.json" if target == "claude" else ".gemini/settings.json")
        return ConfigFile(target, "user", path)
    if project is None:
        from .._util.gitcmd import toplevel

        top = toplevel()
        if top is None:
            raise UsageError("this folder is not inside a git repository",
                             hint="give --project DIR, or --user for your home folder")
        root = Path(top)
    else:
        root = Path(project).expanduser().resolve()
        if not root.is_dir():
            raise UsageError(f"--project {project}: not a folder", hint="give an existing folder")
    path = root / (".mcp.json" if target == "claude" else ".gemini/settings.json")
    return ConfigFile(target, "project", path)


@dataclass(frozen=True)
class ServerCommand:
    """The command line that starts the server, and why it is not the plain ``prun mcp``
    found on PATH (None when it is, or when the person gave it)."""

    argv: list[str]
    note: str | None = None


def server_command(command: str | None = None) -> ServerCommand:
    """The command line that starts the server: ``command`` (shell words) if given, else
    ``prun mcp`` as PATH finds it (a project commits the file: no path of this machine's in
    it), else, when no ``prun`` is on PATH, this interpreter running ``-m prun mcp``, with a
    note saying why."""
    if command:
        words = shlex.split(command)
        if not words:
            raise UsageError("--command is empty", hint="give the command line that runs prun mcp")
        return ServerCommand(words)
    found = shutil.which("prun")
    if found is None:
        return ServerCommand([sys.executable, "-m", "prun", "mcp"], (
            f"prun is not on PATH here, so the entry names this interpreter by its absolute "
            f"path ({sys.executable}), which only this machine has: put prun on PATH (activate "
            "its environment, or install it with pipx) and install again, or give --command"))
    mine = os.path.join(os.path.dirname(sys.executable), "prun")
    other = None if os.path.realpath(found) == os.path.realpath(mine) else (
        f"the prun on PATH here is {found}, not this one's ({mine}): the CLI starts that one")
    return ServerCommand(["prun", "mcp"], other)


def entry(target: str, argv: list[str]) -> dict[str, Any]:
    """The ``mcpServers.prun`` entry for ``target``."""
    if target == "claude":
        return {"type": "stdio", "command": argv[0], "args": argv[1:]}
    return {"command": argv[0], "args": argv[1:], "timeout": GEMINI_TIMEOUT_MS}


def approval_file(cfg: ConfigFile) -> Path | None:
    """Where Claude Code is told that the project's ``prun`` server is approved (None for
    any other configuration: user servers and Gemini CLI's need no approval)."""
    if cfg.target == "claude" and cfg.scope == "project":
        return cfg.path.parent / ".claude" / "settings.local.json"
    return None


def _read(cfg: ConfigFile) -> dict[str, Any]:
    data = _read_object(cfg.path)
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise UsageError(f"{cfg.path}: mcpServers is not an object",
                         hint="fix it, or add the prun entry by hand (docs/coordinators.md)")
    return data


def _read_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` ({} for a missing or empty file); UsageError otherwise."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {e}", hint="check the file, then run again")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{path} is not plain JSON ({e})",
                         hint="fix it, or add the prun entry by hand (docs/coordinators.md)")
    if not isinstance(data, dict):
        raise UsageError(f"{path} does not hold a JSON object",
                         hint="fix it, or add the prun entry by hand (docs/coordinators.md)")
    return data


def _approved(path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The local settings and their ``enabledMcpjsonServers`` list (UsageError if it is not
    a list)."""
    data = _read_object(path)
    names = data.get("enabledMcpjsonServers", [])
    if not isinstance(names, list):
        raise UsageError(f"{path}: enabledMcpjsonServers is not a list",
                         hint="fix it, or approve the prun server in Claude Code itself")
    return data, names


def _write(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}",
                         hint="check the folder's permissions")


def current(cfg: ConfigFile) -> dict[str, Any] | None:
    """The ``prun`` entry the file holds now, if any."""
    servers = _read(cfg).get("mcpServers") or {}
    found = servers.get(SERVER)
    return found if isinstance(found, dict) else None


def install(cfg: ConfigFile, argv: list[str], *, force: bool = False) -> str:
    """Merge the ``prun`` entry into the file (and approve it, ``approval_file``): ``added``,
    ``unchanged`` or ``replaced``. Both files are read and checked before either is written."""
    data = _read(cfg)
    approval = approval_file(cfg)
    local, names = _approved(approval) if approval is not None else ({}, [])
    servers: dict[str, Any] = data.setdefault("mcpServers", {})
    new = entry(cfg.target, argv)
    old = servers.get(SERVER)
    if old is not None and old != new and not force:
        raise UsageError(f"{cfg.path} already has an MCP server named {SERVER} with another "
                         f"command ({json.dumps(old)})",
                         hint="keep it, or pass --force to replace it")
    if old != new:
        servers[SERVER] = new
        _write(cfg.path, data)
    if approval is not None and SERVER not in names:
        local["enabledMcpjsonServers"] = [*names, SERVER]
        _write(approval, local)
    return "unchanged" if old == new else "added" if old is None else "replaced"


def uninstall(cfg: ConfigFile) -> str:
    """Remove the ``prun`` entry (and its approval): ``removed`` or ``absent``; nothing else
    changes. Both files are read and checked before either is written."""
    data = _read(cfg) if cfg.path.exists() else {}
    approval = approval_file(cfg)
    local, names = _approved(approval) if approval is not None else ({}, [])
    if approval is not None and SERVER in names:
        local["enabledMcpjsonServers"] = [n for n in names if n != SERVER]
        _write(approval, local)
    servers = data.get("mcpServers")
    if not isinstance(servers, dict) or SERVER not in servers:
        return "absent"
    del servers[SERVER]
    _write(cfg.path, data)
    return "removed"
