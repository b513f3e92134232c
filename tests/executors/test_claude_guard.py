"""prun's PreToolUse guard for Claude Code: what it refuses, and its hook protocol."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from prun.hooks import claude_guard
from prun.hooks.claude_guard import refusal

REFUSED = [
    ("git commit -m wip", "git commit"),
    ("git add -A && git commit -am x", "git commit"),
    ("git -C ../repo push origin main", "git push"),
    ("/usr/bin/git push", "git push"),
    ("git reset --hard HEAD~1", "git reset --hard"),
    ("git clean -fdx", "git clean"),
    ("git branch feature", "git branch feature"),
    ("git branch -D old", "git branch -D old"),
    ("git tag v1.0", "git tag v1.0"),
    ("git tag -d v1.0", "git tag -d v1.0"),
    ("git checkout -b topic", "git checkout -b topic"),
    ("git switch -c topic", "git switch -c topic"),
    ("git merge other", "git merge"),
    ("git rebase main", "git rebase"),
    ("git cherry-pick abc123", "git cherry-pick"),
    ("bash -c 'cd x && git push'", "git push"),
    ("FOO=1 git commit", "git commit"),
    ("env -i git commit", "git commit"),
    ("timeout 5 git push", "git push"),
    ("sudo -u bob git commit", "git commit"),
    ("echo $(git commit -m x)", "git commit"),
    ("ls; git -c user.name=x commit", "git commit"),
    # the tree restored over the worker's edits (the same rule set as the git wrapper's)
    ("git checkout -- file.py", "git checkout -- file.py"),
    ("git checkout .", "git checkout ."),
    ("git checkout HEAD~1 src/x.py", "git checkout HEAD~1 src/x.py"),
    ("git checkout -f main", "git checkout -f main"),
    ("git restore src/x.py", "git restore src/x.py"),
    ("git restore --staged --worktree x", "git restore --staged --worktree x"),
    ("git switch --discard-changes main", "git switch --discard-changes main"),
    ("git stash drop", "git stash drop"),
    ("git stash clear", "git stash clear"),
    ("git pull", "git pull"),
    ("git -c alias.ci=commit ci -m x", "git commit"),
    ("git -c 'alias.up=!git push' up", "git push"),
]
ALLOWED = ["git status", "git diff | cat", "git log --oneline -5", "git add -A", "git stash",
           "git reset HEAD~1", "git reset --soft HEAD", "git clean -n", "git clean -nfd",
           "git branch", "git branch -a", "git branch --list 'f*'", "git tag", "git tag -l 'v*'",
           "git checkout main", "git checkout main --", "git switch main", "git --version",
           "git restore --staged x", "git stash pop", "git stash list", "git -c alias.s=status s",
           "git commit --help", "git push -h",
           "echo 'git commit'", "echo \"a; git commit\"", "python3 -c 'print(1)'", "ls -la", ""]


@pytest.mark.parametrize("command,why", REFUSED)
def test_refused(command, why):
    assert refusal(command) == why


@pytest.mark.parametrize("command", ALLOWED)
def test_allowed(command):
    assert refusal(command) is None


def hook(event: dict, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, claude_guard.__file__], input=json.dumps(event),
                          capture_output=True, text=True, timeout=30, env=env)


def test_hook_denies_with_a_reason(tmp_path):
    import os

    p = hook({"hook_event_name": "PreToolUse", "tool_name": "Bash",
              "tool_input": {"command": "git push --force"}},
             env={**os.environ, "PRUN_STATE_DIR": str(tmp_path)})
    assert p.returncode == 0
    out = json.loads(p.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    assert out["permissionDecisionReason"].startswith("prun guard: refused `git push`")
    assert json.loads((tmp_path / "guard.log").read_text())["command"] == "git push --force"


@pytest.mark.parametrize("event", [
    {"tool_name": "Bash", "tool_input": {"command": "git status"}},
    {"tool_name": "Write", "tool_input": {"file_path": "x", "content": "git commit"}},
    {"tool_name": "Bash", "tool_input": {}},
])
def test_hook_allows_by_saying_nothing(event):
    p = hook(event)
    assert p.returncode == 0 and p.stdout == ""


def test_hook_survives_bad_input():
    p = subprocess.run([sys.executable, claude_guard.__file__], input="not json",
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and p.stdout == ""
