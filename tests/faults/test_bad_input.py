"""Every bad input gets one line: `prun: <what is wrong> (<how to fix>)` on stderr, a documented
exit code (2: refused before anything was made), and nothing made, written or left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLAN = {"packets": [{"id": "a", "executor": "command",
                     "command": [sys.executable, "-c", "print('a result that is long enough')"],
                     "prompt": "x"}]}


def _plan_with(**packet) -> dict:
    return {"packets": [{**PLAN["packets"][0], **packet}]}


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def place(tmp_path, monkeypatch):
    """A repository with a good plan, a prompt, a FIFO, a huge prompt and a plain folder."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    (root / "plan.json").write_text(json.dumps(PLAN))
    (root / "zero-timeout.json").write_text(json.dumps(_plan_with(timeout=0)))
    (root / "bad-id.json").write_text(json.dumps(_plan_with(id="a\nb")))
    (root / "prompt.md").write_text("do it\n")
    (root / "huge.md").write_bytes(b"x" * (11 * 1024 * 1024))
    os.mkfifo(root / "fifo.md")
    (root / "folder").mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    monkeypatch.setenv("PRUN_STATE_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("PRUN_SANDBOX", "off")
    return root


DISPATCH = ["dispatch", "--executor", "command", "--command", "echo hi", "--result-file",
            "result.md", "--unit-id", "u"]

# (arguments, environment, exit code)
CASES = [
    (["run"], {}, 2),
    (["run", "plan.json", "--bogus"], {}, 2),
    (["no-such-command"], {}, 2),
    (["run", "plan.json", "--parallel", "0"], {}, 2),
    (["run", "plan.json", "--parallel", "-3"], {}, 2),
    (["run", "plan.json", "--parallel", "many"], {}, 2),
    (["run", "plan.json", "--deadline", "2020-01-01T00:00:00Z"], {}, 2),
    (["run", "plan.json", "--deadline", "0s"], {}, 2),
    (["run", "plan.json", "--deadline", "soon"], {}, 2),
    (["run", "missing.yaml"], {}, 2),
    (["run", "folder"], {}, 2),
    (["run", "zero-timeout.json"], {}, 2),
    (["run", "bad-id.json"], {}, 2),
    (["check", "missing.yaml"], {}, 2),
    ([*DISPATCH, "--prompt-file", "prompt.md", "--timeout", "0"], {}, 2),
    ([*DISPATCH[:-1], "u\n", "--prompt-file", "prompt.md"], {}, 2),
    ([*DISPATCH[:-1], "", "--prompt-file", "prompt.md"], {}, 2),
    ([*DISPATCH, "--prompt-file", "/dev/zero"], {}, 2),
    ([*DISPATCH, "--prompt-file", "fifo.md"], {}, 2),
    ([*DISPATCH, "--prompt-file", "huge.md"], {}, 2),
    ([*DISPATCH, "--prompt-file", "folder"], {}, 2),
    ([*DISPATCH, "--prompt-file", "missing.md"], {}, 2),
    (["status", ""], {}, 2),
    (["status", "no-such-run"], {}, 2),
    (["wait", ""], {}, 2),
    (["wait", "no-such-run"], {}, 2),
    (["cancel", ""], {}, 2),
    (["clean", ""], {}, 2),
    (["reconcile", ""], {}, 2),
    (["integrate", ""], {}, 2),
    (["monitor", "folder"], {}, 2),
    (["monitor", "missing"], {}, 2),
    (["packet", "new", "bad id"], {}, 2),
    (["status"], {"PRUN_KILL_GRACE_SECONDS": "soon"}, 2),
    (["status"], {"PRUN_STALL_THRESHOLD": "-5"}, 2),
    (["run", "plan.json"], {"PRUN_STALL_THRESHOLD": "10 minutes please"}, 2),
    (["run", "plan.json"], {"PRUN_PORT_START": "99999"}, 2),
    (["run", "plan.json"], {"PRUN_SANDBOX": "maybe"}, 2),
    ([*DISPATCH, "--prompt-file", "prompt.md"], {"PRUN_DISPATCH_TIMEOUT_SECONDS": "0"}, 2),
]


def _id(case) -> str:
    args, env, _ = case
    if args[0] == "dispatch":
        args = ["dispatch", *args[len(DISPATCH) - 2:]]
    return " ".join(a.replace("\n", "\\n") or "''" for a in args) + \
        ("".join(f" {k}={v}" for k, v in env.items()))


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_a_bad_input_gets_one_line_and_leaves_nothing(place, case):
    args, env, code = case
    before = _tree(place.parent)
    p = subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=60, stdin=subprocess.DEVNULL)
    lines = p.stderr.splitlines()
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("prun: "), p.stderr
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert _tree(place.parent) == before, sorted(_tree(place.parent) ^ before)


def test_read_only_commands_create_no_ledger_folders(place, tmp_path):
    far = tmp_path / "nowhere" / "a" / "b"
    for args in (["status"], ["ledger"], ["wait"]):
        for env in ({"PRUN_STATE_ROOT": str(far)}, {"PRUN_LEDGER": str(far / "ledger.sqlite")}):
            p = subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True,
                               text=True, env={**os.environ, **env}, timeout=60)
            assert len(p.stderr.splitlines()) <= 1, p.stderr
            assert not (tmp_path / "nowhere").exists(), (args, env, p.stderr)
