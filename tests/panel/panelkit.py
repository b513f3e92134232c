"""Helpers for panel tests: the example's files, scripting what each fake panelist answers,
a panelist's result with its answer in a fenced json block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import FAKES, make_fake_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "panel"


class Panelists:
    """Scripts the fakes: ``answer(cli, packet_id, *texts)`` makes that unit's n-th call
    answer the n-th text (``FAKE_<CLI>_ANSWERS``)."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch):
        self.folder = folder
        self.files: dict[str, Path] = {}
        self.monkeypatch = monkeypatch
        for cli in ("claude", "gemini", "agy"):
            path = make_fake_cli(folder / "bin", cli, FAKES / f"fake_{cli}.py")
            monkeypatch.setenv(f"PRUN_{cli.upper()}_BIN", str(path))
            monkeypatch.setenv(f"FAKE_{cli.upper()}_LOG", str(folder / f"{cli}.jsonl"))
            self.files[cli] = folder / f"{cli}-answers.json"
            self.files[cli].write_text("{}")
            monkeypatch.setenv(f"FAKE_{cli.upper()}_ANSWERS", str(self.files[cli]))
        monkeypatch.setenv("FAKE_CLAUDE_HOME", str(folder / "claude-home"))
        monkeypatch.setenv("FAKE_GEMINI_HOME", str(folder / "gemini-home"))
        monkeypatch.setenv("IS_SANDBOX", "1")   # the fake refuses bypass as root without it

    def answer(self, packet_id: str, *texts: str) -> None:
        cli = packet_id.split("-")[1]
        scripted = json.loads(self.files[cli].read_text())
        scripted[packet_id] = list(texts)
        self.files[cli].write_text(json.dumps(scripted))


def fenced(doc: object, before: str = "I read the code in the snapshot.") -> str:
    """A panelist's result: prose, then its answer as a fenced json block."""
    return f"{before}\n\n```json\n{json.dumps(doc, indent=2)}\n```\n"

