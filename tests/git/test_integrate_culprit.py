"""The culprit when the combination breaks: `prun integrate` finds by bisection which units
make the combined check fail, holds them out of the tree, checks again, and `prun followup
--with-check` hands the failing output to the culprit's follow-up."""

from __future__ import annotations

import json
import math
import sys

import pytest
from gitrepo import gout

from helpers import prun

WRITE = "import pathlib,sys; p=pathlib.Path(sys.argv[1]); p.parent.mkdir(exist_ok=True); " \
        "p.write_text(sys.argv[2]); print('wrote ' + sys.argv[1] + ' as asked, nothing else')"

# Fails when a unit's file says BREAK, or when two say CLASH; needs the person's untracked
# local.cfg (so the throwaway workspaces must carry it); counts its runs in a file.
CHECK = """\
import pathlib, sys
with open(sys.argv[1], "a") as f:
    f.write("run\\n")
if not pathlib.Path("local.cfg").is_file():
    sys.exit("local.cfg is missing")
texts = {p.name: p.read_text() for p in sorted(pathlib.Path("units").glob("*.txt"))}
broken = [n for n, t in texts.items() if "BREAK" in t]
if broken:
    sys.exit("check failed: broken by " + ",".join(broken))
if sum("CLASH" in t for t in texts.values()) >= 2:
    sys.exit("check failed: two units clash")
print("check ok")
"""


def _unit(pid: str, text: str) -> dict:
    return {"id": pid, "kind": "code", "executor": "command", "owns": [f"units/{pid}.txt"],
            "command": [sys.executable, "-c", WRITE, f"units/{pid}.txt", text],
            "prompt": f"unit {pid}"}


def _run(repo, tmp_path, texts: dict[str, str]) -> str:
    """A finished run of one unit per text, the person's uncommitted changes in place."""
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    plan = repo / "plan.json"
    plan.write_text(json.dumps({
        "check": [sys.executable, str(script), str(tmp_path / "runs.txt")],
        "packets": [_unit(pid, text) for pid, text in texts.items()]}))
    r = prun("run", str(plan), cwd=repo, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    (repo / "README.md").write_text("the person's own edit\n")       # uncommitted
    (repo / "local.cfg").write_text("untracked\n")                    # untracked
    return r.stdout.split()[1]


def _untouched(repo) -> None:
    assert (repo / "README.md").read_text() == "the person's own edit\n"
    assert (repo / "local.cfg").read_text() == "untracked\n"
    assert gout(repo, "diff", "--cached", "--name-only") == ""


def _runs(tmp_path) -> int:
    return len((tmp_path / "runs.txt").read_text().splitlines())


@pytest.mark.parametrize("overlays", [False, True], ids=["clones", "overlay-workspaces"])
def test_one_unit_breaking_the_check_among_six_is_found_held_and_followed_up(repo, tmp_path, request,
                                                                             overlays):
    if overlays:   # each code unit's workspace an overlay over the run's checkout
        request.getfixturevalue("overlay")
    texts = {f"u{i}": "fine" for i in range(1, 7)}
    texts["u4"] = "BREAK"
    run_id = _run(repo, tmp_path, texts)
    head = gout(repo, "rev-parse", "HEAD")
    r = prun("integrate", cwd=repo, timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert [x.split()[:2] for x in lines if x.startswith("CHECK")] == [["CHECK", "failed"],
                                                                       ["CHECK", "passed"]]
    assert "CULPRIT u4 check=failed alone" in lines
    assert "HELD u4 reason=check-culprit" in lines
    assert lines[-1].startswith("INTEGRATE ") and " applied=5 " in lines[-1]
    assert "held=1 check=failed recheck=passed" in lines[-1]
    assert not (repo / "units/u4.txt").exists()
    assert sorted(p.name for p in (repo / "units").iterdir()) == [
        f"u{i}.txt" for i in (1, 2, 3, 5, 6)]
    assert gout(repo, "rev-parse", "HEAD") == head
    _untouched(repo)

    r = prun("followup", "u4", "--with-check", "--run", run_id, cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("FOLLOWUP u4 ")
    assert prun("wait", run_id, "--timeout", "60", cwd=repo).returncode == 0
    brief = prun("brief", "u4", "--run", run_id, cwd=repo)
    assert brief.returncode == 0, brief.stderr
    assert "## The check that failed" in brief.stdout
    assert "check failed: broken by u4.txt" in brief.stdout
    none = prun("followup", "u1", "--with-check", "--run", run_id, cwd=repo)
    assert none.returncode == 2 and "no check run showed" in none.stderr
    _untouched(repo)


def test_two_units_that_fail_only_together_hold_the_later_one(repo, tmp_path):
    run_id = _run(repo, tmp_path, {"a": "fine", "b": "CLASH", "c": "fine", "d": "CLASH"})
    r = prun("integrate", run_id, "--json", cwd=repo, timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert not out["check"]["ok"] and out["recheck"]["ok"]
    assert [c["packets"] for c in out["bisection"]["culprits"]] == [["b", "d"]]
    assert out["held"] == ["d"]
    assert (repo / "units/b.txt").read_text() == "CLASH"
    assert not (repo / "units/d.txt").exists()
    _untouched(repo)


def test_a_pair_split_by_two_breakers_is_found_once_they_are_out(repo, tmp_path):
    # both halves fail (a breaker each), so each is searched alone: the pair, one unit in each
    # half, shows only in what is left once the breakers are held out
    texts = {"u1": "BREAK", "u2": "CLASH", "u3": "fine", "u4": "fine",
             "u5": "fine", "u6": "CLASH", "u7": "BREAK", "u8": "fine"}
    run_id = _run(repo, tmp_path, texts)
    r = prun("integrate", run_id, "--json", cwd=repo, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert sorted(c["packets"] for c in out["bisection"]["culprits"]) == [
        ["u1"], ["u2", "u6"], ["u7"]]
    assert sorted(out["held"]) == ["u1", "u6", "u7"]
    assert out["recheck"]["ok"]
    assert (repo / "units/u2.txt").read_text() == "CLASH"
    _untouched(repo)


def test_keep_culprits_applies_everything_as_before(repo, tmp_path):
    _run(repo, tmp_path, {"a": "fine", "b": "BREAK", "c": "fine"})
    r = prun("integrate", "--keep-culprits", cwd=repo, timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "CULPRIT" not in r.stdout and "HELD" not in r.stdout
    assert r.stdout.splitlines()[-1].endswith("applied=3 conflicts=0 skipped=0 check=failed "
                                              "committed=no")
    assert (repo / "units/b.txt").read_text() == "BREAK"
    assert _runs(tmp_path) == 1
    _untouched(repo)


def test_check_runs_grow_with_the_logarithm_of_the_units(repo, tmp_path):
    texts = {f"u{i}": "fine" for i in range(1, 9)}
    texts["u7"] = "BREAK"
    _run(repo, tmp_path, texts)
    r = prun("integrate", cwd=repo, timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "CULPRIT u7 check=failed alone" in r.stdout.splitlines()
    bisect = next(x for x in r.stdout.splitlines() if x.startswith("BISECT "))
    # two halvings down to u7 (2 runs each level), then what is left without it, once
    assert bisect.startswith("BISECT runs=7 ")
    # the combined check, the bisection's runs and the check again on the held tree
    assert _runs(tmp_path) <= 2 * math.log2(8) + 3
    _untouched(repo)
