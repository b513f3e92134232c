"""`prun panel`: the same question under the same schema to Claude, Gemini and agy units (the
fake CLIs), an invalid answer sent back once, and the cross-check, field by field."""

from __future__ import annotations

import json
from pathlib import Path

from panelkit import EXAMPLE, fenced

from helpers import calls, prun
from prun.ledger import Ledger

QUESTION = str(EXAMPLE / "question.md")
SCHEMA = str(EXAMPLE / "verdict.schema.json")
SAFE = {"verdict": "safe", "risk": "low", "files": ["src/prun/_util/process.py"],
        "summary": "Every signal goes through the process helper."}
UNSAFE = {"verdict": "unsafe", "risk": "high", "files": ["src/prun/cli/cancel.py"],
          "summary": "A pid from a file is signalled unchecked."}


def _run(*args: str):
    return prun("panel", QUESTION, "--schema", SCHEMA, *args, timeout=120)


def _fields(stdout: str) -> dict[str, str]:
    return {line.split()[1]: line for line in stdout.splitlines() if line.startswith("FIELD ")}


def _lines(stdout: str, word: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith(word + " ")]


def _ledger(run_id: str):
    with Ledger.open() as led:
        return (led.run(run_id), {p["id"]: p["status"] for p in led.packets(run_id)},
                [dict(a) for a in led.attempts(run_id)], [dict(e) for e in led.events(run_id)])


def test_a_panel_that_agrees_exits_0_and_is_a_run_in_the_ledger(panelists):
    two = ["src/prun/_util/process.py", "src/prun/cli/cancel.py"]
    panelists.answer("panel-claude-1", fenced({**SAFE, "files": two}))
    panelists.answer("panel-gemini-1", fenced({**SAFE, "summary": "Said otherwise.",
                                               "files": two[::-1]}))
    r = _run()
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    (panel,) = _lines(r.stdout, "PANEL")
    assert panel == (f"PANEL run={run_id} status=succeeded panelists=2 valid=2 invalid=0 "
                     "fields=3 agree=3 disagree=0 split-within=0 missing=0 verdict=agree")
    fields = _fields(r.stdout)
    assert fields["verdict"] == 'FIELD verdict agree value="safe" claude=1/1 gemini=1/1'
    assert fields["files"].startswith("FIELD files agree")   # uniqueItems: compared as sets
    assert "summary" not in fields                        # "x-compare": false
    run, packets, attempts, events = _ledger(run_id)
    assert run["status"] == "succeeded"
    assert packets == {"panel-claude-1": "succeeded", "panel-gemini-1": "succeeded"}
    assert sorted((a["packet_id"], a["executor"], a["mode"]) for a in attempts) == [
        ("panel-claude-1", "claude", "accept-edits"), ("panel-gemini-1", "gemini", "accept-edits")]
    (done,) = [e for e in events if e["kind"] == "panel"]
    assert done["status"] == "agree" and json.loads(done["data"])["exit_code"] == 0
    status = prun("status", run_id)
    assert status.stdout.startswith(f"RUN {run_id} status=succeeded packets=2")
    # every panelist read the code through the run's read-only snapshot, in a scratch folder
    for cli in ("claude", "gemini"):
        (call,) = calls(panelists.folder / f"{cli}.jsonl")
        assert call["env"]["PRUN_REPO_SNAPSHOT"] and call["env"]["PRUN_WORKSPACE_KIND"] == "scratch"
        prompt = call["argv"][call["argv"].index("-p") + 1]
        assert "Does `prun cancel` ever send a signal" in prompt
        assert '"enum": [\n        "safe"' in prompt and "```json" in prompt


def test_a_cross_family_disagreement_names_who_said_what(panelists):
    for n in (1, 2):
        panelists.answer(f"panel-claude-{n}", fenced(SAFE))
    panelists.answer("panel-gemini-1", fenced(UNSAFE))
    panelists.answer("panel-agy-1", fenced({**UNSAFE, "risk": "low"}))
    r = _run("--claude", "2", "--gemini", "1", "--agy", "1")
    assert r.returncode == 10, r.stdout + r.stderr
    fields = _fields(r.stdout)
    assert fields["verdict"] == ('FIELD verdict disagree claude="safe"x2 gemini="unsafe"x1 '
                                 'agy="unsafe"x1')
    assert fields["risk"] == 'FIELD risk disagree claude="low"x2 gemini="high"x1 agy="low"x1'
    assert "verdict=review" in _lines(r.stdout, "PANEL")[0]


