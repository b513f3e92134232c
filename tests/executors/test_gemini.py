"""The gemini executor: argv, stream, judgement and quota, through `prun dispatch` and a fake."""

from __future__ import annotations

import json
import os
import time

import pytest

from helpers import calls
from prun.executors.gemini import Gemini, GeminiReader


def argv(log) -> list[str]:
    return calls(log)[-1]["argv"]


def test_success_concatenates_the_deltas(gemini_unit, fake_gemini):
    p = gemini_unit.dispatch()
    assert p.returncode == 0, p.stderr
    assert gemini_unit.result.read_text() == "Hello from the fake Gemini. The answer is 42."
    out = gemini_unit.outcome
    assert out["outcome"] == "succeeded" and out["backend_status"] == "success"
    assert (gemini_unit.state / "conversation-id").read_text().strip() == out["session_id"]
    (call,) = calls(fake_gemini)
    assert call["stdin_closed"]
    a = call["argv"]
    assert a[:4] == ["-p", "Say hello and give the answer.\n", "--output-format", "stream-json"]
    assert a[a.index("-m") + 1] == "gemini-3.8-flash"  # always named: no classifier call
    assert "--yolo" in a and "--approval-mode" not in a
    # trust and no-relaunch are set for the child unless the caller chose
    assert call["env"]["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert call["env"]["GEMINI_CLI_NO_RELAUNCH"] == "true"


def test_caller_trust_setting_is_kept_and_untrusted_is_a_startup_refusal(gemini_unit):
    p = gemini_unit.dispatch(env={"GEMINI_CLI_TRUST_WORKSPACE": "false"})
    assert p.returncode == 1
    out = gemini_unit.outcome
    assert out["reason"] == "startup-refused" and out["worker_exit"] == 55
    assert "not trusted" in out["error"]


def test_model_plan_mode_extra_dirs(gemini_unit, fake_gemini, tmp_path):
    extra = tmp_path / "snap"
    extra.mkdir()
    p = gemini_unit.dispatch("--mode", "plan", "--model", "gemini-3.1-pro-preview",
                             "--add-dir", str(extra), "--effort", "high")
    assert p.returncode == 0, p.stderr
    a = argv(fake_gemini)
    assert a[a.index("-m") + 1] == "gemini-3.1-pro-preview"
    assert a[a.index("--approval-mode") + 1] == "plan" and "--yolo" not in a
    assert a[a.index("--include-directories") + 1] == str(extra.resolve())
    assert "--effort" not in a  # gemini has none: dropped, and unit.json says so
    assert json.loads((gemini_unit.state / "unit.json").read_text())["effort"] is None


def test_model_from_environment(gemini_unit, fake_gemini):
    gemini_unit.dispatch(env={"PRUN_GEMINI_MODEL": "gemini-3.5-flash-lite"})
    a = argv(fake_gemini)
    assert a[a.index("-m") + 1] == "gemini-3.5-flash-lite"


def test_resume_follow_up(gemini_unit, fake_gemini, tmp_path, monkeypatch):
    shared = tmp_path / "clone"  # gemini resumes only from the same working folder
    shared.mkdir()
    monkeypatch.setenv("PRUN_SCRATCH_CWD", str(shared))
    assert gemini_unit.dispatch("--mode", "accept-edits").returncode == 0
    first = gemini_unit.state
    session = (first / "conversation-id").read_text().strip()
    p = gemini_unit.dispatch("--mode", "accept-edits", "--continue-from", str(first))
    assert p.returncode == 0, p.stderr
    assert argv(fake_gemini)[argv(fake_gemini).index("--resume") + 1] == session
    assert gemini_unit.result.read_text().startswith(f"Resumed {session} with 1 earlier turn")


def test_a_follow_up_resumes_in_the_earlier_scratch_dir(gemini_unit, fake_gemini):
    assert gemini_unit.dispatch().returncode == 0
    first = gemini_unit.state
    session = (first / "conversation-id").read_text().strip()
    p = gemini_unit.dispatch("--continue-from", str(first))   # no folder given
    assert p.returncode == 0, p.stderr
    assert calls(fake_gemini)[-1]["cwd"] == str(first / "work")
    assert gemini_unit.result.read_text().startswith(f"Resumed {session} with 1 earlier turn")


def test_resume_of_an_unknown_session_is_exit_42(gemini_unit, tmp_path):
    old = tmp_path / "old"
    old.mkdir()
    (old / "conversation-id").write_text("deadbeef-0000\n")
    p = gemini_unit.dispatch("--continue-from", str(old))
    assert p.returncode == 1
    assert gemini_unit.outcome["reason"] == "resume-refused"
    assert "resume" in gemini_unit.outcome["error"]


def test_error_status_and_exit_244(gemini_unit):
    p = gemini_unit.dispatch(env={"FAKE_GEMINI_SCENARIO": "error_status"})
    assert p.returncode == 1
    out = gemini_unit.outcome
    assert out["reason"] == "exit-nonzero" and out["worker_exit"] == 244
    assert "An internal error has occurred" in out["error"] and out["quota"] is None
    assert gemini_unit.result.read_text().startswith("FALLBACK reason=exit-nonzero")


def test_nonzero_exit(gemini_unit):
    p = gemini_unit.dispatch(env={"FAKE_GEMINI_SCENARIO": "nonzero_exit"})
    assert p.returncode == 1 and gemini_unit.outcome["reason"] == "exit-nonzero"
    assert "unexpected failure" in gemini_unit.result.read_text()


def test_exit_zero_without_result_is_a_failure(gemini_unit):
    p = gemini_unit.dispatch(env={"FAKE_GEMINI_SCENARIO": "no_result"})
    assert p.returncode == 1 and gemini_unit.outcome["reason"] == "no-result-event"
    assert gemini_unit.outcome["worker_exit"] == 0


def test_retryable_quota_gives_a_reset_time(gemini_unit):
    before = time.time()
    p = gemini_unit.dispatch(env={"FAKE_GEMINI_SCENARIO": "quota"})
    assert p.returncode == 1
    q = gemini_unit.outcome["quota"]
    assert q["group"] == "gemini" and "exceeded your current quota" in q["message"]
    from datetime import datetime

    resets = datetime.fromisoformat(q["resets_at"]).timestamp()
    assert before + 6 <= resets <= time.time() + 8  # "Please retry in 7s."


def test_daily_quota_has_no_reset_time(gemini_unit):
    p = gemini_unit.dispatch(env={"FAKE_GEMINI_SCENARIO": "daily_quota"})
    assert p.returncode == 1
    q = gemini_unit.outcome["quota"]
    assert q["group"] == "gemini" and q["resets_at"] is None and "daily quota" in q["message"]


def test_tool_errors_are_recorded_though_the_run_succeeds(gemini_unit):
    p = gemini_unit.dispatch("--mode", "plan", env={"FAKE_GEMINI_SCENARIO": "tool_use"})
    assert p.returncode == 0
    out = gemini_unit.outcome
    assert out["tool_uses"] == 1 and out["tool_errors"] == 1
    assert out["denials"][0]["by"] == "tool_not_registered"
    assert out["denials"][0]["tool"] == "write_file"


def test_yolo_lets_the_tool_run(gemini_unit):
    p = gemini_unit.dispatch(env={"FAKE_GEMINI_SCENARIO": "tool_use"})
    assert p.returncode == 0
    assert gemini_unit.outcome["denials"] == []
    assert (gemini_unit.state / "work" / "hello.txt").exists()


def test_hang_with_relaunch_ends_the_whole_group(gemini_unit, tmp_path):
    """With the relaunch, SIGTERM to the parent alone stops nothing: the group must go."""
    pidfile = tmp_path / "child.pid"
    p = gemini_unit.dispatch("--timeout", "1", env={
        "FAKE_GEMINI_SCENARIO": "hang", "GEMINI_CLI_NO_RELAUNCH": "false",
        "FAKE_GEMINI_PIDFILE": str(pidfile), "PRUN_SANDBOX": "off"})  # pids of the host
    assert p.returncode == 124
    assert gemini_unit.result.read_text().startswith("FALLBACK reason=timeout")
    child = int(pidfile.read_text())
    worker = json.loads((gemini_unit.state / "unit.json").read_text())["worker"]["pid"]
    assert child != worker  # the work ran in a relaunched child ...
    assert not _alive(child)  # ... and it is gone too


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


@pytest.mark.parametrize("code,reason", [(41, "startup-refused"), (42, "startup-refused"),
                                         (55, "startup-refused"), (173, "exit-nonzero"),
                                         (244, "exit-nonzero"), (0, "no-result-event")])
def test_judge_exit_codes(code, reason):
    s = GeminiReader().finish("")
    assert Gemini().judge(code, s).reason == reason


def test_reader_on_reference_lines():
    r = GeminiReader()
    for obj in [
        {"type": "init", "timestamp": "t", "session_id": "a0466fcf", "model": "auto"},
        {"type": "message", "timestamp": "t", "role": "user", "content": "Say hello"},
        {"type": "message", "role": "assistant", "content": "Hello from the ", "delta": True},
        {"type": "message", "role": "assistant", "content": "mock LLM.", "delta": True},
        {"type": "result", "timestamp": "t", "status": "success", "stats": {"total_tokens": 1}},
    ]:
        r.feed(json.dumps(obj))
    s = r.finish("")
    assert s.response == "Hello from the mock LLM." and s.session_id == "a0466fcf"
    assert Gemini().judge(0, s).ok
    assert not Gemini().judge(173, s).ok  # both signals must agree
