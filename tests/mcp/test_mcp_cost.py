"""What each unit cost, through the MCP server's status tool: the per-unit tokens and cost and
the per-executor totals of `prun status --json`, and its COST lines."""

from __future__ import annotations

import anyio
import pytest
from mcpkit import call, cli, connect, make_repo, write_plan

from helpers import FAKES, make_fake_cli


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.setenv("PRUN_CLAUDE_BIN", str(make_fake_cli(tmp_path / "bin", "claude",
                                                            FAKES / "fake_claude.py")))
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "claude-home"))
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    return make_repo(tmp_path / "repo")


def test_status_carries_tokens_and_cost(repo, tmp_path):
    write_plan(repo / "plan.json", [{"id": "ask", "executor": "claude", "prompt": "Answer."}])
    ran = cli("run", "plan.json", cwd=repo)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = ran.stdout.split()[1]

    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            return await call(s, "status", {"run": run_id})

    res, text = anyio.run(main)
    assert not res.is_error, text
    sc = res.structured_content
    (unit,) = sc["units"]
    assert unit["tokens"] == {"in": 12200, "out": 12, "cached": 0}
    assert unit["cost_usd"] == 0.02452
    assert sc["cost"]["claude"]["cost_usd"] == 0.02452 and sc["cost"]["claude"]["attempts"] == 1
    assert "COST claude attempts=1 tokens_in=12200 tokens_out=12 cached=0 usd=0.0245" in \
        text.splitlines()