def test_a_family_split_within_itself_is_named(panelists):
    panelists.answer("panel-claude-1", fenced(SAFE))
    panelists.answer("panel-claude-2", fenced({**SAFE, "risk": "medium"}))
    panelists.answer("panel-gemini-1", fenced(SAFE))
    r = _run("--claude", "2", "--gemini", "1")
    assert r.returncode == 10, r.stdout + r.stderr
    fields = _fields(r.stdout)
    assert fields["risk"] == ('FIELD risk split-within split=claude claude="low"x1,"medium"x1 '
                              'gemini="low"x1')
    assert fields["verdict"] == 'FIELD verdict agree value="safe" claude=2/2 gemini=1/1'


def test_an_invalid_answer_gets_one_follow_up_that_fixes_it(panelists):
    panelists.answer("panel-claude-1", fenced(SAFE))
    panelists.answer("panel-gemini-1", fenced({"verdict": "maybe", "risk": "low"}),
                     fenced(SAFE, before="Corrected."))
    r = _run()
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    (said,) = _lines(r.stdout, "ANSWER")
    assert said == (f"ANSWER panel-gemini-1 invalid attempt={run_id}:panel-gemini-1:1 errors=3 "
                    "followup=yes")
    assert "PANELIST panel-gemini-1 executor=gemini" in r.stdout
    assert "valid=yes attempts=2" in _lines(r.stdout, "PANELIST")[1]
    _, _, attempts, events = _ledger(run_id)
    first, second = [a for a in attempts if a["packet_id"] == "panel-gemini-1"]
    assert second["predecessor"] == first["id"] and second["continue_from"] == first["state_dir"]
    assert any(e["kind"] == "request" and "followup panel-gemini-1" in e["cause"]
               for e in events)
    _, two = calls(panelists.folder / "gemini.jsonl")
    assert "--resume" in two["argv"]
    asked = two["argv"][two["argv"].index("-p") + 1]
    assert asked.startswith("Your answer does not pass the answer contract's JSON Schema:")
    assert "- $.verdict: 'maybe' is not one of ['safe', 'unsafe', 'unsure']" in asked
    assert len(calls(panelists.folder / "claude.jsonl")) == 1   # a valid answer: no follow-up


def test_an_answer_that_stays_invalid_counts_as_invalid(panelists):
    panelists.answer("panel-claude-1", fenced(SAFE))
    panelists.answer("panel-gemini-1", "I think it is safe, having read all three files.",
                     "Still no JSON here, sorry: it is safe.")
    r = _run()
    assert r.returncode == 10, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    assert "valid=1 invalid=1" in _lines(r.stdout, "PANEL")[0]
    gemini = _lines(r.stdout, "PANELIST")[1]
    assert "valid=no attempts=2" in gemini
    assert 'error="no JSON document: no ```json block, and the result is not JSON"' in gemini
    errors = Path(gemini.split("errors=")[1].split()[0])
    assert errors.read_text().startswith("no JSON document")
    # only the valid answer is compared
    assert _fields(r.stdout)["verdict"] == 'FIELD verdict agree value="safe" claude=1/1'
    _, _, attempts, _ = _ledger(run_id)
    assert [a["packet_id"] for a in attempts].count("panel-gemini-1") == 2  # one follow-up only


def test_json_names_panelists_attempts_evidence_and_groups(panelists):
    panelists.answer("panel-claude-1", fenced(SAFE))
    panelists.answer("panel-agy-1", fenced(UNSAFE))
    r = _run("--claude", "1", "--agy", "1", "--json")
    assert r.returncode == 10, r.stdout + r.stderr
    doc = json.loads(r.stdout)   # the document alone on stdout
    assert set(doc) == {"run", "status", "verdict", "exit_code", "counts", "question",
                        "schema", "evidence", "panelists", "fields"}
    assert doc["exit_code"] == 10 and doc["verdict"] == "review"
    assert doc["counts"] == {"panelists": 2, "valid": 2, "invalid": 0, "fields": 3, "agree": 0,
                             "disagree": 3, "split-within": 0, "missing": 0}
    claude, agy = doc["panelists"]
    assert (claude["id"], claude["family"], claude["executor"]) == ("panel-claude-1", "claude",
                                                                    "claude")
    assert agy["executor"] == "agy" and agy["valid"] and agy["answer"] == UNSAFE
    assert [a["id"] for a in claude["attempts"]] == [f"{doc['run']}:panel-claude-1:1"]
    assert json.loads(Path(claude["evidence"]["answer"]).read_text()) == SAFE
    assert Path(claude["evidence"]["results"][0]).read_text().startswith("I read the code")
    record = json.loads(Path(claude["evidence"]["record"]).read_text())
    assert record["valid"] and record["attempts"][0]["result"] == claude["attempts"][0]["result"]
    verdict = doc["fields"][0]
    assert verdict["field"] == "verdict" and verdict["verdict"] == "disagree"
    assert [(g["value"], g["panelists"]) for g in verdict["groups"]] == [
        ("safe", ["panel-claude-1"]), ("unsafe", ["panel-agy-1"])]
    assert verdict["families"]["agy"] == [{"value": "unsafe", "absent": False,
                                          "panelists": ["panel-agy-1"], "families": {"agy": 1}}]
    assert json.loads((Path(doc["evidence"]) / "crosscheck.json").read_text()) == doc
    again = prun("panel", "--run", doc["run"], "--json")
    assert again.returncode == 10 and json.loads(again.stdout) == doc


