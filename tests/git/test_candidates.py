"""Best of several candidates through the prun command: a packet with ``candidates:`` runs as
several command units (each told its number in $PRUN_CANDIDATE), prun reconcile picks one by
the rule and names the others NOT-CHOSEN, prun integrate applies only the winner, and a
person's pick (prun review --decide) wins over the rule."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from helpers import prun
from prun.ledger import Ledger
from prun.review import render
from prun.review.model import build

PY = sys.executable


def candidates_unit(pid: str, writes: dict[int, dict[str, str]], **fields) -> dict:
    """A code packet owning ``out/<pid>/`` whose candidate k writes ``writes[k]`` (path ->
    text) in its clone."""
    code = ("import os, json\nk = os.environ['PRUN_CANDIDATE']\n"
            f"for p, t in json.loads({json.dumps(json.dumps(writes))})[k].items():\n"
            "    os.makedirs(os.path.dirname(p) or '.', exist_ok=True); open(p, 'w').write(t)\n"
            "print('candidate', k, 'wrote its files as asked')")
    return {"id": pid, "kind": "code", "executor": "command", "prompt": f"unit {pid}",
            "owns": [f"out/{pid}/**"], "command": [PY, "-c", code],
            "candidates": len(writes), **fields}


def run(repo: Path, packets: list[dict], **settings) -> str:
    (repo / "plan.yaml").write_text(json.dumps({**settings, "packets": packets}))
    r = prun("run", "plan.yaml", cwd=repo, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()[1]


def reconcile(repo: Path) -> tuple[int, list[str], list[dict]]:
    r = prun("reconcile", cwd=repo, timeout=120)
    j = json.loads(prun("reconcile", "--json", cwd=repo, timeout=120).stdout)
    return r.returncode, r.stdout.splitlines(), j["packets"]


def not_chosen(lines: list[str]) -> dict[int, str]:
    """candidate -> reason of every NOT-CHOSEN line, parsed."""
    out = {}
    for line in lines:
        m = re.fullmatch(r"NOT-CHOSEN (\S+) candidate=(\d+) reason=(\S+)", line)
        if m:
            out[int(m[2])] = m[3]
    return out


def test_winner_by_accept_then_smaller_diff_and_only_it_integrated(repo):
    good = "good\n"
    run(repo, [candidates_unit("fix", {
        1: {"out/fix/a.txt": "bad\n"},
        2: {"out/fix/a.txt": good},
        3: {"out/fix/a.txt": good, "out/fix/notes.txt": "more\nlines\n"}},
        accept=[PY, "-c", "import sys; sys.exit(open('out/fix/a.txt').read() != 'good\\n')"])])
    code, lines, packets = reconcile(repo)
    assert code == 0, lines
    assert ('ACCEPTED fix candidate=2 of=3 why="the smaller diff (2 against 5)" files=1 '
            'accept=passed') in lines, lines
    assert not_chosen(lines) == {1: "accept-failed", 3: "larger-diff"}
    assert lines[-1].startswith("RECONCILE") and " packets=1 accepted=1 " in lines[-1]
    by = {p["candidate"]: p for p in packets}
    assert by[2]["verdict"] == "accepted" and by[2]["of"] == 3 and by[2]["why"].startswith("the smaller")
    assert by[1]["verdict"] == by[3]["verdict"] == "not-chosen"
    assert (by[1]["reason"], by[3]["reason"]) == ("accept-failed", "larger-diff")
    assert {p["packet"] for p in packets} == {"fix"} and by[3]["unit"] == "fix.c3"

    status = json.loads(prun("status", "--json", cwd=repo).stdout)
    assert sorted(a["candidate"] for a in status["attempts"]) == [1, 2, 3]
    assert {u["packet_id"]: u["candidate"] for u in status["units"]} == {
        "fix.c1": 1, "fix.c2": 2, "fix.c3": 3}
    assert len({a["workspace"] for a in status["attempts"]}) == 3   # each its own workspace

    merged = prun("integrate", cwd=repo, timeout=120)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert (repo / "out" / "fix" / "a.txt").read_text() == good
    assert not (repo / "out" / "fix" / "notes.txt").exists()
    assert "SKIPPED fix.c3 verdict=not-chosen" in merged.stdout, merged.stdout
    # the others stay as evidence
    for a in status["attempts"]:
        assert Path(a["workspace"]).is_dir() and Path(a["result_path"]).is_file()


def test_winner_by_scope_and_a_persons_pick_is_honoured(repo):
    run_id = run(repo, [candidates_unit("fix", {
        1: {"out/fix/a.txt": "one\n", "elsewhere.txt": "leak\n"},
        2: {"out/fix/a.txt": "two\n", "out/fix/b.txt": "x\ny\nz\n"}})])
    code, lines, _ = reconcile(repo)
    assert 'ACCEPTED fix candidate=2 of=2 why="it stayed in scope" files=2' in lines, lines
    assert not_chosen(lines) == {1: "scope"}
    assert code == 0

    # the review page shows them side by side, each other one with a button to pick it
    page = json.loads(prun("review", "--json", cwd=repo).stdout)
    shown = {p["candidate"]: p for p in page["packets"]}
    assert shown[1]["verdict"] == "NOT-CHOSEN" and shown[1]["reason"] == "scope"
    assert shown[2]["why"] == "it stayed in scope" and shown[2]["candidate_of"] == "fix"
    with Ledger.open() as ledger:
        html = render.page(build(ledger, run_id), "token")
    group = html[html.index("Candidates of fix"):]
    assert group.index("candidate 1") < group.index("candidate 2")
    assert group.count("Pick this one") == 1 and 'name="packet" value="fix.c1"' in group

    picked = prun("review", "--decide", "fix.c1", "accept", "--as", "alice", cwd=repo)
    assert picked.returncode == 0, picked.stdout + picked.stderr
    code, lines, packets = reconcile(repo)
    # the pick wins over the rule; its own verdict stands, the person's decision applies it
    assert "REJECTED fix candidate=1 of=2 reason=scope-leak path=elsewhere.txt" in lines, lines
    assert not_chosen(lines) == {2: "picked"}
    assert [p["why"] for p in packets if p["candidate"] == 1] == ["picked by alice"]
    merged = prun("integrate", cwd=repo, timeout=120)
    assert (repo / "out" / "fix" / "a.txt").read_text() == "one\n", merged.stdout + merged.stderr
    assert not (repo / "out" / "fix" / "b.txt").exists()


def test_candidates_never_overlap_each_other_and_executors_listed(repo):
    packet = candidates_unit("fix", {1: {"out/fix/a.txt": "1\n"}, 2: {"out/fix/a.txt": "2\n"}})
    packet["candidates"] = ["command", "command"]
    run(repo, [packet])   # no --allow-overlap: both own out/fix/**
    code, lines, packets = reconcile(repo)
    # the same diff size: the earlier finish wins (the lower number on an exact tie)
    winner = next(p for p in packets if p["verdict"] == "accepted")
    assert winner["why"] in ("the earlier finish", "the lower candidate number on a tie")
    assert list(not_chosen(lines).values()) in (["later-finish"], ["higher-number"]), lines
    assert code == 0
    status = json.loads(prun("status", "--json", cwd=repo).stdout)
    assert [a["executor"] for a in status["attempts"]] == ["command", "command"]


def test_bad_candidates_are_refused_in_one_line(repo):
    for value, words in ((1, "candidates"), (["command", "nosuch"], "unknown executor 'nosuch'")):
        packet = candidates_unit("fix", {1: {}, 2: {}})
        packet["candidates"] = value
        (repo / "plan.yaml").write_text(json.dumps({"packets": [packet]}))
        r = prun("run", "plan.yaml", cwd=repo)
        assert r.returncode == 2 and words in r.stderr, r.stderr
    packets = [candidates_unit("fix", {1: {}, 2: {}}),
               {"id": "then", "executor": "command", "command": ["true"], "prompt": "p",
                "after": ["fix"]}]
    (repo / "plan.yaml").write_text(json.dumps({"packets": packets}))
    r = prun("run", "plan.yaml", cwd=repo)
    assert r.returncode == 2 and "which has candidates" in r.stderr, r.stderr
    assert not (repo / ".prun" / "runs").exists()


def test_a_run_does_not_foresee_a_losing_candidate_rejected(repo):
    """The end of a run lists what reconcile will reject: a candidate that loses (here by a
    scope leak) is not chosen, not rejected, so it is not listed."""
    (repo / "plan.yaml").write_text(json.dumps({"packets": [candidates_unit("fix", {
        1: {"out/fix/a.txt": "one\n", "elsewhere.txt": "leak\n"},
        2: {"out/fix/a.txt": "two\n"}})]}))
    r = prun("run", "plan.yaml", cwd=repo, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not [ln for ln in r.stdout.splitlines() if ln.startswith("REJECTED")], r.stdout
    assert "will reject" not in r.stderr
