"""The claude executor: argv, stream, judgement and quota, through `prun dispatch` and a fake."""

from __future__ import annotations

import json
import os

import pytest

from helpers import calls
from prun.executors.claude import ClaudeReader


def argv(log) -> list[str]:
    return calls(log)[-1]["argv"]


# argv ------------------------------------------------------------------------------------------

def test_success_publishes_the_result_and_records_the_session(claude_unit, fake_claude):
    p = claude_unit.dispatch()
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [f"STATE-DIR {claude_unit.state}"]
    assert claude_unit.result.read_text() == "Hello from the fake Claude. The answer is 42."
    out = claude_unit.outcome
    assert out["outcome"] == "succeeded" and out["backend_status"] == "success"
    session = (claude_unit.state / "conversation-id").read_text().strip()
    assert session == out["session_id"] and len(session) == 36
    (call,) = calls(fake_claude)
    assert call["stdin_closed"]
    a = call["argv"]
    assert a[:3] == ["-p", "Say hello and give the answer.\n", "--output-format"]
    assert a[a.index("--output-format") + 1] == "stream-json" and "--verbose" in a
    assert a[a.index("--model") + 1] == "sonnet"
    assert a[a.index("--permission-mode") + 1] == "bypassPermissions"
    assert "--resume" not in a and "--add-dir" not in a and "--effort" not in a


def test_model_from_flag_and_environment(claude_unit, fake_claude):
    claude_unit.dispatch("--model", "opus", "--effort", "high")
    a = argv(fake_claude)
    assert a[a.index("--model") + 1] == "opus" and a[a.index("--effort") + 1] == "high"
    claude_unit.dispatch(env={"PRUN_CLAUDE_MODEL": "claude-sonnet-5-5"})
    a = argv(fake_claude)
    assert a[a.index("--model") + 1] == "claude-sonnet-5-5"
    assert json.loads((claude_unit.state / "unit.json").read_text())["model"] == \
        "claude-sonnet-5-5"


def test_bad_effort_is_refused_before_a_state_dir(claude_unit, fake_claude):
    p = claude_unit.dispatch("--effort", "enormous")
    assert p.returncode == 2 and p.stdout == "" and "effort" in p.stderr
    assert calls(fake_claude) == []


def test_plan_mode_and_extra_dirs(claude_unit, fake_claude, tmp_path):
    extra = tmp_path / "snapshot"
    extra.mkdir()
    p = claude_unit.dispatch("--mode", "plan", "--add-dir", str(extra))
    assert p.returncode == 0, p.stderr
    a = argv(fake_claude)
    assert a[a.index("--permission-mode") + 1] == "plan"
    assert a[-2:] == ["--add-dir", str(extra.resolve())]  # variadic: kept last


def test_accept_edits_mode_can_be_narrowed(claude_unit, fake_claude):
    claude_unit.dispatch(env={"PRUN_CLAUDE_PERMISSION_MODE": "acceptEdits"})
    a = argv(fake_claude)
    assert a[a.index("--permission-mode") + 1] == "acceptEdits"
    p = claude_unit.dispatch(env={"PRUN_CLAUDE_PERMISSION_MODE": "yolo"})
    assert p.returncode == 2 and "PRUN_CLAUDE_PERMISSION_MODE" in p.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="claude's root refusal applies to root only")
def test_bypass_as_root_without_is_sandbox_is_refused_up_front(claude_unit, fake_claude):
    p = claude_unit.dispatch(unset=["IS_SANDBOX"])
    assert p.returncode == 2 and p.stdout == ""
    assert "IS_SANDBOX=1" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert calls(fake_claude) == []
    # plan mode needs no bypass, so it runs; so does the narrower edit mode
    p = claude_unit.dispatch("--mode", "plan", unset=["IS_SANDBOX"])
    assert p.returncode == 0, p.stderr
    p = claude_unit.dispatch(unset=["IS_SANDBOX"],
                             env={"PRUN_CLAUDE_PERMISSION_MODE": "acceptEdits"})
    assert p.returncode == 0, p.stderr


