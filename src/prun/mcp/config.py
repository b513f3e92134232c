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
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def server_command(command: str | None = None) -> list[str]:
    """The command line that starts the server: ``command`` (shell words) if given, else this
    interpreter running ``prun mcp``, which works whatever PATH the CLI starts it with."""
    if command:
        words = shlex.split(command)
        if not words:
            raise UsageError("--command is empty", hint="give the command line that runs prun mcp")
        return words
    return [sys.executable, "-m", "prun", "mcp"]


def entry(target: str, argv: list[str]) -> dict[str, Any]:
    """The ``mcpServers.prun`` entry for ``target``."""
    if target == "claude":
        return {"type": "stdio", "command": argv[0], "args": argv[1:]}
    return {"command": argv[0], "args": argv[1:], "timeout": GEMINI_TIMEOUT_MS}


def _read(cfg: ConfigFile) -> dict[str, Any]:
    try:
        text = cfg.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {cfg.path}: {e}", hint="check the file, then run again")
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{cfg.path} is not plain JSON ({e})",
                         hint="fix it, or add the prun entry by hand (docs/coordinators.md)")
    if not isinstance(data, dict):
        raise UsageError(f"{cfg.path} does not hold a JSON object",
                         hint="fix it, or add the prun entry by hand (docs/coordinators.md)")
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise UsageError(f"{cfg.path}: mcpServers is not an object",
                         hint="fix it, or add the prun entry by hand (docs/coordinators.md)")
    return data


def _write(cfg: ConfigFile, data: dict[str, Any]) -> None:
    from .._util.fsutil import atomic_write

    try:
        cfg.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(cfg.path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError as e:
        raise UsageError(f"cannot write {cfg.path}: {e.strerror or e}",
                         hint="check the folder's permissions")


def current(cfg: ConfigFile) -> dict[str, Any] | None:
    """The ``prun`` entry the file holds now, if any."""
    servers = _read(cfg).get("mcpServers") or {}
    found = servers.get(SERVER)
    return found if isinstance(found, dict) else None


def install(cfg: ConfigFile, argv: list[str], *, force: bool = False) -> str:
    """Merge the ``prun`` entry into the file: ``added``, ``unchanged`` or ``replaced``."""
    data = _read(cfg)
    servers: dict[str, Any] = data.setdefault("mcpServers", {})
    new = entry(cfg.target, argv)
    old = servers.get(SERVER)
    if old == new:
        return "unchanged"
    if old is not None and not force:
        raise UsageError(f"{cfg.path} already has an MCP server named {SERVER} with another "
                         f"command ({json.dumps(old)})",
                         hint="keep it, or pass --force to replace it")
    servers[SERVER] = new
    _write(cfg, data)
    return "added" if old is None else "replaced"


def uninstall(cfg: ConfigFile) -> str:
    """Remove the ``prun`` entry: ``removed`` or ``absent``; nothing else changes."""
    if not cfg.path.exists():
        return "absent"
    data = _read(cfg)
    servers = data.get("mcpServers")
    if not isinstance(servers, dict) or SERVER not in servers:
        return "absent"
    del servers[SERVER]
    _write(cfg, data)
    return "removed"
