"""Bad plans, one rule per class (prun.plan.load, prun._util.yamldoc, prun.plan.validation,
prun.plan.fields): each is refused by `prun run` with one stderr line naming the file and line,
exit 2, before the run is frozen: no run in the ledger, no run dir, no state dir, no file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

GOOD = {"id": "a", "executor": "command", "prompt": "x",
        "command": [sys.executable, "-c", "print('a result that is long enough')"]}


@pytest.fixture
def place(tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    env = {**os.environ, "PRUN_WORKSPACE_ROOT": str(tmp_path / "ws"), "PRUN_SANDBOX": "off"}
    return tmp_path, repo, env


def refused(place, plan: str | bytes | None, *, at: str = "plan.yaml", path: str | None = None,
            command: str = "run") -> str:
    """``prun run`` (or ``check``) of ``plan`` (text written to plan.yaml, or ``path``):
    exit 2, one line naming the file (and ``at``, its line), nothing made."""
    root, repo, env = place
    if plan is not None:
        target = repo / "plan.yaml"
        target.write_bytes(plan if isinstance(plan, bytes) else plan.encode())
        path = str(target)
    before = {str(p.relative_to(root)) for p in root.rglob("*")}
    p = subprocess.run([sys.executable, "-m", "prun", command, str(path)], cwd=repo,
                       capture_output=True, text=True, env=env, timeout=60,
                       stdin=subprocess.DEVNULL)
    lines = p.stderr.splitlines()
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("prun: ") and lines[0].endswith(")"), lines
    assert at in lines[0], lines[0]
    assert p.stdout == "" and "Traceback" not in p.stderr
    assert {str(p.relative_to(root)) for p in root.rglob("*")} == before
    ledger = repo / ".prun" / "ledger.sqlite"
    if ledger.exists():
        with sqlite3.connect(ledger) as c:
            assert c.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    return lines[0]


def plan_with(**fields) -> str:
    """A plan of one good packet with ``fields`` over it (JSON, which YAML reads)."""
    return json.dumps({"packets": [{**GOOD, **fields}]})


# A plan file is a regular file of at most 16 MiB: a device, a FIFO, a folder is never read.
def test_a_plan_that_is_not_a_bounded_regular_file_is_refused(place):
    root, repo, _ = place
    os.mkfifo(root / "fifo.yaml")
    (root / "huge.yaml").write_bytes(b"# " + b"x" * (17 * 1024 * 1024))
    for path in ("/dev/zero", str(root / "fifo.yaml"), str(root), str(root / "huge.yaml")):
        refused(place, None, path=path, at=path)
    (repo / "p.md").mkdir()
    refused(place, json.dumps({"packets": [{"id": "a", "prompt_file": "p.md",
                                            "command": "echo hi"}]}), at="p.md")


def _bomb(levels: int = 12) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\npackets: []\n"


# YAML is refused before it is built: a character YAML forbids, nesting past 64 levels, more
# than 100 aliases, a value expanding past 200,000, an alias that holds itself.
YAML = {
    "nul": ("packets:\n  - id: a\x00\n", "plan.yaml:2"),
    "escape": ("name: \x1b]0;t\x07\npackets: []\n", "plan.yaml:1"),
    "del": ("packets: []\nname: x\x7f\n", "plan.yaml:2"),
    "deep flow": ("packets: " + "[" * 20000 + "]" * 20000 + "\n", "plan.yaml:1"),
    "deep block": ("packets:\n" + "".join("  " * i + "-\n" for i in range(1, 100)), "plan.yaml"),
    "alias bomb": (_bomb(), "plan.yaml"),
    "many aliases": ("x: &x 1\ny: [" + ", ".join(["*x"] * 150) + "]\npackets: []\n",
                     "plan.yaml"),
    "recursive alias": ("a: &a [*a]\npackets: []\n", "plan.yaml:1"),
}


@pytest.mark.parametrize("case", list(YAML))
def test_hostile_yaml_is_refused_before_it_is_built(place, case):
    text, at = YAML[case]
    refused(place, text, at=at)


# A field's value: NUL nowhere; no control character, no blank and no leading '-' in a name, a
# path or a revision; numbers in range; commands that parse; bases that are commits; port
# entries that name ports. All before the run is frozen.
FIELDS = {
    "timeout nan": ("packets:\n  - id: a\n    command: echo hi\n    prompt: x\n"
                    "    timeout: .nan\n", "plan.yaml:5"),
    "timeout inf": ("packets:\n  - id: a\n    command: echo hi\n    prompt: x\n"
                    "    timeout: .inf\n", "plan.yaml:5"),
    "timeout negative": (plan_with(timeout=-5), "plan.yaml"),
    "timeout zero": (plan_with(timeout=0), "plan.yaml"),
    "timeout huge": (plan_with(timeout="99999999999999999999"), "plan.yaml"),
    "timeout list": (plan_with(timeout=[1]), "plan.yaml"),
    "port out of range": (plan_with(state=["port:99999"]), "plan.yaml"),
    "port zero": (plan_with(state=["port:0"]), "plan.yaml"),
    "port backwards": (plan_with(state=["port:9000-8000"]), "plan.yaml"),
    "parallel huge": (json.dumps({"parallel": 10**20, "packets": [GOOD]}), "plan.yaml"),
    "parallel zero": (json.dumps({"parallel": 0, "packets": [GOOD]}), "plan.yaml"),
    "unbalanced command": (plan_with(command="echo 'hi"), "plan.yaml"),
    "empty command words": (plan_with(command="   "), "plan.yaml"),
    "unbalanced check": (json.dumps({"check": "pytest 'x", "packets": [GOOD]}), "plan.yaml"),
    "unbalanced setup": (json.dumps({"setup": "make \"x", "packets": [GOOD]}), "plan.yaml"),
    "unbalanced prime": (json.dumps({"workspace": {"prime": "npm 'ci", "share": ["n"]},
                                     "packets": [GOOD]}), "plan.yaml"),
    "share outside": (json.dumps({"workspace": {"prime": "true", "share": ["../x"]},
                                  "packets": [GOOD]}), "plan.yaml"),
    "share in .git": (json.dumps({"workspace": {"prime": "true", "share": [".git/hooks"]},
                                  "packets": [GOOD]}), "plan.yaml"),
    "absolute key": (json.dumps({"workspace": {"prime": "true", "key": ["/etc/passwd"],
                                               "share": ["n"]}, "packets": [GOOD]}),
                     "plan.yaml"),
    "workspace without share": (json.dumps({"workspace": {"prime": "true"},
                                            "packets": [GOOD]}), "plan.yaml"),
    "nul in a command": (plan_with(command=["echo", "a\u0000b"]), "plan.yaml"),
    "nul in a prompt": (plan_with(prompt="do\u0000it"), "plan.yaml"),
    "control in owns": (plan_with(kind="code", owns=["src/\u001b[2J"]), "plan.yaml"),
    "control in base": (plan_with(base="main\nx"), "plan.yaml"),
    "dash base": (plan_with(base="--all"), "plan.yaml"),
    "blank base": (plan_with(base=" "), "plan.yaml"),
    "unknown base": (plan_with(base="no-such-branch"), "plan.yaml"),
    "unknown plan base": (json.dumps({"base": "nope", "packets": [GOOD]}), "plan.yaml"),
    "control in a shared key": (plan_with(kind="code", owns=["a"], shared={"a\tb": "a"}),
                                "plan.yaml"),
    "dash in after": (json.dumps({"packets": [GOOD, {**GOOD, "id": "b", "after": ["-a"]}]}),
                      "plan.yaml"),
    "wrong type model": (plan_with(model=5), "plan.yaml"),
    "wrong type session_tools": (plan_with(session_tools="yes"), "plan.yaml"),
    "wrong type data": (plan_with(data=[]), "plan.yaml"),
    "deadline huge": (json.dumps({"deadline": "99999999999999999999", "packets": [GOOD]}),
                      "plan.yaml"),
}


@pytest.mark.parametrize("case", list(FIELDS))
def test_a_bad_field_is_refused_before_the_run_is_frozen(place, case):
    text, at = FIELDS[case]
    refused(place, text, at=at)


def test_a_good_plan_still_runs(place):
    """The rules refuse what they name, not a plan that uses anchors, argv with dashes and
    multi-line commands."""
    _root, repo, env = place
    (repo / "plan.yaml").write_text(
        "defaults: &d\n  executor: command\n  timeout: 45m\n"
        f"packets:\n  - id: a\n    <<: *d\n    prompt: x\n"
        f"    command: [{json.dumps(sys.executable)}, -c, "
        "\"print('a result that is long enough')\\nprint('-- two lines')\"]\n"
        "    state: [port:8000-8001, port:web]\n")
    p = subprocess.run([sys.executable, "-m", "prun", "run", "plan.yaml"], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert Path(repo / ".prun").is_dir()