def test_resume_follow_up_keeps_the_session(claude_unit, fake_claude):
    assert claude_unit.dispatch().returncode == 0
    first = claude_unit.state
    session = (first / "conversation-id").read_text().strip()
    p = claude_unit.dispatch("--continue-from", str(first))
    assert p.returncode == 0, p.stderr
    a = argv(fake_claude)
    assert a[a.index("--resume") + 1] == session
    assert claude_unit.result.read_text().startswith(f"Resumed {session} with 1 earlier turn")
    assert (claude_unit.state / "conversation-id").read_text().strip() == session


def test_resume_of_an_unknown_session_fails(claude_unit, fake_claude, tmp_path):
    old = tmp_path / "old-state"
    old.mkdir()
    (old / "conversation-id").write_text("11111111-2222-3333-4444-555555555555\n")
    p = claude_unit.dispatch("--continue-from", str(old))
    assert p.returncode == 1
    text = claude_unit.result.read_text()
    assert text.startswith("FALLBACK reason=resume-refused")   # a run starts a fresh attempt
    assert "No conversation found with session ID" in text
    assert not (claude_unit.state / "conversation-id").exists()  # the zero uuid is no session


# judgement -------------------------------------------------------------------------------------

def test_api_error_after_subtype_success_is_a_failure(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "error_status"})
    assert p.returncode == 1
    out = claude_unit.outcome
    assert out["reason"] == "api-error" and out["backend_status"] == "error"
    assert "500 Internal server error" in out["error"] and out["quota"] is None
    assert claude_unit.result.read_text().startswith("FALLBACK reason=api-error")


def test_nonzero_exit_without_stream_is_a_failure(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "nonzero_exit"})
    assert p.returncode == 1
    text = claude_unit.result.read_text()
    assert text.startswith("FALLBACK reason=exit-nonzero")
    assert "something broke before the first request" in text  # stderr tail


def test_no_result_event_is_a_failure(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "no_result"})
    assert p.returncode == 1 and claude_unit.outcome["reason"] == "no-result-event"
    assert "I was about to answer" in claude_unit.result.read_text()  # salvaged text


def test_own_api_timeout_is_a_failure_not_quota(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "timeout_api"})
    assert p.returncode == 1 and claude_unit.outcome["reason"] == "status-error"
    assert claude_unit.outcome["quota"] is None


def test_hang_hits_the_timeout(claude_unit):
    p = claude_unit.dispatch("--timeout", "1", env={"FAKE_CLAUDE_SCENARIO": "hang"})
    assert p.returncode == 124
    assert claude_unit.result.read_text().startswith("FALLBACK reason=timeout")
    assert claude_unit.outcome["worker_exit"] == 143  # claude's own exit on SIGTERM


def test_missing_verbose_would_fail(fake_claude, tmp_path):
    """The fake enforces the real CLI's rule, so the argv test above is meaningful."""
    import subprocess

    p = subprocess.run([os.environ["PRUN_CLAUDE_BIN"], "-p", "x", "--output-format",
                        "stream-json"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "requires --verbose" in p.stderr and p.stdout == ""


# quota -----------------------------------------------------------------------------------------

def test_rate_limit_is_a_quota_hit_without_a_reset(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "rate_limit"})
    assert p.returncode == 1
    q = claude_unit.outcome["quota"]
    assert q["group"] == "claude" and q["resets_at"] is None
    assert "429" in q["message"]


def test_quota_message_with_a_reset_time(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "quota",
                                  "FAKE_CLAUDE_ERROR": "Usage limit reached. Resets at "
                                                       "2026-12-01T03:00:00Z."})
    assert p.returncode == 1
    assert claude_unit.outcome["quota"]["resets_at"] == "2026-12-01T03:00:00+00:00"


# tools, denials, guard -------------------------------------------------------------------------

def test_tool_use_blocks_of_one_message_are_one_turn(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "tool_use"})
    assert p.returncode == 0, p.stderr
    out = claude_unit.outcome
    assert out["tool_uses"] == 1 and out["denials"] == []
    assert (claude_unit.state / "work" / "hello.txt").read_text() == "hi\n"


