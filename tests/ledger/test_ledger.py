"""The ledger: schema, writers, concurrent processes, standalone dispatch records."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import prun
from prun.ledger import MIGRATIONS, Ledger, Status

WRITER = textwrap.dedent("""
    import sys
    from prun.ledger import Ledger, Status
    n = sys.argv[1]
    with Ledger.open() as led:
        led.record_attempt(f"w{n}", "test writer", packet_id=f"p{n}", executor="command")
        for s in (Status.DISPATCHED, Status.RUNNING, Status.SUCCEEDED):
            led.update_attempt(f"w{n}", "step", status=s, receipt=f"pid:{n}")
""")


def test_fifty_concurrent_writers_lose_nothing(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(i)]) for i in range(50)]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [0] * 50
    with Ledger.open() as led:
        rows = led.attempts(None)
        assert len(rows) == 50
        assert {r["status"] for r in rows} == {"succeeded"}
        assert len(led.events()) == 50 * 4
        assert led.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrations_are_applied_once_and_recorded(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger.open(path) as led:
        assert led.schema_version == len(MIGRATIONS)
    with Ledger.open(path) as led:  # reopening applies nothing twice
        assert led.schema_version == len(MIGRATIONS)
    tables = {r[0] for r in sqlite3.connect(path).execute(
        "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"runs", "packets", "attempts", "events", "requests"} <= tables


def test_run_packets_attempts_and_events(tmp_path):
    with Ledger.open() as led:
        led.record_run({"id": "r1", "base": "abc", "repo_root": str(tmp_path)},
                       [{"id": "a", "kind": "read-only", "after": []},
                        {"id": "b", "kind": "code", "after": ["a"]}])
        led.record_attempt("r1:a:1", "queued", run_id="r1", packet_id="a")
        led.update_attempt("r1:a:1", "worker started", status=Status.DISPATCHED, receipt="pid:1")
        assert led.latest_run(tmp_path)["id"] == "r1"
        assert led.find_run("r")["id"] == "r1"
        assert led.find_run("") is None and led.find_run("  ") is None   # never "any run"
        assert [p["id"] for p in led.packets("r1")] == ["a", "b"]
        assert json.loads(led.run("r1")["packet_ids"]) == ["a", "b"]
        assert led.attempts("r1", "a")[0]["receipt"] == "pid:1"
        kinds = [(e["kind"], e["status"]) for e in led.events("r1")]
        assert kinds == [("run-frozen", "running"), ("attempt", "pending"),
                         ("attempt", "dispatched")]


def test_default_location_is_ignored_by_git(tmp_path, monkeypatch):
    monkeypatch.delenv("PRUN_LEDGER")
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    sub = tmp_path / "repo" / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)
    with Ledger.open() as led:
        assert led.path == tmp_path / "repo" / ".prun" / "ledger.sqlite"
    out = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path / "repo",
                         capture_output=True, text=True).stdout
    assert ".prun" not in out


def test_standalone_dispatch_is_recorded(tmp_path):
    prompt = tmp_path / "p.md"
    prompt.write_text("say hello")
    r = prun("dispatch", "--executor", "command", "--command", "echo hello from the unit, a full answer",
             "--prompt-file", str(prompt), "--result-file", str(tmp_path / "r.md"),
             "--unit-id", "u1")
    assert r.returncode == 0, r.stderr
    shown = prun("ledger", "--dispatches", "--json")
    rows = json.loads(shown.stdout)
    assert len(rows) == 1
    row = rows[0]
    assert row["status"] == "succeeded" and row["packet_id"] == "u1"
    assert row["receipt"].startswith("pid:")
    assert row["state_dir"] == r.stdout.split(" ", 1)[1].strip()
    assert row["result_path"] == str(tmp_path / "r.md")


def test_unwritable_ledger_warns_but_dispatch_succeeds(tmp_path):
    prompt = tmp_path / "p.md"
    prompt.write_text("say hello")
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = prun("dispatch", "--executor", "command", "--command", "echo hello from the unit, a full answer",
             "--prompt-file", str(prompt), "--result-file", str(tmp_path / "r.md"),
             "--unit-id", "u1", env={"PRUN_LEDGER": str(blocker / "ledger.sqlite")})
    assert r.returncode == 0
    assert r.stderr.count("warning: the ledger was not updated") == 1
    assert os.path.getsize(tmp_path / "r.md") > 0


def test_a_ledger_written_by_an_earlier_prun_still_loads(tmp_path):
    fixture = Path(__file__).parent / "fixtures" / "ledger-v1.sql"
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(fixture.read_text())
    conn.close()
    with Ledger.open(path) as led:
        assert led.schema_version == len(MIGRATIONS)
        run = led.latest_run()
        assert run["status"] == "succeeded" and run["packet_count"] == 5
        assert {a["status"] for a in led.attempts(run["id"])} == {"succeeded"}
        assert all(a["receipt"].startswith("pid:") for a in led.attempts(run["id"]))
        assert led.events(run["id"])[0]["kind"] == "run-frozen"


def test_standalone_session_receipt_is_recorded(tmp_path):
    prompt = tmp_path / "p.md"
    prompt.write_text("read the mail")
    r = prun("dispatch", "--executor", "session", "--prompt-file", str(prompt),
             "--result-file", str(tmp_path / "r.md"), "--unit-id", "mail")
    assert r.returncode == 0, r.stderr
    state = r.stdout.splitlines()[0].split(" ", 1)[1]
    assert prun("receipt", state, "--attempt-id", "agent-7").returncode == 0
    (row,) = json.loads(prun("ledger", "--dispatches", "--json").stdout)
    assert row["status"] == "dispatched" and row["receipt"] == "agent-7"


def test_decisions_are_kept_with_who_when_and_why_and_the_latest_on_an_attempt_counts(tmp_path):
    with Ledger.open(tmp_path / "l.sqlite") as led:
        led.record_decision("r1", "a", "r1:a:1", "include", "ada")
        at = led.record_decision("r1", "a", "r1:a:1", "reject", "bob", "too wide")
        led.record_decision("r1", "b", "r1:b:1", "accept", "ada")
        led.record_decision("r2", "a", "r2:a:1", "accept", "ada")
        assert [r["decision"] for r in led.decisions("r1")] == ["include", "reject", "accept"]
        current = led.current_decisions("r1", {"a": "r1:a:1", "b": "r1:b:2"})
        assert set(current) == {"a"}                # b's was made on an earlier attempt
        row = current["a"]
        assert (row["decision"], row["who"], row["note"], row["at"]) == ("reject", "bob",
                                                                         "too wide", at)
        events = [e for e in led.events("r1") if e["kind"] == "decision"]
        assert [(e["packet_id"], e["status"], e["cause"]) for e in events] == [
            ("a", "include", "by ada"), ("a", "reject", "by bob"), ("b", "accept", "by ada")]
