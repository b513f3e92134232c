"""Helpers for the MCP tests: a real MCP session with ``prun mcp`` over stdio, through the
SDK's own client, and a small repository with a plan of command units."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers import write_plan as write_plan  # re-exported for MCP tests

pytest.importorskip("mcp.client.stdio", reason="the mcp extra is not installed")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("a repository for MCP tests\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def unit(pid: str, code: str, **fields: Any) -> dict[str, Any]:
    """An inline command packet running ``code`` with this interpreter."""
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", code],
            "prompt": f"unit {pid}", "timeout": "2m", **fields}


@asynccontextmanager
async def connect(cwd: Path, log: Path) -> AsyncIterator[ClientSession]:
    """A session with a fresh ``prun mcp`` started in ``cwd`` (its stderr in ``log``)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "prun", "mcp"],
                                   cwd=str(cwd), env=dict(os.environ))
    with open(log, "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, args: dict[str, Any] | None = None,
               progress: Any = None) -> tuple[Any, str]:
    """Call ``tool``; the result and its text."""
    result = await session.call_tool(tool, args or {}, progress_callback=progress)
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return result, text


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The same command on the command line."""
    return subprocess.run([sys.executable, "-m", "prun", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
