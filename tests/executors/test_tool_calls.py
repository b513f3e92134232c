"""Each executor reads the shell commands a worker ran from its own stream (``tool_calls``),
from event lines shaped as the real CLIs print them (reference/agent-cli-streams.md)."""

from __future__ import annotations

import json

from prun.executors import get
from prun.executors.records import ToolCalls


def _stream(tmp_path, events) -> str:
    path = tmp_path / "tail"
    path.write_text("".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events))
    return str(path)


def _claude_tool(tid, name, tool_input):
    return {"type": "assistant", "message": {
        "id": f"msg_{tid}", "type": "message", "role": "assistant", "model": "claude-sonnet-5-5",
        "content": [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}],
        "stop_reason": None}, "parent_tool_use_id": None, "session_id": "s1"}


def _claude_result(tid, text, is_error):
    return {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": tid, "type": "tool_result", "content": text, "is_error": is_error}]},
        "parent_tool_use_id": None, "session_id": "s1",
        "tool_use_result": {"stdout": text, "stderr": "", "interrupted": False}}


CLAUDE_END = {"duration_api_ms": 426, "session_id": "s1", "permission_denials": [
    {"tool_name": "Bash", "tool_use_id": "toolu_3", "tool_input": {"command": "rm -rf /"}}],
    "is_error": False, "num_turns": 3, "subtype": "success", "result": "done", "type": "result"}


def test_claude_reads_bash_commands_and_leaves_out_refused_ones(tmp_path):
    path = _stream(tmp_path, [
        {"type": "system", "subtype": "init", "session_id": "s1", "model": "claude-sonnet-5-5"},
        _claude_tool("toolu_1", "Write", {"file_path": "a.txt", "content": "x"}),
        _claude_tool("toolu_2", "Bash", {"command": "pytest -q", "description": "tests"}),
        _claude_result("toolu_2", "3 passed", False),
        _claude_tool("toolu_4", "Bash", {"command": "false", "description": "fails"}),
        _claude_result("toolu_4", "", True),    # ran and failed: still run
        _claude_tool("toolu_3", "Bash", {"command": "rm -rf /"}),
        {"type": "system", "subtype": "permission_denied", "tool_name": "Bash",
         "tool_use_id": "toolu_3", "message": "This command requires approval"},
        _claude_tool("toolu_5", "Bash", {"command": "git commit -m x"}),
        _claude_result("toolu_5", "prun guard: git commit is refused", True),
        "not json",
        CLAUDE_END])
    assert get("claude").tool_calls(path) == ToolCalls(5, ("pytest -q", "false"))


def test_gemini_reads_run_shell_command_and_leaves_out_unregistered_ones(tmp_path):
    ts = "2026-11-30T13:06:13.673Z"
    path = _stream(tmp_path, [
        {"type": "init", "timestamp": ts, "session_id": "g1", "model": "gemini-3.8-flash"},
        {"type": "tool_use", "timestamp": ts, "tool_name": "write_file", "tool_id": "w1",
         "parameters": {"file_path": "a.txt", "content": "x"}},
        {"type": "tool_result", "timestamp": ts, "tool_id": "w1", "status": "success"},
        {"type": "tool_use", "timestamp": ts, "tool_name": "run_shell_command", "tool_id": "r1",
         "parameters": {"command": "echo hi > f && ls -l f", "description": "write"}},
        {"type": "tool_result", "timestamp": ts, "tool_id": "r1", "status": "success",
         "output": "-rw-r--r-- 1 root root 3 f"},
        {"type": "tool_use", "timestamp": ts, "tool_name": "run_shell_command", "tool_id": "r2",
         "parameters": {"command": "make test"}},
        {"type": "tool_result", "timestamp": ts, "tool_id": "r2", "status": "error",
         "output": "Tool not found", "error": {"type": "tool_not_registered",
                                               "message": "Tool not found"}},
        {"type": "result", "timestamp": ts, "status": "success", "stats": {}}])
    assert get("gemini").tool_calls(path) == ToolCalls(3, ("echo hi > f && ls -l f",))


def test_agy_counts_tool_steps_but_records_no_commands(tmp_path):
    path = _stream(tmp_path, [
        {"event": "init", "conversation_id": "c1"},
        {"event": "step_update", "step_update": {"step_type": "tool", "tool_name": "run_command"}},
        {"event": "step_update", "step_update": {"step_type": "agent_response",
                                                 "text_delta": "done"}},
        {"event": "result", "result": {"conversation_id": "c1", "status": "SUCCESS",
                                       "response": "done"}}])
    assert get("agy").tool_calls(path) == ToolCalls(1, None)


def test_the_command_executor_records_no_tool_calls(tmp_path):
    assert get("command").tool_calls(_stream(tmp_path, ["make test"])) is None


def test_a_stream_that_cannot_be_read_shows_no_tool_call(tmp_path):
    (tmp_path / "real").write_text(json.dumps(_claude_tool("t", "Bash", {"command": "ls"})))
    (tmp_path / "tail").symlink_to(tmp_path / "real")     # never followed
    assert get("claude").tool_calls(str(tmp_path / "tail")) == ToolCalls(0, ())
    assert get("claude").tool_calls(str(tmp_path / "missing")) == ToolCalls(0, ())
