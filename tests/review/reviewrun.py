"""Helpers for the review page's tests: a small repository, command units, `prun review` as
a child and its REVIEW line, and where the distribution's Chromium is."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from helpers import FAKES, make_fake_cli

WORKER = Path(__file__).with_name("worker.py")
RESULT = """## Summary

Rewrote `main` to return **2**, added `new.py`, renamed the helpers.

## Verification

Ran it:

```python
assert main() == 2
```

<script>document.title = "owned"</script>
<img src=x onerror="document.title='owned'">
"""
MAIN = "def main():\n    value = 2\n    return value\n"


@dataclass
class Fixture:
    repo: Path
    env: dict[str, str]
    run_id: str


@dataclass
class Server:
    url: str           # the REVIEW line's address, token included
    base: str          # http://127.0.0.1:PORT
    token: str
    proc: subprocess.Popen


def unit(pid: str, owns: list[str], job: dict, kind: str = "code", **extra) -> dict:
    return {"id": pid, "kind": kind, "executor": "command", "owns": owns,
            "command": [sys.executable, str(WORKER), json.dumps(job)],
            "prompt": f"unit {pid}", **extra}


def make_repo(root: Path) -> tuple[Path, dict[str, str]]:
    """A small repository in ``root``, and the environment its runs use."""
    env = {"PRUN_STATE_ROOT": str(root / "state"), "PRUN_LEDGER": str(root / "ledger.sqlite"),
           "PRUN_QUOTA_SNAPSHOT": str(root / "quota.json"),
           "PRUN_CONFIG": str(root / "config.toml"), "PRUN_WORKSPACE_ROOT": str(root / "ws"),
           "XDG_STATE_HOME": str(root / "xdg-state"), "PRUN_KILL_GRACE_SECONDS": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(root / "gitconfig"),
           # the fake Claude Code: what a claude unit used is reported as the real one does
           "PRUN_CLAUDE_BIN": str(make_fake_cli(root / "bin", "claude",
                                                FAKES / "fake_claude.py")),
           "FAKE_CLAUDE_HOME": str(root / "claude-home"), "IS_SANDBOX": "1",
           "FAKE_CLAUDE_USAGE": json.dumps({"input_tokens": 200, "cache_read_input_tokens": 1000,
                                            "cache_creation_input_tokens": 0,
                                            "output_tokens": 30}),
           "FAKE_CLAUDE_COST": "0.0125",
           "FAKE_CLAUDE_RESPONSE": "## Summary\n\nNothing needed changing.\n"}
    repo = root / "repo"
    (repo / "src/app").mkdir(parents=True)
    (repo / "src/lib").mkdir(parents=True)
    (repo / "docs").mkdir()
    (repo / "src/app/main.py").write_text("def main():\n    return 1\n")
    (repo / "src/app/util.py").write_text("".join(f"HELPER_{i} = {i}\n" for i in range(12)))
    (repo / "src/lib/core.py").write_text("CORE = 1\n")
    (repo / "docs/guide.md").write_text("# Guide\n")
    (repo / "README.md").write_text("readme\n")
    full = {**os.environ, **env}
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=full)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=full)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "base"], check=True, env=full)
    return repo, env


def read_line(proc: subprocess.Popen, limit: float = 60.0) -> str:
    """The first line ``proc`` prints, waiting at most ``limit`` seconds."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if sel.select(timeout=end - time.monotonic()):
            return proc.stdout.readline()
    raise AssertionError("prun review printed nothing in time")


def serve(f: Fixture):
    """`prun review` of ``f``'s run, as a child; SIGTERM ends it (exit 0) when done."""
    proc = subprocess.Popen([sys.executable, "-m", "prun", "review", f.run_id, "--as", "tester"],
                            cwd=f.repo, env={**os.environ, **f.env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = read_line(proc)
        assert line.startswith("REVIEW http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[1]
        base, _, token = url.partition("/?token=")
        yield Server(url, base, token, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            raise
    assert code == 0, proc.stderr.read()


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def chromium() -> str | None:
    import shutil

    for path in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if path and os.access(path, os.X_OK):
            return path
    return None


