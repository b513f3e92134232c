"""The quota gate end to end: the real ``prun dispatch --executor agy`` with the fake agy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from quota_helpers import entry, runs

from helpers import calls, prun
from prun.executors.agy import DEFAULT_MODEL

CLAUDE_MODEL = "claude-sonnet-4-6"


def dispatch(tmp_path: Path, unit: str, *extra: str, env: dict | None = None):
    prompt = tmp_path / f"{unit}.prompt"
    prompt.write_text("Summarise the repository.\n")
    result = tmp_path / f"{unit}.md"
    proc = prun("dispatch", "--executor", "agy", "--prompt-file", str(prompt), "--result-file",
                str(result), "--unit-id", unit, *extra, env=env)
    lines = proc.stdout.splitlines()
    state = Path(lines[0].split(" ", 1)[1]) if lines and lines[0].startswith("STATE-DIR ") else None
    return proc, state, result


def test_fallback_runs_gemini_and_records_the_swap(q, fake_agy, tmp_path):
    q.write_snapshot({"agy-claude-gpt": entry(0.0, resets_in=1800), "agy-gemini": entry(0.6)})
    reset = q.read_snapshot()["groups"]["agy-claude-gpt"]["resets_at"]
    proc, state, result = dispatch(tmp_path, "u1", env={"ANTIGRAVITY_DISPATCH_MODEL":
                                                        CLAUDE_MODEL})
    assert proc.returncode == 0, proc.stderr
    line = (f"MODEL-FALLBACK from={CLAUDE_MODEL} to={DEFAULT_MODEL} "
            f"reason=claude-and-gpt-quota-exhausted resets={reset}")
    assert line in proc.stderr.splitlines()
    assert (state / "quota-note").read_text() == line + "\n"
    assert (state / "model").read_text().strip() == DEFAULT_MODEL
    argv = calls(fake_agy)[0]["argv"]
    assert argv[argv.index("--model") + 1] == DEFAULT_MODEL
    assert argv[argv.index("--effort") + 1] == "high"
    outcome = json.loads((state / "outcome.json").read_text())
    assert outcome["model"] == DEFAULT_MODEL and outcome["requested_model"] == CLAUDE_MODEL
    assert outcome["quota_note"] == line
    assert result.read_text().startswith("The unit is done")


def test_gemini_empty_exits_75_without_launching(q, fake_agy, tmp_path):
    q.write_snapshot({"agy-gemini": entry(0.0, resets_in=2040)})
    reset = q.read_snapshot()["groups"]["agy-gemini"]["resets_at"]
    proc, state, result = dispatch(tmp_path, "u2")
    assert proc.returncode == 75, proc.stderr
    assert calls(fake_agy) == []
    assert "ANTIGRAVITY_DISPATCH_MODEL" in proc.stderr
    note = (state / "quota-note").read_text()
    assert note == f"QUOTA-EXHAUSTED model={DEFAULT_MODEL} groups=agy-gemini resets={reset}\n"
    text = result.read_text()
    assert text.startswith("FALLBACK reason=quota")
    assert reset in text and "ANTIGRAVITY_DISPATCH_MODEL" in text
    outcome = json.loads((state / "outcome.json").read_text())
    assert outcome["outcome"] == "quota" and outcome["exit_code"] == 75
    assert outcome["published"] == "fallback" and outcome["quota_note"] == note.strip()


def test_both_empty_exits_75_with_both_resets(q, fake_agy, tmp_path):
    q.write_snapshot({"agy-gemini": entry(0.0, resets_in=600),
                      "agy-claude-gpt": entry(0.0, resets_in=9000)})
    groups = q.read_snapshot()["groups"]
    resets = groups["agy-gemini"]["resets_at"], groups["agy-claude-gpt"]["resets_at"]
    proc, state, result = dispatch(tmp_path, "u3", "--model", CLAUDE_MODEL)
    assert proc.returncode == 75
    assert calls(fake_agy) == []
    for r in resets:
        assert r in proc.stderr and r in (state / "quota-note").read_text() and r in \
            result.read_text()


def test_agy_quota_error_is_recorded_and_gates_the_next_unit(q, fake_agy, tmp_path):
    proc, state, _ = dispatch(tmp_path, "u4", env={"FAKE_AGY_SCENARIO": "quota"})
    assert proc.returncode == 1
    g = q.read_snapshot()["groups"]["agy-gemini"]
    assert g["left"] == 0.0 and g["source"] == "hit" and g["resets_at"]
    assert "Individual quota reached" in g["message"]
    outcome = json.loads((state / "outcome.json").read_text())
    assert outcome["quota"]["group"] == "agy-gemini"
    # The next Gemini unit is refused before launch instead of failing the same way.
    proc, _, _ = dispatch(tmp_path, "u5")
    assert proc.returncode == 75
    assert len(calls(fake_agy)) == 1


def test_claude_gpt_quota_error_sends_the_next_unit_to_gemini(q, fake_agy, tmp_path):
    env = {"FAKE_AGY_SCENARIO": "quota", "ANTIGRAVITY_DISPATCH_MODEL": CLAUDE_MODEL}
    proc, _, _ = dispatch(tmp_path, "u6", env=env)
    assert proc.returncode == 1
    assert q.read_snapshot()["groups"]["agy-claude-gpt"]["left"] == 0.0
    proc, state, _ = dispatch(tmp_path, "u7", env={"ANTIGRAVITY_DISPATCH_MODEL": CLAUDE_MODEL})
    assert proc.returncode == 0
    assert (state / "model").read_text().strip() == DEFAULT_MODEL


@pytest.mark.parametrize("scenario", ["error_status", "nonzero_exit", "quota"])
def test_backend_failure_forces_a_refresh(q, fake_agy, tmp_path, scenario):
    q.write_snapshot({"agy-gemini": entry(0.9, age_s=1), "agy-claude-gpt": entry(0.9, age_s=1)})
    count = q.probe("agy-gemini", json={"left": 0.2})
    proc, _, _ = dispatch(tmp_path, "u8", env={"FAKE_AGY_SCENARIO": scenario})
    assert proc.returncode == 1
    assert runs(count) == 1  # past the TTL: the reading was 1 s old
    g = q.read_snapshot()["groups"]["agy-gemini"]
    if scenario == "quota":
        assert g["source"] == "hit" and g["left"] == 0.0  # the hit stands until it resets
    else:
        assert g["left"] == 0.2


def test_success_does_not_refresh(q, fake_agy, tmp_path):
    q.write_snapshot({"agy-gemini": entry(0.9, age_s=1), "agy-claude-gpt": entry(0.9, age_s=1)})
    count = q.probe("agy-gemini", json={"left": 0.2})
    proc, _, _ = dispatch(tmp_path, "u9")
    assert proc.returncode == 0 and runs(count) == 0


def test_gate_off_launches_into_an_empty_group(q, fake_agy, tmp_path):
    q.write_snapshot({"agy-gemini": entry(0.0), "agy-claude-gpt": entry(0.0)})
    proc, state, _ = dispatch(tmp_path, "u10", env={"PRUN_AGY_QUOTA_GATE": "off"})
    assert proc.returncode == 0
    assert len(calls(fake_agy)) == 1
    assert not (state / "quota-note").exists()


@pytest.mark.parametrize("raw", ['{"groups": {"agy-gemini": {"left": 0', "",
                                 '{"groups": {"agy-gemini": {"left": "none"}}}'])
def test_unreadable_snapshot_launches_with_one_warning(q, fake_agy, tmp_path, raw):
    q.write_raw(raw)
    proc, state, _ = dispatch(tmp_path, "u11")
    assert proc.returncode == 0
    warnings = [ln for ln in proc.stderr.splitlines() if ln.startswith("prun: warning:")]
    assert len(warnings) == 1 and "quota gate skipped" in warnings[0]
    assert (state / "model").read_text().strip() == DEFAULT_MODEL


def test_cancel_while_the_gate_probes_ends_the_probe_and_launches_nothing(q, fake_agy,
                                                                          tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    pidfile = tmp_path / "probe-grandchild.pid"
    q.set("probe_timeout", "60s")
    count = q.probe("agy-gemini", hang=True, grandchild=str(pidfile))
    prompt = tmp_path / "c.prompt"
    prompt.write_text("Summarise.\n")
    proc = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", "--prompt-file",
                             str(prompt), "--result-file", str(tmp_path / "c.md"),
                             "--unit-id", "c1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline, "the probe never started"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)  # far less than the 60 s probe timeout
    state = Path(out.split(" ", 1)[1].strip())
    outcome = json.loads((state / "outcome.json").read_text())
    assert outcome["outcome"] == "cancelled"
    assert calls(fake_agy) == []
    assert runs(count) == 1  # no forced refresh after a cancel
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while True:
        try:
            if psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        assert time.monotonic() < deadline, "the probe's process group survived the cancel"
        time.sleep(0.02)
