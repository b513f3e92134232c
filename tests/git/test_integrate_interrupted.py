"""`prun integrate` killed between two files of one patch (its git too, as a crash or a
power cut would): the next integrate puts that patch's files back as they were, applies it
whole, applies nothing twice, and reports no conflict."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from gitrepo import gone, gout, poll

from helpers import make_fake_cli, prun

SCRIPT = """
import json, os, pathlib, sys
job = json.loads(sys.argv[1])
for path, text in job.get("write", {}).items():
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text)
for path in job.get("delete", []):
    os.unlink(path)
print("changed the files it was asked to change, and nothing else at all")
"""


def unit(pid: str, owns: list[str], job: dict) -> dict:
    return {"id": pid, "kind": "code", "executor": "command", "owns": owns, "prompt": "p",
            "command": [sys.executable, "-c", SCRIPT, json.dumps(job)]}


def test_a_kill_between_two_files_of_a_patch_is_repaired_by_the_next_integrate(repo, tmp_path):
    (repo / ".git" / "info" / "exclude").write_text("/plan.json\n")
    (repo / "plan.json").write_text(json.dumps({"packets": [
        unit("a", ["docs/**"], {"write": {"docs/guide.md": "# Guide\n\nLonger.\n"}}),
        unit("b", ["src/app/**"], {"write": {"src/app/main.py": "def main():\n    return 3\n",
                                             "src/app/new/deep/x.py": "X = 1\n",
                                             "src/app/zz_new.py": "NEW = 1\n"},
                                   "delete": ["src/app/util.py"]}),
    ]}))
    r = prun("run", "plan.json", cwd=repo, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    before = {"src/app/main.py": (repo / "src/app/main.py").read_bytes()}

    bin_dir = tmp_path / "halting-bin"
    make_fake_cli(bin_dir, "git", Path(__file__).with_name("halting_git.py"))
    mark = tmp_path / "halted"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "REAL_GIT": shutil.which("git"), "HALT_MARK": str(mark)}
    first = subprocess.Popen([sys.executable, "-m", "prun", "integrate", "--no-check"],
                             cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    poll(lambda: mark.exists() or first.poll() is not None, limit=120)
    assert mark.exists(), first.communicate()
    os.killpg(first.pid, signal.SIGKILL)                   # prun, then its git: a crash
    first.wait(30)
    git_pid = int(mark.read_text())
    os.kill(git_pid, signal.SIGKILL)
    assert gone(git_pid)
    # the tree holds part of b's patch: all its files but the last
    assert (repo / "src/app/main.py").read_bytes() != before["src/app/main.py"]
    assert (repo / "src/app/new/deep/x.py").exists() and not (repo / "src/app/util.py").exists()
    assert not (repo / "src/app/zz_new.py").exists()

    r = prun("integrate", "--no-check", cwd=repo, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "INTERRUPTED applied=a partial=b restored=yes", r.stdout
    assert "CONFLICT" not in r.stdout, r.stdout
    assert any(line.startswith("APPLIED a ") and line.endswith("already=yes") for line in lines)
    assert any(line.startswith("APPLIED b files=4") for line in lines), r.stdout
    assert (repo / "src/app/main.py").read_text() == "def main():\n    return 3\n"
    assert (repo / "src/app/zz_new.py").read_text() == "NEW = 1\n"
    assert not (repo / "src/app/util.py").exists()
    assert (repo / "src/app/new/deep/x.py").read_text() == "X = 1\n"
    assert (repo / "docs/guide.md").read_text() == "# Guide\n\nLonger.\n"
    assert {line.strip() for line in gout(repo, "status", "--porcelain").splitlines()} == {
        "M docs/guide.md", "M src/app/main.py", "D src/app/util.py", "?? src/app/new/",
        "?? src/app/zz_new.py"}

    r = prun("integrate", "--no-check", cwd=repo, timeout=120)
    assert r.returncode == 0 and "CONFLICT" not in r.stdout, r.stdout + r.stderr
    assert sum("already=yes" in line for line in r.stdout.splitlines()) == 2, r.stdout
