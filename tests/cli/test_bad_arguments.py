"""Bad arguments and settings, one rule per class (prun.cli.options, prun.settings): each is
refused with one stderr line `prun: <what is wrong> (<how to fix>)`, exit 2, and nothing made:
no run, no ledger row (no cancel request, no decision, no event), no state dir, no file.

The ledger holds one finished run of the repository, so an argument that fell back to "the
latest run" would find one to act on.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

HUGE = "9" * 20
LONG = "x" * 5000
TABLES = ("runs", "packets", "attempts", "events", "requests", "decisions")


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A repository with one finished run in its ledger; the environment its commands use."""
    root = tmp_path_factory.mktemp("bad-input")
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "plan.json").write_text(
        '{"packets": [{"id": "a", "executor": "command", "prompt": "x", "command": ["'
        + sys.executable + '", "-c", "print(\'a result that is long enough\')"]}]}')
    (repo / "p.md").write_text("a follow-up\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-q", "-m", "init"], check=True)
    os.mkfifo(root / "fifo")
    (root / "afile").write_text("x")
    env = {**os.environ, "PRUN_STATE_ROOT": str(root / "state"),
           "PRUN_LEDGER": str(root / "ledger.sqlite"), "PRUN_CONFIG": str(root / "config.toml"),
           "PRUN_WORKSPACE_ROOT": str(root / "ws"), "PRUN_QUOTA_SNAPSHOT": str(root / "q.json"),
           "XDG_STATE_HOME": str(root / "xdg"), "XDG_CACHE_HOME": str(root / "cache"),
           "PRUN_SANDBOX": "off", "PRUN_KILL_GRACE_SECONDS": "1"}
    done = subprocess.run([sys.executable, "-m", "prun", "run", "plan.json"], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.split()[1]
    return root, repo, env, run_id


def _made(root: Path) -> tuple[set[str], dict[str, int]]:
    files = {str(p.relative_to(root)) for p in root.rglob("*")
             if not p.name.startswith("ledger.sqlite-")}
    with sqlite3.connect(root / "ledger.sqlite") as c:
        rows = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
    return files, rows


def refused(place, args: list[str], env: dict[str, str] | None = None) -> str:
    """Run ``prun args``: exit 2, one stderr line, nothing on stdout, nothing made."""
    root, repo, base_env, run_id = place
    args = [a.replace("{RUN}", run_id).replace("{ROOT}", str(root)) for a in args]
    env = {k: v.replace("{ROOT}", str(root)) for k, v in (env or {}).items()}
    before = _made(root)
    p = subprocess.run([sys.executable, "-m", "prun", *args], cwd=repo, capture_output=True,
                       text=True, env={**base_env, **env}, timeout=60, stdin=subprocess.DEVNULL)
    lines = p.stderr.splitlines()
    assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("prun: ") and lines[0].endswith(")"), lines
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert _made(root) == before
    return lines[0]


def _id(args) -> str:
    return " ".join(a.replace("\n", "\\n").replace("\x1b", "\\e")[:24] or "''" for a in args)


# An id or a name (RUN, PACKET, ATTEMPT, an executor, a model, a group, a host, ...): not
# empty, not blank, no control character, not starting with '-', at most 256 characters.
# An empty RUN is never "the latest run", whatever the command.
NAMES = [
    *[[*cmd, bad] for cmd in (["cancel"], ["resume"], ["clean"], ["integrate"], ["reconcile"],
                              ["status"], ["wait"], ["ledger"], ["review", "--json"])
      for bad in ("", " ", "\t", "a\x1bb", LONG)],
    ["cancel", "--", "-x"],
    ["cancel", "{RUN}", "--packet", ""], ["cancel", "{RUN}", "--packet", " "],
    ["cancel", "{RUN}", "--packet", "a\nb"], ["cancel", "{RUN}", "--packet=-x"],
    ["reassign", "", "--run", "{RUN}"], ["reassign", "a", "--run", ""],
    ["reassign", "a", "--run", " "], ["reassign", "a", "--run", "{RUN}", "--executor", ""],
    ["followup", "a", "--run", "", "--prompt-file", "p.md"],
    ["followup", " ", "--run", "{RUN}", "--prompt-file", "p.md"],
    ["pause", "a", "--run", ""], ["pause", "", "--run", "{RUN}"], ["pause", "a\nb"],
    ["integrate", "{RUN}", "--include", ""], ["integrate", "{RUN}", "--include", "nope"],
    ["reconcile", "{RUN}", "--rescoped", "=why"],
    ["review", "{RUN}", "--decide", "", "accept"], ["review", "", "--decide", "a", "accept"],
    ["review", "{RUN}", "--decide", "a", "accept", "--as", "x\x1b]0;t\x07"],
    ["brief", "a", "--run", ""], ["brief", "", "--run", "{RUN}"],
    ["route", "--id", ""], ["route", "--model", "a\nb"], ["route", "--executor", ""],
    ["quota", "--group", ""], ["run", "plan.json", "--deadline", ""],
    ["run", "plan.json", "--cluster", ""],
    ["cluster", "local", "--host", ""],
]


@pytest.mark.parametrize("args", NAMES, ids=[_id(a) for a in NAMES])
def test_a_bad_id_or_name_is_refused(place, args):
    refused(place, args)


# A path: not empty, not blank, at most 4096 bytes (255 a part); a plan, a packet, a prompt
# or the config file is a regular file of bounded size (a FIFO or a device is never read).
PATHS = [
    ["run", ""], ["run", " "], ["check", LONG], ["run", "{ROOT}/fifo"], ["run", "/dev/zero"],
    ["check", "{ROOT}"], ["followup", "a", "--run", "{RUN}", "--prompt-file", ""],
    ["gather", ""], ["monitor", ""], ["settle", " "], ["receipt", "", "--attempt-id", "x"],
    ["packet", "new", "x", "-o", ""], ["brief", "a", "--plan", ""],
    ["integrate", "{RUN}", "--worktree", ""],
]


@pytest.mark.parametrize("args", PATHS, ids=[_id(a) for a in PATHS])
def test_a_bad_path_is_refused(place, args):
    refused(place, args)


# A count in its documented range; seconds finite, from 0 to a day.
NUMBERS = [
    ["run", "plan.json", "--parallel", HUGE], ["run", "plan.json", "--parallel", "1001"],
    ["run", "plan.json", "-j", "0"], ["ledger", "--limit", HUGE], ["ledger", "--limit", "0"],
    ["ledger", "--limit", "-1"], ["wait", "{RUN}", "--since", HUGE],
    ["wait", "{RUN}", "--since", "-1"], ["cancel", "{RUN}", "--wait", "nan"],
    ["cancel", "{RUN}", "--wait", "inf"], ["cancel", "{RUN}", "--wait", "-1"],
    ["reassign", "a", "--run", "{RUN}", "--wait", "1e309"],
    ["followup", "a", "--run", "{RUN}", "--prompt-file", "p.md", "--wait", "nan"],
    ["review", "{RUN}", "--port", "70000"], ["review", "{RUN}", "--port", "-1"],
    ["cluster", "local", "--workers", HUGE], ["cluster", "local", "--threads", "0"],
    ["cluster", "local", "--port", "65536"], ["panel", "p.md", "--claude", HUGE],
    ["panel", "p.md", "--parallel", "-1"],
]


@pytest.mark.parametrize("args", NUMBERS, ids=[_id(a) for a in NUMBERS])
def test_a_number_out_of_its_range_is_refused(place, args):
    refused(place, args)


# A duration: seconds or 90s/45m/2h/1h30m, finite, not negative, at most 3650d.
DURATIONS = [
    ["wait", "{RUN}", "--timeout", ""], ["wait", "{RUN}", "--timeout", "nan"],
    ["wait", "{RUN}", "--timeout", HUGE], ["wait", "{RUN}", "--timeout", "3651d"],
    ["gather", "{ROOT}/afile", "--timeout", "-1"],
    ["gather", "{ROOT}/afile", "--stable-window", "inf"],
    ["monitor", "{ROOT}/state", "--stall-threshold", "soon"],
    ["integrate", "{RUN}", "--check-timeout", HUGE],
    ["run", "plan.json", "--deadline", HUGE],
    ["dispatch", "--executor", "command", "--command", "echo hi", "--prompt-file", "p.md",
     "--result-file", "{ROOT}/r.md", "--unit-id", "u", "--timeout", "nan"],
    ["panel", "p.md", "--timeout", HUGE],
]


@pytest.mark.parametrize("args", DURATIONS, ids=[_id(a) for a in DURATIONS])
def test_a_bad_duration_is_refused(place, args):
    refused(place, args)


# An integration worktree is a new folder outside the repository and outside any .git.
WORKTREES = [".git/integration", ".git", "sub/dir", ".", "{ROOT}/repo/.git/x/y"]


@pytest.mark.parametrize("where", WORKTREES)
def test_an_integration_worktree_inside_the_repository_is_refused(place, where):
    refused(place, ["integrate", "{RUN}", "--no-check", "--worktree", where])


# The settings: a place prun cannot use is refused when the settings are read, whatever the
# command (an explicit workspace root inside a git work tree, under /proc, /sys or /dev, not a
# writable folder; a config file or ledger that is not a regular file; control characters).
SETTINGS = [
    {"PRUN_WORKSPACE_ROOT": "{ROOT}/repo/ws"}, {"PRUN_WORKSPACE_ROOT": "{ROOT}/repo"},
    {"PRUN_WORKSPACE_ROOT": "/proc/1/ws"}, {"PRUN_WORKSPACE_ROOT": "/sys/ws"},
    {"PRUN_WORKSPACE_ROOT": "/dev/null"}, {"PRUN_WORKSPACE_ROOT": "{ROOT}/afile/ws"},
    {"PRUN_STATE_ROOT": "/proc/self"}, {"PRUN_CONFIG": "/dev/zero"},
    {"PRUN_CONFIG": "{ROOT}/fifo"}, {"PRUN_CONFIG": "{ROOT}"}, {"PRUN_LEDGER": "{ROOT}"},
    {"PRUN_STATE_ROOT": "{ROOT}/st\nate"}, {"PRUN_MONITOR_COMMAND": "prun\x1b]0;t\x07"},
]


@pytest.mark.parametrize("env", SETTINGS, ids=[_id([f"{k}={v}" for k, v in e.items()])
                                               for e in SETTINGS])
@pytest.mark.parametrize("args", [["run", "plan.json"], ["status"], ["cancel", "{RUN}"]],
                         ids=["run", "status", "cancel"])
def test_a_setting_prun_cannot_use_is_refused_before_anything(place, env, args):
    line = refused(place, args, env)
    assert next(iter(env)) in line


def test_an_unset_run_never_cancels_the_latest_run(place):
    """`prun cancel "$RUN"` with RUN unset: the run in the ledger is left alone."""
    root, _repo, _env, run_id = place
    line = refused(place, ["cancel", ""])
    assert "run id" in line
    with sqlite3.connect(root / "ledger.sqlite") as c:
        assert c.execute("SELECT count(*) FROM requests").fetchone()[0] == 0
        assert c.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0] \
            == "succeeded"
