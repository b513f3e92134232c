"""Fixtures for monitor and gather: live stand-in dispatchers, state dirs, background prun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from watchkit import Background

from prun._util.process import create_time


@pytest.fixture
def background():
    started: list[Background] = []

    def start(*args: str, env: dict | None = None) -> Background:
        b = Background(*args, env=env)
        started.append(b)
        return b

    yield start
    for b in started:
        b.kill()


@pytest.fixture
def live_dispatcher():
    """A sleeping process that stands in for a running dispatcher (killed at the end)."""
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


@pytest.fixture
def make_unit(tmp_path):
    """Write a state dir the way a dispatcher does (or a session unit's record)."""
    counter = iter(range(100000))

    def make(dispatcher: subprocess.Popen | None = None, *, executor: str = "agy",
             tail: bytes = b'{"event":"init"}\n', result: Path | None = None,
             unit_id: str | None = None) -> tuple[Path, Path]:
        n = next(counter)
        unit_id = unit_id or f"u{n}"
        root = Path(os.environ["PRUN_STATE_ROOT"])
        sd = root / f"{unit_id}-20260101T000000-{n:06x}"
        sd.mkdir(parents=True)
        results = tmp_path / "results"
        results.mkdir(exist_ok=True)
        result = result or results / f"{unit_id}.md"
        (sd / "result-file").write_text(f"{result}\n")
        record = {"unit_id": unit_id, "executor": executor, "result_file": str(result),
                  "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if executor != "session":
            if dispatcher is None:  # a dispatcher that has already gone
                dispatcher = subprocess.Popen([sys.executable, "-c", "pass"])
                dispatcher.wait()
            pid = dispatcher.pid
            (sd / "dispatch-pid").write_text(f"{pid}\n")
            (sd / "tail").write_bytes(tail)
            (sd / "stderr").write_bytes(b"")
            (sd / "model").write_text("gemini-test\n")
            record["dispatcher"] = {"pid": pid, "create_time": create_time(pid)}
        (sd / "unit.json").write_text(json.dumps(record))
        return sd, result

    return make
