"""`prun panel`: the same question under the same schema to Claude, Gemini and agy units (the
fake CLIs), an invalid answer sent back once, and the cross-check, field by field."""

from __future__ import annotations

import json

from conftest import EXAMPLE, fenced

from helpers import prun
from prun.ledger import Ledger

QUESTION = str(EXAMPLE / "question.md")
SCHEMA = str(EXAMPLE / "verdict.schema.json")
SAFE = {"verdict": "safe", "risk": "low", "files": ["src/prun/_util/process.py"],
        "summary": "Every signal goes through the process helper."}


def _run(*args: str):
    return prun("panel", QUESTION, "--schema", SCHEMA, *args, timeout=120)


def _fields(stdout: str) -> dict[str, str]:
    return {line.split()[1]: line for line in stdout.splitlines() if line.startswith("FIELD ")}


def test_a_panel_that_agrees_exits_0(panelists):
    panelists.answer("panel-claude-1", fenced(SAFE))
    panelists.answer("panel-gemini-1", fenced({**SAFE, "summary": "Said otherwise."}))
    r = _run()
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)
    fields = _fields(r.stdout)
    assert fields["verdict"] == 'FIELD verdict agree value="safe" claude=1/1 gemini=1/1'