def test_a_bad_schema_is_refused_before_anything_runs(panelists, tmp_path):
    bad_json = tmp_path / "bad.schema.json"
    bad_json.write_text('{"type": "object",')
    not_schema = tmp_path / "wrong.schema.json"
    not_schema.write_text('{"type": "objekt"}')
    for schema, said in ((bad_json, "the schema is not valid JSON"),
                         (not_schema, "not a valid JSON Schema at type")):
        r = prun("panel", QUESTION, "--schema", str(schema))
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stdout == "" and len(r.stderr.splitlines()) == 1 and said in r.stderr
    with Ledger.open() as led:
        assert led.runs() == []
    assert calls(panelists.folder / "claude.jsonl") == []


def test_a_panel_of_nobody_and_a_missing_question_are_refused(panelists, tmp_path):
    r = prun("panel", QUESTION, "--schema", SCHEMA, "--claude", "0")
    assert r.returncode == 2 and r.stderr.strip() == (
        "prun: the panel has no panelists (give --claude N, --gemini M or --agy K of 1 or more)")
    r = prun("panel", str(tmp_path / "nope.md"), "--schema", SCHEMA)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "no such question" in r.stderr
    r = prun("panel", QUESTION)
    assert r.returncode == 2 and "--schema" in r.stderr
    with Ledger.open() as led:
        assert led.runs() == []


def test_a_panelist_that_times_out_gets_no_follow_up_and_counts_invalid(panelists,
                                                                        monkeypatch):
    panelists.answer("panel-claude-1", fenced(SAFE))
    monkeypatch.setenv("FAKE_GEMINI_SCENARIO", "hang")
    r = _run("--timeout", "1")
    assert r.returncode == 10, r.stdout + r.stderr
    assert "UNIT panel-gemini-1 timeout" in r.stdout
    gemini = _lines(r.stdout, "PANELIST")[1]
    assert "valid=no attempts=1" in gemini and 'error="the attempt did not succeed (timeout' \
        in gemini
    assert _lines(r.stdout, "ANSWER") == []


def test_the_run_deadline_ends_the_panel_with_124(panelists, monkeypatch):
    panelists.answer("panel-claude-1", fenced(SAFE))
    monkeypatch.setenv("FAKE_GEMINI_SCENARIO", "hang")
    r = _run("--deadline", "2s", "--json")
    assert r.returncode == 124, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "timeout" and doc["exit_code"] == 124
    assert [p["valid"] for p in doc["panelists"]] == [True, False]


def test_a_detached_panel_follows_up_in_the_background_and_is_cross_checked_later(panelists):
    panelists.answer("panel-claude-1", fenced(SAFE))
    panelists.answer("panel-gemini-1", fenced({"verdict": "safe"}), fenced(SAFE))
    r = _run("--detach")
    assert r.returncode == 0, r.stdout + r.stderr
    (line,) = r.stdout.splitlines()
    run_id = line.split()[1]
    assert line == f"RUN {run_id}"
    waited = prun("wait", run_id, "--timeout", "60")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    shown = prun("panel", "--run", run_id)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.startswith(f"PANEL run={run_id} status=succeeded panelists=2 valid=2 ")
    _, _, attempts, _ = _ledger(run_id)
    assert [a["packet_id"] for a in attempts].count("panel-gemini-1") == 2
    assert _ledger(run_id)[0]["supervisor_pid"] is None


def test_run_names_a_panel_run(panelists, repo):
    plan = repo / "plan.yaml"
    plan.write_text("packets:\n  - id: job\n    executor: command\n    command: [echo, a result "
                    "long enough to count]\n    prompt: do it\n")
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    shown = prun("panel", "--run", run_id)
    assert shown.returncode == 2 and f"run {run_id} is not a panel" in shown.stderr
    both = prun("panel", QUESTION, "--schema", SCHEMA, "--run", run_id)
    assert both.returncode == 2 and len(both.stderr.splitlines()) == 1
    assert prun("panel", "--run", "nope").returncode == 2
