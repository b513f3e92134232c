"""Every registered process executor honours the same dispatcher contract.

A new executor must add its fake here (one row of FAKE_CLIS); the first test fails until it does.
"""

from __future__ import annotations

import sys

import pytest

from helpers import FAKES, make_fake_cli
from prun import executors

from .conftest import Unit

# executor -> (fake script, env var naming the binary, scenario variable, extra env)
FAKE_CLIS = {
    "agy": ("fake_agy.py", "PRUN_AGY_BIN", "FAKE_AGY_SCENARIO", {}),
    "claude": ("fake_claude.py", "PRUN_CLAUDE_BIN", "FAKE_CLAUDE_SCENARIO", {"IS_SANDBOX": "1"}),
    "gemini": ("fake_gemini.py", "PRUN_GEMINI_BIN", "FAKE_GEMINI_SCENARIO", {}),
    "command": (None, None, "FAKE_SCENARIO", {}),
}
COMMAND = (f"{sys.executable} -c \"import os, sys, time; s = os.environ.get('FAKE_SCENARIO'); "
           "print('The command unit is done: all good.') if s == 'success' else None; "
           "time.sleep(3600) if s == 'hang' else None; sys.exit(0 if s == 'success' else 3)\"")
PROCESS_EXECUTORS = [n for n in executors.BUILTIN if executors.get(n).launches_process]


def test_every_process_executor_has_a_fake():
    assert sorted(PROCESS_EXECUTORS) == sorted(FAKE_CLIS)
    assert "codex" not in executors.names()


@pytest.fixture(params=PROCESS_EXECUTORS)
def any_unit(request, tmp_path, monkeypatch):
    name = request.param
    script, bin_env, scenario_var, extra = FAKE_CLIS[name]
    if script:
        monkeypatch.setenv(bin_env, str(make_fake_cli(tmp_path / "bin", name, FAKES / script)))
    for k, v in extra.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FAKE_GEMINI_HOME", str(tmp_path / "home"))
    unit = Unit(tmp_path, name)
    unit.scenario_var = scenario_var
    unit.extra = ["--command", COMMAND] if name == "command" else []
    return unit


def run(unit, scenario, *flags):
    return unit.dispatch(*unit.extra, *flags, env={unit.scenario_var: scenario})


def test_success_publishes_the_response(any_unit):
    p = run(any_unit, "success")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == f"STATE-DIR {any_unit.state}"
    text = any_unit.result.read_text()
    assert len(text.strip()) >= 20 and not text.startswith("FALLBACK")
    out = any_unit.outcome
    assert out["outcome"] == "succeeded" and out["published"] == "response"


def test_failure_publishes_fallback(any_unit):
    p = run(any_unit, "nonzero_exit")
    assert p.returncode == 1
    assert any_unit.result.read_text().startswith("FALLBACK reason=")
    assert any_unit.outcome["outcome"] == "failed"


def test_timeout_gives_124(any_unit, monkeypatch):
    # agy's own --print-timeout gets a grace period first; the fake ignores it, so no grace
    monkeypatch.setenv("PRUN_TIMEOUT_GRACE_SECONDS", "0")
    p = run(any_unit, "hang", "--timeout", "1")
    assert p.returncode == 124, p.stderr
    assert any_unit.result.read_text().startswith("FALLBACK reason=timeout")
    assert any_unit.outcome["outcome"] == "timeout"


def test_existing_result_is_refused_before_a_state_dir(any_unit):
    any_unit.fresh()
    any_unit.result.parent.mkdir(exist_ok=True)
    any_unit.result.write_text("old\n")
    p = any_unit.dispatch(*any_unit.extra, fresh=False)
    assert p.returncode == 2 and p.stdout == ""
    assert any_unit.result.read_text() == "old\n"
