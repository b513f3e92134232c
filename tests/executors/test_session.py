"""The session executor (the coordinator's own subagent) and `prun receipt`."""

from __future__ import annotations

import json
import shlex
import threading

import pytest

from helpers import prun

from .conftest import Unit


@pytest.fixture
def session_unit(tmp_path):
    return Unit(tmp_path, "session")


def lines(proc) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        out.setdefault(key, []).append(value)
    return out


def test_dispatch_hands_off_and_launches_nothing(session_unit):
    p = session_unit.dispatch()
    assert p.returncode == 0, p.stderr
    keys = [line.split(" ", 1)[0] for line in p.stdout.splitlines()]
    assert keys == ["STATE-DIR", "HANDOFF", "PROMPT-FILE", "HANDOFF-FILE", "RESULT-FILE",
                    "WORKSPACE", "RECEIPT-CMD"]
    got = lines(p)
    sd = session_unit.state
    assert got["HANDOFF"] == ["executor=session unit=u1 model=sonnet mode=accept-edits"]
    assert got["PROMPT-FILE"] == [str(sd / "prompt")]
    assert got["RESULT-FILE"] == [str(session_unit.result)]
    assert got["WORKSPACE"] == [str(sd / "work")] and (sd / "work").is_dir()
    assert shlex.split(got["RECEIPT-CMD"][0]) == ["prun", "receipt", str(sd), "--attempt-id",
                                                  "<AGENT-ID>"]
    unit = json.loads((sd / "unit.json").read_text())
    assert unit["executor"] == "session" and unit["workspace"] == str(sd / "work")
    # no process: no pid, no stream, no worker, not finished, no result yet
    for name in ("dispatch-pid", "tail", "stderr", "outcome.json", "receipt"):
        assert not (sd / name).exists(), name
    assert not session_unit.result.exists()
    handoff = (sd / "handoff.md").read_text()
    assert handoff.startswith("Say hello and give the answer.")
    assert str(session_unit.result) in handoff and "Never run git commit" in handoff


def test_plan_mode_extra_dirs_and_model(session_unit, tmp_path):
    extra = tmp_path / "snap"
    extra.mkdir()
    p = session_unit.dispatch("--mode", "plan", "--add-dir", str(extra), "--model", "haiku",
                              "--route-reason", "needs session tools: Sonnet in-session")
    assert p.returncode == 0, p.stderr
    got = lines(p)
    assert got["HANDOFF"] == ["executor=session unit=u1 model=haiku mode=plan"]
    assert got["ADD-DIR"] == [str(extra.resolve())]
    assert "Read-only" in (session_unit.state / "handoff.md").read_text()
    unit = json.loads((session_unit.state / "unit.json").read_text())
    assert unit["route_reason"] == "needs session tools: Sonnet in-session"


def test_session_units_cannot_resume(session_unit, tmp_path):
    p = session_unit.dispatch("--continue-from", str(tmp_path))
    assert p.returncode == 2 and p.stdout == "" and "cannot resume" in p.stderr


def test_receipt_is_attached_once(session_unit):
    session_unit.dispatch()
    sd = str(session_unit.state)
    p = prun("receipt", sd, "--attempt-id", "agent-7f3a")
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"RECEIPT {sd} attempt-id=agent-7f3a\n"
    assert (session_unit.state / "receipt").read_text() == "agent-7f3a\n"
    assert prun("receipt", sd, "--attempt-id", "agent-7f3a").returncode == 0  # idempotent
    p = prun("receipt", sd, "--attempt-id", "agent-other")
    assert p.returncode == 2 and "already has receipt agent-7f3a" in p.stderr
    assert (session_unit.state / "receipt").read_text() == "agent-7f3a\n"


def test_racing_receipts_keep_exactly_one(session_unit):
    session_unit.dispatch()
    sd = str(session_unit.state)
    results = {}

    def give(i):
        results[i] = prun("receipt", sd, "--attempt-id", f"agent-{i}").returncode

    threads = [threading.Thread(target=give, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results.values()) == [0, 2, 2, 2]
    kept = (session_unit.state / "receipt").read_text().strip()
    assert kept in {f"agent-{i}" for i in range(4)}


@pytest.mark.parametrize("attempt", ["", "   ", "two\nlines"])
def test_receipt_needs_a_nonempty_identifier(session_unit, attempt):
    session_unit.dispatch()
    p = prun("receipt", str(session_unit.state), "--attempt-id", attempt)
    assert p.returncode == 2 and "not dispatched" in p.stderr
    assert not (session_unit.state / "receipt").exists()


def test_receipt_refuses_process_units_and_non_state_dirs(tmp_path, fake_claude):
    unit = Unit(tmp_path, "claude")
    assert unit.dispatch().returncode == 0
    p = prun("receipt", str(unit.state), "--attempt-id", "a1")
    assert p.returncode == 2 and "not a session unit" in p.stderr
    p = prun("receipt", str(tmp_path / "nowhere"), "--attempt-id", "a1")
    assert p.returncode == 2 and "not a state dir" in p.stderr


@pytest.mark.parametrize("extra", [[], ["--mode", "plan"], ["--bogus-flag"],
                                   ["--prompt-file", "/nonexistent"]])
def test_codex_is_refused_with_one_line_whatever_the_flags(extra):
    p = prun("dispatch", "--executor", "codex", *extra)
    assert p.returncode == 2 and p.stdout == ""
    (line,) = p.stderr.strip().splitlines()
    assert "codex" in line and "/vet" in line
    p = prun("route", "--executor=codex", *extra[:0])
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
