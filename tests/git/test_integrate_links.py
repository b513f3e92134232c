"""Symbolic links across packets, from the `prun` command on real runs: a link one packet's
change makes and another's writes through, or one the person's tree already holds, is rejected
by reconcile with its reason, and `prun integrate` writes through none of them, whatever the
verdicts and decisions (an included change too)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from gitrepo import gout

from helpers import prun

SCRIPT = """
import os, pathlib, sys
job = __import__("json").loads(sys.argv[1])
for path, target in job.get("links", {}).items():
    os.symlink(target, path)
for path, text in job.get("write", {}).items():
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
print("changed the files it was asked to change, and nothing else at all")
"""


def unit(pid: str, owns: list[str], job: dict, **extra) -> dict:
    return {"id": pid, "kind": "code", "executor": "command", "owns": owns,
            "command": [sys.executable, "-c", SCRIPT, json.dumps(job)], "prompt": f"unit {pid}",
            **extra}


def run_plan(repo, packets: list[dict], *flags: str) -> None:
    plan = repo / "plan.json"
    plan.write_text(json.dumps({"packets": packets}))
    exclude(repo, "/plan.json")
    r = prun("run", str(plan), *flags, cwd=repo, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr


def exclude(repo, pattern: str) -> None:
    with open(repo / ".git" / "info" / "exclude", "a") as f:
        f.write(pattern + "\n")


def snapshot(folder) -> dict[str, str]:
    """Every entry under ``folder`` (links as links), to see that nothing changed there."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, folder)
            out[rel] = ("link:" + os.readlink(p) if os.path.islink(p) else
                        "dir" if os.path.isdir(p) else open(p, "rb").read().hex())
    return out


def test_a_link_out_of_the_repository_never_reaches_the_tree(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the person's file outside the repository\n")
    before_outside = snapshot(outside)
    run_plan(repo, [
        unit("a", ["lib"], {"links": {"lib": "../outside"}}),
        unit("b", ["lib/**"], {"write": {"lib/x.py": "X = 1\n"}}),
    ], "--allow-overlap")

    r = prun("reconcile", "--json", cwd=repo)
    verdicts = {p["packet"]: p for p in json.loads(r.stdout)["packets"]}
    # the link is left out of a's change (its scan rejects it), so b writes no link's folder
    assert verdicts["a"]["verdict"] == "rejected"
    assert any(x["code"] == "link-outside" and x["path"] == "lib"
               for x in verdicts["a"]["reasons"]), verdicts["a"]
    assert verdicts["b"]["verdict"] == "accepted", verdicts["b"]
    r = prun("integrate", "--no-check", "--include", "a", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not os.path.islink(repo / "lib")
    assert (repo / "lib" / "x.py").read_text() == "X = 1\n"
    assert snapshot(outside) == before_outside


@pytest.mark.parametrize("points_to", ["src"])
def test_a_link_another_packet_writes_through_is_rejected_and_never_written_through(
        repo, tmp_path, points_to):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("the person's file outside the repository\n")
    before_outside, before_src = snapshot(outside), snapshot(repo / "src")
    run_plan(repo, [
        unit("a", ["lib"], {"links": {"lib": points_to}}),
        unit("b", ["lib/**"], {"write": {"lib/x.py": "X = 1\n"}}),
    ], "--allow-overlap")      # the independence test sees the overlap; run it anyway

    r = prun("reconcile", "--json", cwd=repo)
    assert r.returncode == 1, r.stdout + r.stderr
    verdicts = {p["packet"]: p for p in json.loads(r.stdout)["packets"]}
    assert verdicts["a"]["verdict"] == verdicts["b"]["verdict"] == "rejected"
    assert {"code": "link-through", "path": "lib/x.py", "link": "lib", "with": "a"} \
        in verdicts["b"]["reasons"]
    assert {"code": "link-through", "path": "lib/x.py", "link": "lib", "with": "b"} \
        in verdicts["a"]["reasons"]
    r = prun("reconcile", cwd=repo)
    assert "REJECTED b reason=link-through path=lib/x.py link=lib with=a" in r.stdout.splitlines()

    r = prun("integrate", "--no-check", cwd=repo)           # the verdicts: neither is applied
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SKIPPED a verdict=rejected" in r.stdout and "SKIPPED b verdict=rejected" in r.stdout
    assert not os.path.lexists(repo / "lib")

    # the person includes both: the link lands, and nothing is written through it
    r = prun("integrate", "--no-check", "--include", "a", "--include", "b", cwd=repo)
    assert r.returncode == 11, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert any(line.startswith("APPLIED a ") for line in lines), r.stdout
    assert "CONFLICT b path=lib/x.py with=a link=lib" in lines, r.stdout
    assert os.readlink(repo / "lib") == points_to
    assert snapshot(outside) == before_outside
    assert snapshot(repo / "src") == before_src
    assert not os.path.lexists(outside / "x.py") and not os.path.lexists(repo / "src" / "x.py")


def test_a_link_in_the_working_tree_is_never_written_through(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, repo / "build")                   # the person's own, untracked link
    exclude(repo, "/build")
    run_plan(repo, [unit("gen", ["build/**", "src/app/**"],
                         {"write": {"build/out.txt": "made\n",
                                    "src/app/main.py": "def main():\n    return 2\n"}})])

    r = prun("reconcile", cwd=repo)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("REJECTED gen reason=link-through path=build/out.txt link=build with=working-tree"
            in r.stdout.splitlines()), r.stdout

    r = prun("integrate", "--no-check", "--include", "gen", "--json", cwd=repo)
    assert r.returncode == 11, r.stdout + r.stderr
    unit_result = json.loads(r.stdout)["units"][0]
    assert unit_result["action"] == "conflict"
    assert unit_result["conflicts"] == [{"path": "build/out.txt", "with": "working-tree",
                                         "link": "build"}]
    assert os.listdir(outside) == []
    assert (repo / "src/app/main.py").read_text() == "def main():\n    return 1\n"  # whole or not
    assert gout(repo, "status", "--porcelain") == ""


def test_a_link_the_tree_holds_where_a_file_goes_is_not_replaced_through(repo, tmp_path):
    """A new file where the tree holds a link (to a file outside): refused, the link named,
    the file outside untouched."""
    secret = tmp_path / "secret.txt"
    secret.write_text("not the repository's\n")
    run_plan(repo, [unit("notes", ["notes.txt"], {"write": {"notes.txt": "notes\n"}})])
    os.symlink(secret, repo / "notes.txt")
    exclude(repo, "/notes.txt")

    r = prun("integrate", "--no-check", cwd=repo)
    assert r.returncode == 11, r.stdout + r.stderr
    assert "CONFLICT notes path=notes.txt with=working-tree link=notes.txt" in r.stdout, r.stdout
    assert secret.read_text() == "not the repository's\n"
    assert os.readlink(repo / "notes.txt") == str(secret)
