"""`prun dispatch --executor agy`, end to end through the real command and a fake agy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import FAKES, calls, make_fake_cli, prun


@pytest.fixture
def unit(tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Summarise the repository layout.\n")
    return {"prompt": prompt, "result": tmp_path / "out" / "result.md"}


def dispatch(unit, *extra, env=None, timeout=60):
    unit["result"].parent.mkdir(exist_ok=True)
    return prun("dispatch", "--executor", "agy", "--prompt-file", str(unit["prompt"]),
                "--result-file", str(unit["result"]), "--unit-id", "u1", *extra,
                env=env, timeout=timeout)


def state_dir(proc) -> Path:
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    assert lines[0].startswith("STATE-DIR /")
    return Path(lines[0].split(" ", 1)[1])


def state_root_empty() -> bool:
    root = Path(os.environ["PRUN_STATE_ROOT"])
    return not root.exists() or not any(root.iterdir())


def argv_of(log) -> list[str]:
    (call,) = calls(log)
    return call["argv"]


# 1. one stdout line, flushed as soon as the state dir exists ------------------------------------

def test_stdout_is_exactly_one_state_dir_line(fake_agy, unit):
    proc = dispatch(unit)
    assert proc.returncode == 0, proc.stderr
    sd = state_dir(proc)
    assert sd.is_absolute() and sd.is_dir()


def test_state_dir_line_arrives_before_the_unit_ends(fake_agy, unit, tmp_path):
    unit["result"].parent.mkdir()
    env = dict(os.environ, FAKE_AGY_SCENARIO="hang")
    p = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", "--prompt-file",
                          str(unit["prompt"]), "--result-file", str(unit["result"]),
                          "--unit-id", "u1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        line = p.stdout.readline()  # returns while the fake agy still hangs
        assert line.startswith("STATE-DIR ")
        assert p.poll() is None
    finally:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    assert out == ""  # nothing else ever reaches stdout
    assert p.returncode == 1
    assert unit["result"].read_text().startswith("FALLBACK reason=cancelled")


# 2. finding agy, stdin, environment, state files ------------------------------------------------

def test_state_files_and_launch(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_PASSTHROUGH": "yes"})
    assert proc.returncode == 0, proc.stderr
    sd = state_dir(proc)
    (call,) = calls(fake_agy)
    assert call["stdin_closed"] is True
    assert call["env"]["FAKE_PASSTHROUGH"] == "yes"
    assert call["argv"][:2] == ["-p", "Summarise the repository layout.\n"]
    assert call["argv"][2:4] == ["--output-format", "stream-json"]
    tail = (sd / "tail").read_text().splitlines()
    assert json.loads(tail[0])["event"] == "init"
    assert json.loads(tail[-1])["event"] == "result"
    assert (sd / "conversation-id").read_text().strip() == json.loads(tail[0])["conversation_id"]
    assert (sd / "dispatch-pid").read_text().strip().isdigit()
    assert (sd / "result-file").read_text().strip() == str(unit["result"])
    assert (sd / "model").read_text().strip() == "gemini-3.8-flash-high"
    assert (sd / "stderr").exists()


def test_agy_found_on_path(tmp_path, unit, monkeypatch):
    bindir = tmp_path / "pathbin"
    make_fake_cli(bindir, "agy", FAKES / "fake_agy.py")
    monkeypatch.delenv("PRUN_AGY_BIN", raising=False)
    proc = dispatch(unit, env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr


def test_agy_missing_gives_fallback(unit, monkeypatch, tmp_path):
    monkeypatch.delenv("PRUN_AGY_BIN", raising=False)
    proc = dispatch(unit, env={"PATH": str(tmp_path / "empty")})
    assert proc.returncode == 1
    state_dir(proc)
    text = unit["result"].read_text()
    assert text.startswith("FALLBACK reason=launch-failed")
    assert "agy not found on PATH" in text


# 3. publishing -----------------------------------------------------------------------------------

def test_result_published_atomically_with_nothing_else_left(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_RESPONSE": "A full answer that is long enough."})
    assert proc.returncode == 0
    assert unit["result"].read_text() == "A full answer that is long enough."
    assert sorted(p.name for p in unit["result"].parent.iterdir()) == ["result.md"]


def test_existing_result_is_refused_and_nothing_is_made(fake_agy, unit):
    unit["result"].parent.mkdir()
    unit["result"].write_text("old")
    proc = dispatch(unit)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "already exists" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert unit["result"].read_text() == "old"
    assert state_root_empty()
    assert calls(fake_agy) == []


def test_worker_written_result_is_kept_and_response_lands_beside(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "writes_result"})
    assert proc.returncode == 0, proc.stderr
    assert unit["result"].read_text().startswith("# Result written by the worker")
    assert (unit["result"].parent / "result.response.md").read_text() == "Done."
    outcome = json.loads((state_dir(proc) / "outcome.json").read_text())
    assert outcome["published"] == "worker"


def test_sibling_name_without_suffix(fake_agy, tmp_path):
    prompt = tmp_path / "p.md"
    prompt.write_text("go")
    result = tmp_path / "notes"
    proc = prun("dispatch", "--prompt-file", str(prompt), "--result-file", str(result),
                "--unit-id", "u2", env={"FAKE_AGY_SCENARIO": "writes_result"})
    assert proc.returncode == 0
    assert (tmp_path / "notes.response").read_text() == "Done."


# 4. model and effort -----------------------------------------------------------------------------

def test_default_model_and_effort(fake_agy, unit):
    dispatch(unit)
    argv = argv_of(fake_agy)
    assert argv[argv.index("--model") + 1] == "gemini-3.8-flash-high"
    assert argv[argv.index("--effort") + 1] == "high"


def test_model_and_effort_from_environment(fake_agy, unit):
    proc = dispatch(unit, env={"ANTIGRAVITY_DISPATCH_MODEL": "gemini-3.1-pro",
                               "ANTIGRAVITY_DISPATCH_EFFORT": "medium"})
    argv = argv_of(fake_agy)
    assert argv[argv.index("--model") + 1] == "gemini-3.1-pro"
    assert argv[argv.index("--effort") + 1] == "medium"
    assert (state_dir(proc) / "model").read_text().strip() == "gemini-3.1-pro"


@pytest.mark.parametrize("model", ["claude-sonnet-4-6", "claude-opus-4-6-thinking",
                                   "gpt-oss-120b-medium"])
def test_no_effort_for_the_claude_and_gpt_group(fake_agy, unit, model):
    proc = dispatch(unit, env={"ANTIGRAVITY_DISPATCH_MODEL": model,
                               "ANTIGRAVITY_DISPATCH_EFFORT": "high"})
    assert proc.returncode == 0, proc.stderr
    argv = argv_of(fake_agy)
    assert "--effort" not in argv
    assert argv[argv.index("--model") + 1] == model


# 5. modes

def test_default_mode_is_accept_edits_in_a_scratch_dir(fake_agy, unit):
    proc = dispatch(unit)
    sd = state_dir(proc)
    (call,) = calls(fake_agy)
    assert "--dangerously-skip-permissions" in call["argv"]
    assert call["cwd"] == str(sd / "work")


def test_caller_workspace_without_mode_is_refused(fake_agy, unit, tmp_path):
    ws = tmp_path / "clone"
    ws.mkdir()
    proc = dispatch(unit, env={"PRUN_SCRATCH_CWD": str(ws)})
    assert proc.returncode == 2 and proc.stdout == ""
    assert "--mode" in proc.stderr
    assert state_root_empty() and calls(fake_agy) == []


def test_add_dir_without_mode_is_refused(fake_agy, unit, tmp_path):
    proc = dispatch(unit, "--add-dir", str(tmp_path))
    assert proc.returncode == 2 and state_root_empty()


def test_caller_workspace_with_mode(fake_agy, unit, tmp_path):
    ws = tmp_path / "clone"
    ws.mkdir()
    proc = dispatch(unit, "--mode", "accept-edits", env={"PRUN_SCRATCH_CWD": str(ws)})
    assert proc.returncode == 0, proc.stderr
    (call,) = calls(fake_agy)
    assert call["cwd"] == str(ws.resolve())
    assert "--dangerously-skip-permissions" in call["argv"]


def test_plan_mode_never_gets_the_skip_flag(fake_agy, unit, tmp_path):
    extra = tmp_path / "extra"      # read-only in plan mode (the sandbox mounts it so)
    extra.mkdir()
    proc = dispatch(unit, "--mode", "plan", "--add-dir", str(extra))
    assert proc.returncode == 0, proc.stderr
    assert "--dangerously-skip-permissions" not in argv_of(fake_agy)


# 6. --add-dir

def test_add_dir_is_repeatable_and_absolute(fake_agy, unit, tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    unit["result"].parent.mkdir()
    proc = prun("dispatch", "--prompt-file", str(unit["prompt"]), "--result-file",
                str(unit["result"]), "--unit-id", "u1", "--mode", "plan", "--add-dir", "a",
                "--add-dir", "b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    argv = argv_of(fake_agy)
    dirs = [argv[i + 1] for i, a in enumerate(argv) if a == "--add-dir"]
    assert dirs == [str((tmp_path / "a").resolve()), str((tmp_path / "b").resolve())]


@pytest.mark.parametrize("bad", ["", "does-not-exist", "file.txt"])
def test_bad_add_dir_is_refused(fake_agy, unit, tmp_path, bad):
    (tmp_path / "file.txt").write_text("x")
    arg = str(tmp_path / bad) if bad else ""
    proc = dispatch(unit, "--mode", "plan", "--add-dir", arg)
    assert proc.returncode == 2 and proc.stdout == "" and state_root_empty()
    assert len(proc.stderr.strip().splitlines()) == 1


# 7. --continue-from

def test_continue_from_resumes_the_recorded_conversation(fake_agy, unit, tmp_path):
    first = dispatch(unit)
    sd = state_dir(first)
    conv = (sd / "conversation-id").read_text().strip()
    second = {"prompt": unit["prompt"], "result": tmp_path / "out" / "follow-up.md"}
    proc = dispatch(second, "--continue-from", str(sd))
    assert proc.returncode == 0, proc.stderr
    argv = calls(fake_agy)[1]["argv"]
    assert argv[argv.index("--conversation") + 1] == conv
    assert "--continue" not in argv


def test_a_follow_up_runs_in_the_earlier_folder_and_mode(fake_agy, unit, tmp_path):
    first = state_dir(dispatch(unit))               # its scratch dir, accept-edits
    second = {"prompt": unit["prompt"], "result": tmp_path / "out" / "follow-up.md"}
    proc = dispatch(second, "--continue-from", str(first))
    assert proc.returncode == 0, proc.stderr
    call = calls(fake_agy)[1]
    assert call["cwd"] == str(first / "work")       # not a scratch dir of its own
    assert not (state_dir(proc) / "work").exists()
    clone = tmp_path / "clone"                      # a caller's folder, read-only there
    clone.mkdir()
    third = {"prompt": unit["prompt"], "result": tmp_path / "out" / "third.md"}
    planned = state_dir(dispatch(third, "--mode", "plan", env={"PRUN_SCRATCH_CWD": str(clone)}))
    fourth = {"prompt": unit["prompt"], "result": tmp_path / "out" / "fourth.md"}
    proc = dispatch(fourth, "--continue-from", str(planned))   # no --mode needed: plan again
    assert proc.returncode == 0, proc.stderr
    call = calls(fake_agy)[3]
    assert call["cwd"] == str(clone.resolve())
    assert "--dangerously-skip-permissions" not in call["argv"]


def test_a_follow_up_given_a_folder_runs_there(fake_agy, unit, tmp_path):
    first = state_dir(dispatch(unit))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    second = {"prompt": unit["prompt"], "result": tmp_path / "out" / "follow-up.md"}
    proc = dispatch(second, "--continue-from", str(first), "--mode", "accept-edits",
                    env={"PRUN_SCRATCH_CWD": str(elsewhere)})
    assert proc.returncode == 0, proc.stderr
    assert calls(fake_agy)[1]["cwd"] == str(elsewhere.resolve())


def test_a_prompt_too_long_for_one_argument_is_refused_up_front(fake_agy, unit):
    unit["prompt"].write_text("x" * 150_000)        # under the file cap, over the argv cap
    proc = dispatch(unit)
    assert proc.returncode == 2 and proc.stdout == "" and state_root_empty()
    assert "one argument" in proc.stderr and calls(fake_agy) == []


def test_continue_from_refusals(fake_agy, unit, tmp_path):
    empty_state = tmp_path / "sd-empty"
    empty_state.mkdir()
    (empty_state / "conversation-id").write_text("  \n")
    no_id = tmp_path / "sd-none"
    no_id.mkdir()
    for arg in ("", str(no_id), str(empty_state), str(tmp_path / "missing")):
        proc = dispatch(unit, "--continue-from", arg)
        assert proc.returncode == 2, (arg, proc.stderr)
        assert proc.stdout == "" and state_root_empty()
    assert calls(fake_agy) == []


# 8. outcome: exit code and final status

def test_nonzero_exit_fails(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "nonzero_exit"})
    assert proc.returncode == 1
    text = unit["result"].read_text()
    assert text.startswith("FALLBACK reason=exit-nonzero")
    assert "agy: fatal: something broke" in text  # stderr tail
    assert "partial" in text  # salvaged text


def test_error_status_after_exit_zero_fails_with_the_error(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "error_status",
                               "FAKE_AGY_ERROR": "model overloaded"})
    assert proc.returncode == 1
    text = unit["result"].read_text()
    assert text.startswith("FALLBACK reason=status-error")
    assert "model overloaded" in text
    assert "model overloaded" in proc.stderr


def test_blank_status_counts_as_success(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "blank_status"})
    assert proc.returncode == 0, proc.stderr
    assert not unit["result"].read_text().startswith("FALLBACK")


def test_no_result_event_is_a_failure(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "no_result"})
    assert proc.returncode == 1
    assert unit["result"].read_text().startswith("FALLBACK reason=no-result-event")


def test_garbage_stream_is_a_failure(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "garbage"})
    assert proc.returncode == 1


# 9. FALLBACK for an unusable response

def test_short_response_gives_fallback(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "short_response"})
    assert proc.returncode == 1
    assert unit["result"].read_text().startswith("FALLBACK reason=short-response")


# 10. failed run whose worker wrote its own result

def test_failed_run_keeps_worker_result(fake_agy, unit):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "writes_result_then_error",
                               "FAKE_AGY_ERROR": "quota hit mid-run"})
    assert proc.returncode == 1
    assert unit["result"].read_text().startswith("# Result written by the worker")
    assert "Wrote the result" in (unit["result"].parent / "result.response.md").read_text()
    assert "quota hit mid-run" in proc.stderr


# 11. timeout

def test_timeout_value_reaches_agy(fake_agy, unit):
    dispatch(unit, env={"ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS": "1234"})
    argv = argv_of(fake_agy)
    assert argv[argv.index("--print-timeout") + 1] == "1234s"


@pytest.mark.parametrize("scenario", ["hang", "ignore_term"])
def test_timeout_ends_the_group_and_publishes_fallback(fake_agy, unit, scenario):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": scenario,
                               "ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS": "1",
                               "PRUN_TIMEOUT_GRACE_SECONDS": "0.2"})
    assert proc.returncode == 124
    assert unit["result"].read_text().startswith("FALLBACK reason=timeout")
    worker = json.loads((state_dir(proc) / "unit.json").read_text())["worker"]
    assert not _alive(worker["pid"])


def test_timeout_ends_grandchildren(fake_agy, unit, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    # unsandboxed: the process group alone ends them (tests/attempt/sandbox covers the sandbox)
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "grandchild", "FAKE_AGY_PIDFILE": str(pidfile),
                               "ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS": "1",
                               "PRUN_TIMEOUT_GRACE_SECONDS": "0.2", "PRUN_SANDBOX": "off"})
    assert proc.returncode == 124
    assert not _alive(int(pidfile.read_text()))


def test_timeout_never_touches_other_processes(fake_agy, unit):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": "hang",
                                   "ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS": "1",
                                   "PRUN_TIMEOUT_GRACE_SECONDS": "0.2"})
        assert proc.returncode == 124
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# 12. PRUN_AGY_SANDBOX

@pytest.mark.parametrize("value,flag", [("1", True), (" TRUE ", True), ("yes", True), ("On", True),
                                        ("0", False), ("false", False), ("NO", False),
                                        ("off", False), ("", False), ("  ", False)])
def test_sandbox_values(fake_agy, unit, value, flag):
    proc = dispatch(unit, env={"PRUN_AGY_SANDBOX": value})
    assert proc.returncode == 0, proc.stderr
    assert ("--sandbox" in argv_of(fake_agy)) is flag


def test_bad_sandbox_value_exits_2_before_a_state_dir(fake_agy, unit):
    proc = dispatch(unit, env={"PRUN_AGY_SANDBOX": "maybe"})
    assert proc.returncode == 2 and proc.stdout == "" and state_root_empty()
    assert "PRUN_AGY_SANDBOX" in proc.stderr


# 13. outcome.json

def test_outcome_json_is_written_last(fake_agy, unit):
    proc = dispatch(unit)
    sd = state_dir(proc)
    outcome = json.loads((sd / "outcome.json").read_text())
    assert outcome["outcome"] == "succeeded" and outcome["exit_code"] == 0
    assert outcome["backend_status"] == "SUCCESS"
    last = max(p.stat().st_mtime_ns for p in sd.iterdir() if p.name != "outcome.json")
    assert (sd / "outcome.json").stat().st_mtime_ns >= last
    assert unit["result"].stat().st_mtime_ns <= (sd / "outcome.json").stat().st_mtime_ns


# 14. the seed's script

def test_dispatch_task_agy_script(fake_agy, unit):
    script = Path(__file__).parents[2] / "skills" / "prun" / "scripts" / "dispatch-task-agy.py"
    unit["result"].parent.mkdir()
    proc = subprocess.run([sys.executable, str(script), "--prompt-file", str(unit["prompt"]),
                           "--result-file", str(unit["result"]), "--unit-id", "u1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    state_dir(proc)
    assert unit["result"].read_text().startswith("The unit is done")


# 15. bad input

@pytest.mark.parametrize("case", ["missing-prompt", "dir-prompt", "empty-prompt", "dotdot-id",
                                  "empty-id", "unknown-executor", "codex", "no-result-dir"])
def test_bad_input_is_one_line_exit_2_and_nothing_left(fake_agy, unit, tmp_path, case):
    unit["result"].parent.mkdir()
    args = {"--executor": "agy", "--prompt-file": str(unit["prompt"]),
            "--result-file": str(unit["result"]), "--unit-id": "u1"}
    if case == "missing-prompt":
        args["--prompt-file"] = str(tmp_path / "nope.md")
    elif case == "dir-prompt":
        args["--prompt-file"] = str(tmp_path)
    elif case == "empty-prompt":
        (tmp_path / "empty.md").write_text("  \n")
        args["--prompt-file"] = str(tmp_path / "empty.md")
    elif case == "dotdot-id":
        args["--unit-id"] = "../x"
    elif case == "empty-id":
        args["--unit-id"] = ""
    elif case == "unknown-executor":
        args["--executor"] = "nope"
    elif case == "codex":
        args["--executor"] = "codex"
    elif case == "no-result-dir":
        args["--result-file"] = str(tmp_path / "missing-dir" / "r.md")
    proc = prun("dispatch", *[x for kv in args.items() for x in kv])
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("prun: ")
    assert state_root_empty() and not unit["result"].exists()
    assert calls(fake_agy) == []


def test_codex_is_refused_whatever_the_flags(fake_agy, unit):
    proc = prun("dispatch", "--executor", "codex", "--prompt-file", "x", "--result-file", "y",
                "--unit-id", "!!")
    assert proc.returncode == 2
    assert "codex is not a prun executor" in proc.stderr


# stream robustness

@pytest.mark.parametrize("scenario", ["huge", "slow", "non_utf8"])
def test_unusual_streams_succeed(fake_agy, unit, scenario):
    proc = dispatch(unit, env={"FAKE_AGY_SCENARIO": scenario})
    assert proc.returncode == 0, proc.stderr
    assert unit["result"].read_text().startswith("The unit is done")
    if scenario == "huge":
        assert (state_dir(proc) / "tail").stat().st_size > 5_000_000
