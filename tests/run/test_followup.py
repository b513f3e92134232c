"""Follow-ups keep their workspace: a quota follow-up of a code unit keeps its edits, `prun
followup` resumes the conversation in the same folder (Gemini resumes only from there), and a
refused resume falls back to a fresh brief that carries the earlier result."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from helpers import FAKES, calls, make_fake_cli, prun
from prun.ledger import Ledger
from runkit import write_plan

QUOTA_AGY = Path(__file__).parent / "fake_agy_quota.py"


def _state(run_id):
    with Ledger.open() as led:
        return ({p["id"]: p["status"] for p in led.packets(run_id)},
                [dict(a) for a in led.attempts(run_id)],
                [dict(e) for e in led.events(run_id)], led.last_event_seq(run_id))


def _fake(tmp_path, monkeypatch, name: str, source: Path) -> Path:
    path = make_fake_cli(tmp_path / "bin", name, source)
    monkeypatch.setenv(f"PRUN_{name.upper()}_BIN", str(path))
    log = tmp_path / f"{name}.jsonl"
    monkeypatch.setenv(f"FAKE_{name.upper()}_LOG", str(log))
    return log


def _follow(repo, run_id: str, packet: str, text: str, cursor: int):
    request = repo.parent / f"followup-{packet}.md"
    request.write_text(text)
    r = prun("followup", packet, "--prompt-file", str(request), "--run", run_id)
    assert r.returncode == 0, r.stdout + r.stderr
    waited = prun("wait", run_id, "--since", str(cursor), "--timeout", "60")
    return r, waited


def test_a_quota_follow_up_of_a_code_unit_keeps_its_edits(repo, tmp_path, monkeypatch):
    log = tmp_path / "agy.jsonl"
    monkeypatch.setenv("PRUN_AGY_BIN", str(make_fake_cli(tmp_path / "bin", "agy", QUOTA_AGY)))
    monkeypatch.setenv("FAKE_AGY_LOG", str(log))
    monkeypatch.setenv("FAKE_QUOTA_FIRST", "1")
    monkeypatch.setenv("FAKE_QUOTA_EDIT", "1")
    plan = write_plan(repo / "plan.yaml", [{
        "id": "edit", "executor": "agy", "kind": "code", "prompt": "edit two files",
        "owns": ["first-edit.txt", "second-edit.txt"]}])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    status, (first, second), _, _ = _state(run_id)
    assert status == {"edit": "succeeded"}
    assert first["status"] == "quota" and second["predecessor"] == first["id"]
    assert second["workspace"] == first["workspace"]
    assert [c["cwd"] for c in calls(log)] == [first["workspace"]] * 2
    assert "earlier edit found: True" in Path(second["result_path"]).read_text()
    assert second["result_path"] != first["result_path"]
    rec = json.loads(prun("reconcile", run_id, "--json").stdout)
    (p,) = rec["packets"]
    assert p["attempt"] == second["id"]
    # the fake reports no tool use, so a change it made is a hollow success to review
    assert [r["code"] for r in p["reasons"]] == ["hollow-no-tool-use"]
    assert sorted(f["path"] for f in p["change"]["files"]) == ["first-edit.txt",
                                                               "second-edit.txt"]


def test_followup_resumes_a_gemini_unit_in_the_same_folder(repo, tmp_path, monkeypatch):
    log = _fake(tmp_path, monkeypatch, "gemini", FAKES / "fake_gemini.py")
    monkeypatch.setenv("FAKE_GEMINI_HOME", str(tmp_path / "gemini-home"))
    plan = write_plan(repo / "plan.yaml", [{"id": "look", "executor": "gemini",
                                            "prompt": "Look at the code.",
                                            "requires": ["Summary"]}])
    monkeypatch.setenv("FAKE_GEMINI_RESPONSE", "## Summary\n\nThe code looks fine to me.")
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    cursor = _state(run_id)[3]
    said, waited = _follow(repo, run_id, "look", "Check the error paths too.", cursor)
    assert said.stdout.startswith(f"FOLLOWUP look run={run_id} predecessor={run_id}:look:1 "
                                  f"attempt={run_id}:look:2 resume=yes")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    status, (first, second), _, _ = _state(run_id)
    assert status == {"look": "succeeded"}
    assert second["continue_from"] == first["state_dir"]
    assert second["workspace"] == first["workspace"]
    one, two = calls(log)
    assert two["cwd"] == one["cwd"] and "--resume" in two["argv"]
    prompt = two["argv"][two["argv"].index("-p") + 1]
    assert prompt.startswith("Check the error paths too.")
    outbox = Path(second["state_dir"]) / "outbox" / "result.md"
    assert f"Write the result of this turn to {outbox}" in prompt
    assert "Resumed" in Path(second["result_path"]).read_text()
    rec = json.loads(prun("reconcile", run_id, "--json").stdout)
    assert rec["packets"][0]["attempt"] == second["id"]


def test_a_refused_resume_falls_back_to_a_fresh_brief(repo, tmp_path, monkeypatch):
    log = _fake(tmp_path, monkeypatch, "claude", FAKES / "fake_claude.py")
    home = tmp_path / "claude-home"
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(home))
    monkeypatch.setenv("IS_SANDBOX", "1")
    plan = write_plan(repo / "plan.yaml", [{"id": "ask", "executor": "claude",
                                            "prompt": "Answer the question."}])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    shutil.rmtree(home)                        # the conversation is gone: the resume is refused
    _said, waited = _follow(repo, run_id, "ask", "Now give the sources.", _state(run_id)[3])
    assert waited.returncode == 0, waited.stdout + waited.stderr
    status, attempts, events, _ = _state(run_id)
    assert status == {"ask": "succeeded"}
    first, refused, fresh = attempts
    assert refused["reason"] == "resume-refused" and refused["continue_from"]
    assert fresh["predecessor"] == refused["id"] and fresh["continue_from"] is None
    assert any(e["kind"] == "resume-refused" for e in events)
    prompt = calls(log)[2]["argv"][calls(log)[2]["argv"].index("-p") + 1]
    assert prompt.startswith("# prun unit `ask`")
    assert "## Your earlier attempt\n\nResuming the conversation of" in prompt
    assert f"Its result is at {first['result_path']}" in prompt
    assert "Hello from the fake Claude" in prompt          # the earlier result, carried
    assert prompt.rstrip().endswith("## Follow-up\n\nNow give the sources.")


def test_followup_of_a_command_unit_gets_the_brief_again_in_the_same_folder(repo, tmp_path):
    code = ("import os, sys; text = sys.stdin.read(); n = len(os.listdir('.'));"
            "open(f'turn-{n}.txt', 'w').write(text); print('a result long enough, turn', n)")
    plan = write_plan(repo / "plan.yaml", [{"id": "job", "executor": "command",
                                            "command": [sys.executable, "-c", code],
                                            "prompt": "Do the job."}])
    r = prun("run", str(plan))
    run_id = r.stdout.split()[1]
    said, waited = _follow(repo, run_id, "job", "Do it once more.", _state(run_id)[3])
    assert "resume=no" in said.stdout
    assert waited.returncode == 0, waited.stdout + waited.stderr
    _, (first, second), _, _ = _state(run_id)
    assert second["workspace"] == first["workspace"]
    turns = sorted(Path(second["workspace"]).glob("turn-*.txt"))
    assert len(turns) == 2
    text = turns[1].read_text()
    assert text.startswith("# prun unit `job`") and "## Follow-up\n\nDo it once more." in text


def test_a_wait_without_a_cursor_after_a_followup_waits_for_the_reopened_run(repo, tmp_path):
    code = "import sys; sys.stdin.read(); print('a result long enough for the unit')"
    plan = write_plan(repo / "plan.yaml", [{"id": "job", "executor": "command",
                                            "command": [sys.executable, "-c", code],
                                            "prompt": "Do the job."}])
    run_id = prun("run", str(plan)).stdout.split()[1]
    request = repo.parent / "more.md"
    request.write_text("Once more.")
    r = prun("followup", "job", "--prompt-file", str(request), "--run", run_id)
    assert r.returncode == 0, r.stdout + r.stderr
    waited = prun("wait", run_id, "--timeout", "60")     # no --since: from the run's start
    assert waited.returncode == 0, waited.stdout + waited.stderr
    ends = [line for line in waited.stdout.splitlines() if " run-done " in line]
    assert len(ends) == 1 and "status=succeeded" in ends[0]   # the re-opened run's own end
    statuses, attempts, _, _ = _state(run_id)
    assert statuses == {"job": "succeeded"} and len(attempts) == 2
    assert "status=succeeded" in waited.stdout.splitlines()[-2]


def test_followup_refuses_what_it_cannot_do(repo, tmp_path):
    plan = write_plan(repo / "plan.yaml", [{"id": "job", "executor": "command",
                                            "command": ["true"], "prompt": "x"}])
    empty = tmp_path / "empty.md"
    empty.write_text("  \n")
    r = prun("followup", "job", "--prompt-file", str(empty))
    assert r.returncode == 2 and "prompt file is empty" in r.stderr
    prun("run", str(plan))
    good = tmp_path / "good.md"
    good.write_text("more")
    for args, words in ((["nope"], "no packet 'nope'"),):
        bad = prun("followup", *args, "--prompt-file", str(good))
        assert bad.returncode == 2 and words in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1

