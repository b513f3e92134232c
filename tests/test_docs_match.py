"""The docs, the skill and the help say what the program does: the MCP tools `prun mcp --help`
and docs/coordinators.md list are the server's; every `prun.x.y` a page names imports; the
packet template's schema path exists."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from helpers import prun
from prun.cli.packet import template
from prun.mcp.tools import SPECS

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                *(ROOT / "skills" / "prun").rglob("*.md")])
DOTTED = re.compile(r"(?<![\w./-])prun(?:\.[A-Za-z_]\w*)+")
FROM = re.compile(r"^\s*from (prun(?:\.\w+)*) import ([\w, ]+)$", re.M)
FILES = {"md", "json", "yaml", "yml", "toml", "sqlite", "py", "sh", "ps1", "log", "txt"}


def server_tools() -> list[str]:
    """The tools the MCP server registers (its own list, through the SDK)."""
    pytest.importorskip("mcp.server.mcpserver", reason="the mcp extra is not installed")
    import anyio

    from prun.mcp.server import build

    async def names() -> list[str]:
        return [t.name for t in await build().list_tools()]

    return anyio.run(names)


def test_the_mcp_tools_in_help_and_docs_are_the_servers():
    tools = server_tools()
    assert set(SPECS) <= set(tools)
    helped = prun("mcp", "--help").stdout
    listed = re.search(r"Gemini CLI: mcp_prun_<name>\):\s*(.*?)\. Each", helped, re.S)
    assert listed, helped
    assert re.split(r",\s*", " ".join(listed.group(1).split())) == tools
    page = (ROOT / "docs" / "coordinators.md").read_text()
    table = page.split("### Tools", 1)[1].split("\n\n", 2)[1]
    assert re.findall(r"^\| `(\w+)` \|", table, re.M) == tools


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_module_path_a_page_names_imports():
    wrong = []
    for page in PAGES:
        text = page.read_text()
        for dotted in sorted(set(DOTTED.findall(text))):
            if dotted.rsplit(".", 1)[-1] in FILES:
                continue        # a file name (prun.toml), not a module
            if not _resolves(dotted):
                wrong.append(f"{page.relative_to(ROOT)}: {dotted}")
        for module, names in FROM.findall(text):
            for name in (n.strip() for n in names.split(",")):
                if name and not _resolves(f"{module}.{name}"):
                    wrong.append(f"{page.relative_to(ROOT)}: from {module} import {name}")
    assert wrong == []


def test_the_template_names_a_schema_that_exists():
    text = template("x")
    paths = re.findall(r"schema: (prun/[\w/.]+\.json)", text)
    assert paths, "the template names its schema"
    for path in paths:
        assert (ROOT / "src" / path).is_file(), path
