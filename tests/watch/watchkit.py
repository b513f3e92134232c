"""Helpers for the monitor and gather tests: bounded waits, background prun, dispatcher steps."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from prun._util.fsutil import publish_new
from prun.attempt import result_index as published


def wait_for(condition, timeout: float = 20.0, what: str = "condition"):
    """Poll ``condition`` until it returns something truthy (bounded); return that value."""
    end = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Background:
    """A ``prun`` command running in the background, its stdout read line by line."""

    def __init__(self, *args: str, env: dict | None = None):
        full = dict(os.environ)
        full.update(env or {})
        self.proc = subprocess.Popen([sys.executable, "-m", "prun", *args], env=full,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def readline(self) -> str:
        return self.proc.stdout.readline().rstrip("\n")

    def finish(self, timeout: float = 60) -> tuple[int, list[str], str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out.splitlines(), err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def publish(result: Path, state_dir: Path, text: str = "# Result\n\nAll sections present.\n"):
    """What a dispatcher does at the end: publish atomically, then record it."""
    assert publish_new(result, text)
    assert published.record(str(result), str(state_dir))


def write_outcome(state_dir: Path, outcome: str = "succeeded", exit_code: int = 0,
                  published_how: str = "response", reason: str = "ok") -> None:
    (state_dir / "outcome.json").write_text(json.dumps(
        {"outcome": outcome, "exit_code": exit_code, "reason": reason,
         "published": published_how, "duration_s": 1.5}))


def age(path: Path, seconds: float) -> None:
    """Move a file's modification time into the past."""
    t = time.time() - seconds
    os.utime(path, (t, t))


def end_worker_group(state_dir: Path) -> None:
    """Clean-up for a dispatcher killed in a test: its worker's group is still running."""
    try:
        info = json.loads((state_dir / "unit.json").read_text())["worker"]
        os.killpg(info["pgid"], signal.SIGKILL)
    except (OSError, ValueError, KeyError):
        pass
