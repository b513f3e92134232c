"""A unit's work judged inside `prun run` (prun.run.verify): its acceptance check runs as it
succeeds and is recorded so that `prun reconcile` does not run it again, and with
`followup: auto` prun starts the follow-up itself when the check fails or a claim is
unverified. Real runs of command units and the fake Claude Code CLI, in real git."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from helpers import FAKES, make_fake_cli, prun
from prun.ledger import Ledger

PY = sys.executable
FILE = "out/fix/a.txt"
# writes "bad" the first time, "good" once it finds its earlier edit (a follow-up, same clone)
FIXES_ON_SECOND_TURN = (
    "import os\n"
    f"os.makedirs('out/fix', exist_ok=True); good = os.path.exists({FILE!r})\n"
    f"open({FILE!r}, 'w').write('good' if good else 'bad')\n"
    "print('the unit wrote its file as asked')")
CHECK = [PY, "-c", f"import sys; t = open({FILE!r}).read(); print('CONTENT', t); "
         "sys.exit(t != 'good')"]


def unit(**fields) -> dict:
    return {"id": "fix", "kind": "code", "executor": "command", "prompt": "write the file",
            "owns": ["out/fix/**"], "command": [PY, "-c", FIXES_ON_SECOND_TURN],
            "accept": CHECK, **fields}


def run(repo: Path, packets: list[dict]) -> tuple[str, str]:
    (repo / "plan.yaml").write_text(json.dumps({"packets": packets}))
    r = prun("run", "plan.yaml", cwd=repo, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()[1], r.stdout


def ledger_of(run_id: str) -> tuple[list[dict], list[dict]]:
    with Ledger.open() as led:
        return ([dict(a) for a in led.attempts(run_id)],
                [dict(e) for e in led.events(run_id) if e["kind"] == "followup"])


def reconcile(repo: Path) -> tuple[list[str], dict]:
    r = prun("reconcile", cwd=repo, timeout=120)
    (p, *_) = json.loads(prun("reconcile", "--json", cwd=repo, timeout=120).stdout)["packets"]
    return r.stdout.splitlines(), p


def test_a_failed_check_gets_one_automatic_follow_up_that_fixes_it(repo):
    run_id, _ = run(repo, [unit(followup="auto")])
    (first, second), followups = ledger_of(run_id)
    assert first["accept_status"] == "failed" and second["accept_status"] == "passed"
    assert second["predecessor"] == first["id"] and second["workspace"] == first["workspace"]
    assert [(e["cause"], e["status"], json.loads(e["data"])["turn"]) for e in followups] == [
        ("followup: auto", "followup", 1)]
    run_dir = repo / ".prun" / "runs" / run_id
    asked = (run_dir / "prompts" / "fix.2.md").read_text()
    assert "CONTENT bad" in asked and str(run_dir / "accept" / "fix.1.log") in asked

    # reconcile judges the follow-up with the check the run recorded: it does not run it again
    log = run_dir / "accept" / "fix.2.log"
    log.unlink()
    lines, p = reconcile(repo)
    assert lines[0] == "ACCEPTED fix files=1 accept=passed", lines
    assert p["attempt"] == second["id"] and p["accept"]["log"] == str(log)
    assert not log.exists()


def test_followup_max_two_and_a_check_that_never_passes_stop_after_two(repo):
    never = [PY, "-c", "import sys; print('STILL BROKEN'); sys.exit(4)"]
    run_id, _ = run(repo, [unit(followup="auto", followup_max=2, accept=never)])
    attempts, followups = ledger_of(run_id)
    assert [a["accept_status"] for a in attempts] == ["failed"] * 3
    assert [json.loads(e["data"])["turn"] for e in followups] == [1, 2]
    assert [a["predecessor"] for a in attempts] == [None, attempts[0]["id"], attempts[1]["id"]]
    lines, p = reconcile(repo)
    assert lines[0].startswith("REJECTED fix reason=accept-failed log="), lines
    assert p["attempt"] == attempts[2]["id"]


def test_no_follow_up_without_followup_auto_and_the_failure_is_told(repo):
    run_id, out = run(repo, [unit()])
    attempts, followups = ledger_of(run_id)
    assert [a["accept_status"] for a in attempts] == ["failed"] and followups == []
    log = repo / ".prun" / "runs" / run_id / "accept" / "fix.1.log"
    assert f'UNIT fix accept-failed attempt={run_id}:fix:1' in out, out
    assert "accept=failed" in prun("status", run_id, cwd=repo).stdout
    woke = prun("wait", run_id, cwd=repo, timeout=60)
    assert woke.returncode == 0, woke.stdout + woke.stderr   # the run's end decides the code
    assert (f'EVENT {woke.stdout.split()[1]} failed packet=fix status=accept-failed '
            f'cause="its acceptance check failed (exit 1); its output: {log}"'
            in woke.stdout), woke.stdout
    lines, _ = reconcile(repo)
    assert lines[0] == f"REJECTED fix reason=accept-failed log={log}"


WRITE = "mkdir -p out/core && printf B > out/core/x.txt"
UNRUN = """## Changes

