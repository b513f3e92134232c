"""Where a run keeps its files: the run dir ``.prun/runs/<run-id>/`` and what is in it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def prompts(self) -> Path:
        return self.root / "prompts"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def log(self) -> Path:
        return self.root / "supervisor.log"

    @property
    def hooks_log(self) -> Path:
        return self.root / "hooks.log"

    def make(self) -> None:
        for d in (self.prompts, self.state, self.results, self.quarantine):
            d.mkdir(parents=True, exist_ok=True)
