"""A finished run made for real (a small repository, a plan of command units, `prun run`, then
`prun reconcile`), and `prun review` serving it, shared by the module's tests.

Packets:
    feature   changes its owned files (a modification, an addition, a rename, a binary): ACCEPTED
    leak      also changes README.md, outside what it owns: REJECTED (scope-leak)
    hollow    a code unit that changes nothing: REVIEW (hollow-empty-diff)
    report    changes its owned file, but its result lacks a required section: REJECTED
"""

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

import pytest

from helpers import prun

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


def _unit(pid: str, owns: list[str], job: dict, kind: str = "code", **extra) -> dict:
    return {"id": pid, "kind": kind, "executor": "command", "owns": owns,
            "command": [sys.executable, str(WORKER), json.dumps(job)],
            "prompt": f"unit {pid}", **extra}


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Fixture:
    root = tmp_path_factory.mktemp("review")
    env = {"PRUN_STATE_ROOT": str(root / "state"), "PRUN_LEDGER": str(root / "ledger.sqlite"),
           "PRUN_QUOTA_SNAPSHOT": str(root / "quota.json"),
           "PRUN_CONFIG": str(root / "config.toml"), "PRUN_WORKSPACE_ROOT": str(root / "ws"),
           "XDG_STATE_HOME": str(root / "xdg-state"), "PRUN_KILL_GRACE_SECONDS": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(root / "gitconfig")}
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
    check = (f"{sys.executable} -c \"import pathlib; "
             f"assert pathlib.Path('src/lib/core.py').read_text() == 'CORE = 1\\n'\"")
    plan = {"check": check, "packets": [
        _unit("feature", ["src/app/**"], {
            "write": {"src/app/main.py": MAIN, "src/app/new.py": "NEW = True\n"},
            "binary": {"src/app/data.bin": 4}, "rename": {"src/app/util.py": "src/app/helpers.py"},
            "result": RESULT}, requires=["Summary", "Verification"]),
        _unit("leak", ["src/lib/**"], {
            "write": {"src/lib/core.py": "CORE = 2\n", "README.md": "changed\n"},
            "result": "## Summary\n\nChanged core and the readme.\n"}),
        _unit("hollow", ["tests/**"], {"result": "## Summary\n\nNothing needed changing.\n"}),
        _unit("report", ["docs/**"], {"write": {"docs/guide.md": "# Guide\n\nMore.\n"},
                                      "result": "## Summary\n\nWrote the guide.\n"},
              requires=["Summary", "Risks"]),
    ]}
    (repo / "plan.json").write_text(json.dumps(plan))
    r = prun("run", str(repo / "plan.json"), cwd=repo, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = next(line.split()[1] for line in r.stdout.splitlines() + r.stderr.splitlines()
                  if line.startswith("RUN "))
    r = prun("reconcile", run_id, cwd=repo, env=env)
    assert r.returncode == 1, r.stdout + r.stderr          # something was rejected
    return Fixture(repo, env, run_id)


def read_line(proc: subprocess.Popen, limit: float = 60.0) -> str:
    """The first line ``proc`` prints, waiting at most ``limit`` seconds."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if sel.select(timeout=end - time.monotonic()):
            return proc.stdout.readline()
    raise AssertionError("prun review printed nothing in time")


@pytest.fixture(scope="module")
def server(finished_run) -> Server:
    f = finished_run
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
