"""A unit that adds many files: `prun review` reads the diffs it shows with a bounded number of
git processes (not one per file), carries the diffs of the first files only (each mapped to its
own file, odd names included), and names the others without their diffs."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request

import pytest
from reviewrun import Fixture, make_repo, serve, unit

from helpers import make_fake_cli, prun
from prun.review.diffview import DIFF_FILES

FILES = 250
ODD = ["gen/0 a b \"q\".txt", "gen/0tab\there.txt", "gen/0é.txt"]   # among the first shown
COUNTING_GIT = """import os, sys
with open(os.environ["COUNTED_GIT_CALLS"], "a") as f:
    f.write(" ".join(sys.argv[3:4] if sys.argv[1:2] == ["-C"] else sys.argv[1:2]) + "\\n")
os.execv(os.environ["REAL_GIT"], [os.environ["REAL_GIT"], *sys.argv[1:]])
"""


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> Fixture:
    repo, env = make_repo(tmp_path_factory.mktemp("many"))
    write = {f"gen/f{i:03d}.txt": f"line {i}\n" for i in range(FILES - len(ODD))}
    write.update({name: f"odd {n}\n" for n, name in enumerate(ODD)})
    plan = {"packets": [unit("many", ["gen/**"], {"write": write,
                                                  "result": "## Summary\n\nWrote them.\n"})]}
    (repo / ".git" / "info" / "exclude").write_text("/plan.json\n")
    (repo / "plan.json").write_text(json.dumps(plan))
    r = prun("run", str(repo / "plan.json"), cwd=repo, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = next(line.split()[1] for line in r.stdout.splitlines() if line.startswith("RUN "))
    return Fixture(repo, env, run_id)


def test_the_diffs_are_read_in_a_few_git_processes_and_bounded(many, tmp_path):
    bin_dir = tmp_path / "bin"
    (tmp_path / "counting_git.py").write_text(COUNTING_GIT)
    make_fake_cli(bin_dir, "git", tmp_path / "counting_git.py")
    calls = tmp_path / "git-calls"
    env = {**many.env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "REAL_GIT": shutil.which("git"), "COUNTED_GIT_CALLS": str(calls)}
    r = prun("review", many.run_id, "--json", cwd=many.repo, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    started = calls.read_text().splitlines()
    assert len(started) < 20, started                          # not one per file

    packet = json.loads(r.stdout)["packets"][0]
    names = sorted(f["path"] for f in packet["files"])
    assert len(names) == FILES                                  # every file named
    assert sorted(packet["diffs"]) == names[:DIFF_FILES]        # the first ones' diffs
    assert packet["diffs_not_shown"] == FILES - DIFF_FILES
    for path, text in packet["diffs"].items():                 # each diff is its own file's
        want = (f"+odd {ODD.index(path)}\n" if path in ODD
                else f"+line {int(path[len('gen/f'):-len('.txt')])}\n")
        assert text.startswith("diff --git ") and text.endswith(want), (path, text)
        assert text.count("diff --git ") == 1


def test_the_page_names_the_files_whose_diffs_it_does_not_show(many):
    for server in serve(many):
        with urllib.request.urlopen(f"{server.base}/?token={server.token}", timeout=60) as resp:
            page = resp.read().decode()
        last = f"gen/f{FILES - len(ODD) - 1:03d}.txt"
        assert last in page                                     # named
        assert page.count("diff not shown") == FILES - DIFF_FILES
        assert "line 0" in page and "odd 1" in page              # shown diffs' text

