"""A cross-vendor panel through the MCP tools: ``panel`` starts it in the background, ``wait``
sees the run end, ``panel_result`` gives the cross-check (the fake Claude and Gemini CLIs)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcpkit import call, connect, make_repo  # skips without mcp

from helpers import FAKES, make_fake_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "panel"


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo")
    for cli in ("claude", "gemini"):
        path = make_fake_cli(tmp_path / "bin", cli, FAKES / f"fake_{cli}.py")
        monkeypatch.setenv(f"PRUN_{cli.upper()}_BIN", str(path))
        monkeypatch.setenv(f"FAKE_{cli.upper()}_LOG", str(tmp_path / f"{cli}.jsonl"))
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "claude-home"))
    monkeypatch.setenv("FAKE_GEMINI_HOME", str(tmp_path / "gemini-home"))
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    return root


def _answer(tmp_path: Path, monkeypatch, cli: str, packet: str, doc: dict) -> None:
    path = tmp_path / f"{cli}-answers.json"
    path.write_text(json.dumps({packet: [f"Read the code.\n\n```json\n{json.dumps(doc)}\n```\n"]}))
    monkeypatch.setenv(f"FAKE_{cli.upper()}_ANSWERS", str(path))


def test_a_panel_through_the_tools_names_the_field_it_disagrees_on(repo, tmp_path, monkeypatch):
    base = {"verdict": "safe", "files": ["a.py"], "summary": "fine"}
    _answer(tmp_path, monkeypatch, "claude", "panel-claude-1", {**base, "risk": "low"})
    _answer(tmp_path, monkeypatch, "gemini", "panel-gemini-1", {**base, "risk": "high"})

    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            res, text = await call(s, "panel", {"question_file": str(EXAMPLE / "question.md"),
                                                "schema": str(EXAMPLE / "verdict.schema.json")})
            assert not res.is_error, text
            run_id = res.structured_content["run_id"]
            assert text.startswith(f"RUN {run_id}")
            res, text = await call(s, "wait", {"run": run_id, "timeout": 120})
            assert not res.is_error, text
            res, text = await call(s, "panel_result", {"run": run_id})
            assert not res.is_error, text
            sc = res.structured_content
            assert sc["exit_name"] == "NEEDS_REVIEW", text
            fields = {line.split()[1]: line.split()[2] for line in text.splitlines()
                      if line.startswith("FIELD ")}
            assert fields["risk"] == "disagree" and fields["verdict"] == "agree", text
            assert sc["lines"] == text.splitlines()

    anyio.run(main)