- `out/core/x.txt`

## Verification

Ran `python3 -c pass`: all pass.
"""

HONEST = """## Changes

- `out/core/x.txt`

## Verification

Ran `python3 -c pass`: it exits 0.
"""


def test_an_unverified_claim_gets_an_automatic_follow_up_that_resumes(repo, tmp_path, monkeypatch):
    path = make_fake_cli(tmp_path / "bin", "claude", FAKES / "fake_claude.py")
    monkeypatch.setenv("PRUN_CLAUDE_BIN", str(path))
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "claude-home"))
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(tmp_path / "claude.jsonl"))
    monkeypatch.setenv("FAKE_CLAUDE_RESPONSE", UNRUN)
    monkeypatch.setenv("FAKE_CLAUDE_IF", json.dumps({
        "Rewrite the core.": {"FAKE_CLAUDE_RUN": json.dumps([WRITE])},
        "is claimed under Verification": {"FAKE_CLAUDE_RUN": json.dumps(["python3 -c pass"]),
                                          "FAKE_CLAUDE_RESPONSE": HONEST}}))
    run_id, _ = run(repo, [{"id": "core", "kind": "code", "executor": "claude",
                            "owns": ["out/core/**"], "prompt": "Rewrite the core.",
                            "followup": "auto"}])
    (first, second), followups = ledger_of(run_id)
    assert second["predecessor"] == first["id"] and second["continue_from"]   # resumed
    assert json.loads(followups[0]["data"])["reasons"] == ["unverified-claim"]
    calls = [json.loads(line) for line in (tmp_path / "claude.jsonl").read_text().splitlines()]
    assert "`python3 -c pass` is claimed under Verification" in calls[1]["argv"][
        calls[1]["argv"].index("-p") + 1]
    lines, _ = reconcile(repo)
    assert lines[0] == "ACCEPTED core files=1", lines


def test_a_dependent_of_a_unit_whose_check_failed_in_the_run_is_blocked(repo):
    (repo / "plan.yaml").write_text(json.dumps({"packets": [
        unit(), {"id": "next", "kind": "code", "executor": "command", "after": ["fix"],
                 "prompt": "build on it", "owns": ["out/next/**"],
                 "command": [PY, "-c", "print('the dependent ran, which it must not')"]}]}))
    r = prun("run", "plan.yaml", cwd=repo, timeout=180)
    assert r.returncode != 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    attempts, _ = ledger_of(run_id)
    (fix,) = [a for a in attempts if a["packet_id"] == "fix"]
    assert fix["accept_status"] == "failed"
    blocked = [a for a in attempts if a["packet_id"] == "next"]
    assert [a["reason"] for a in blocked] == ["blocked"], [a["error"] for a in blocked]
    assert "fix was rejected (reason=accept-failed log=" in blocked[0]["error"]
