"""Fixtures for executor tests: the fake Claude Code and Gemini CLIs, a unit to dispatch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FAKES, make_fake_cli, prun


@pytest.fixture
def fake_claude(tmp_path, monkeypatch):
    """The fake claude at PRUN_CLAUDE_BIN, IS_SANDBOX=1 (tests run as root in CI); its log."""
    monkeypatch.setenv("PRUN_CLAUDE_BIN", str(make_fake_cli(tmp_path / "bin", "claude",
                                                            FAKES / "fake_claude.py")))
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "claude-home"))
    monkeypatch.setenv("IS_SANDBOX", "1")
    for var in ("PRUN_CLAUDE_MODEL", "PRUN_CLAUDE_EFFORT", "PRUN_CLAUDE_PERMISSION_MODE"):
        monkeypatch.delenv(var, raising=False)
    log = tmp_path / "claude-calls.jsonl"
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(log))
    return log


@pytest.fixture
def fake_gemini(tmp_path, monkeypatch):
    """The fake gemini at PRUN_GEMINI_BIN; returns its call log."""
    monkeypatch.setenv("PRUN_GEMINI_BIN", str(make_fake_cli(tmp_path / "bin", "gemini",
                                                            FAKES / "fake_gemini.py")))
    monkeypatch.setenv("FAKE_GEMINI_HOME", str(tmp_path / "gemini-home"))
    for var in ("PRUN_GEMINI_MODEL", "GEMINI_CLI_TRUST_WORKSPACE", "GEMINI_CLI_NO_RELAUNCH"):
        monkeypatch.delenv(var, raising=False)
    log = tmp_path / "gemini-calls.jsonl"
    monkeypatch.setenv("FAKE_GEMINI_LOG", str(log))
    return log


class Unit:
    """One unit's files, dispatched through the real `prun dispatch` command."""

    def __init__(self, root: Path, executor: str):
        self.root = root
        self.executor = executor
        self.prompt = root / "prompt.md"
        self.prompt.write_text("Say hello and give the answer.\n")
        self.n = 0
        self.result = root / "out" / "result.md"

    def fresh(self) -> Path:
        self.n += 1
        self.result = self.root / "out" / f"result-{self.n}.md"
        return self.result

    def dispatch(self, *extra, env=None, unset=(), timeout=60, fresh=True):
        """Run `prun dispatch`; ``env`` adds variables, ``unset`` removes some."""
        if fresh:
            self.fresh()
        self.result.parent.mkdir(exist_ok=True)
        args = ["dispatch", "--executor", self.executor, "--prompt-file", str(self.prompt),
                "--result-file", str(self.result), "--unit-id", f"u{self.n}", *extra]
        if unset:
            full = {k: v for k, v in os.environ.items() if k not in unset}
            full.update(env or {})
            self.proc = subprocess.run([sys.executable, "-m", "prun", *args], env=full,
                                       capture_output=True, text=True, timeout=timeout)
        else:
            self.proc = prun(*args, env=env, timeout=timeout)
        return self.proc

    @property
    def state(self) -> Path:
        first = self.proc.stdout.splitlines()[0]
        assert first.startswith("STATE-DIR /"), self.proc.stdout + self.proc.stderr
        return Path(first.split(" ", 1)[1])

    @property
    def outcome(self) -> dict:
        return json.loads((self.state / "outcome.json").read_text())

    @property
    def tail(self) -> str:
        return (self.state / "tail").read_text()


@pytest.fixture
def claude_unit(tmp_path, fake_claude):
    return Unit(tmp_path, "claude")


@pytest.fixture
def gemini_unit(tmp_path, fake_gemini):
    return Unit(tmp_path, "gemini")