def test_permission_denial_is_recorded_though_the_run_succeeds(claude_unit):
    p = claude_unit.dispatch("--mode", "plan", env={"FAKE_CLAUDE_SCENARIO": "tool_use"})
    assert p.returncode == 0  # claude exits 0 and says it is done ...
    out = claude_unit.outcome
    assert out["tool_errors"] == 1
    (denial,) = out["denials"]  # ... but the denial is on record, once
    assert denial["tool"] == "Write" and "plan mode" in denial["message"]


def test_guard_refuses_git_commit_and_the_refusal_shows_in_the_tail(claude_unit, tmp_path):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "bash",
                                  "FAKE_CLAUDE_BASH": "git add -A && git commit -m wip"})
    assert p.returncode == 0, p.stderr
    assert "prun guard: refused `git commit`" in claude_unit.tail
    (denial,) = claude_unit.outcome["denials"]
    assert denial["by"] == "prun-guard" and denial["tool"] == "Bash"
    log = (claude_unit.state / "guard.log").read_text()
    assert json.loads(log)["refused"] == "git commit"


def test_guard_lets_ordinary_commands_run(claude_unit):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "bash",
                                  "FAKE_CLAUDE_BASH": "echo ran > proof.txt && git --version"})
    assert p.returncode == 0, p.stderr
    assert claude_unit.outcome["denials"] == []
    assert (claude_unit.state / "work" / "proof.txt").read_text() == "ran\n"


def test_guard_hook_is_in_the_settings(claude_unit, fake_claude):
    claude_unit.dispatch()
    a = argv(fake_claude)
    settings = json.loads(a[a.index("--settings") + 1])
    (entry,) = settings["hooks"]["PreToolUse"]
    assert entry["matcher"] == "Bash"
    assert entry["hooks"][0]["command"].endswith("claude_guard.py")


# the reader on the reference's own lines ---------------------------------------------------------

REFERENCE_429 = [
    {"type": "system", "subtype": "init", "session_id": "d1067748-aaaa", "model": "m"},
    {"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
     "retry_delay_ms": 1225, "error_status": 429, "error": "rate_limit",
     "session_id": "d1067748-aaaa"},
    {"duration_api_ms": 0, "stop_reason": "stop_sequence", "session_id": "d1067748-aaaa",
     "terminal_reason": "api_error", "is_error": True, "num_turns": 1, "subtype": "success",
     "api_error_status": 429, "api_error_type": "rate_limit_error",
     "result": "API Error: Request rejected (429) · rate limit", "type": "result"},
]


def test_reader_trusts_is_error_over_subtype():
    r = ClaudeReader()
    for obj in REFERENCE_429:
        r.feed(json.dumps(obj))
    s = r.finish("")
    assert s.final_seen and s.is_error and s.status == "error" and s.response is None
    assert s.api_error_status == 429 and s.retries == 1 and s.session_id == "d1067748-aaaa"
    from prun.executors.claude import Claude

    assert not Claude().judge(1, s).ok
    assert Claude().quota_hit(s, 1, "").group == "claude"


def test_reader_takes_the_answer_from_result_and_ignores_garbage():
    r = ClaudeReader()
    r.feed("not json")
    r.feed(json.dumps({"type": "assistant", "session_id": "s1",
                       "message": {"id": "m1", "content": [{"type": "text", "text": "a"}]}}))
    r.feed(json.dumps({"is_error": False, "subtype": "success", "result": "the answer",
                       "type": "result", "session_id": "s1"}))
    s = r.finish("")
    assert s.bad_lines == 1 and s.response == "the answer" and s.session_id == "s1"


def test_a_corrupt_stream_line_is_noted_in_the_outcome(claude_unit):
    """Lines that are not JSON objects among good ones: the unit is judged by the good ones,
    and its outcome says how many were skipped, instead of counting them silently."""
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_SCENARIO": "corrupt_line"})
    assert p.returncode == 0, p.stderr
    out = claude_unit.outcome
    assert out["outcome"] == "succeeded"
    assert out["notes"] == ["corrupt-stream: 2 lines of its stream were not a JSON object "
                            "and were skipped"]


def test_a_clean_stream_has_no_note(claude_unit):
    assert claude_unit.dispatch().returncode == 0
    assert claude_unit.outcome["notes"] == []
