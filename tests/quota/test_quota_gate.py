"""The agy quota gate, decided in process from snapshot files and scripted probes."""

from __future__ import annotations

import os

import pytest
from quota_helpers import entry, iso, runs

from prun.errors import ExitCode, QuotaExhausted
from prun.executors import get as get_executor
from prun.executors.agy import DEFAULT_MODEL

CLAUDE_MODEL = "claude-sonnet-4-6"


def decide(model=None, env=None, effort=None):
    agy = get_executor("agy")
    full = dict(os.environ)
    full.update(env or {})
    settings = agy.settings(full, model=model, effort=effort)
    return agy.gate(settings, full), settings


def test_claude_gpt_empty_falls_back_to_gemini(q):
    q.write_snapshot({"agy-claude-gpt": entry(0.0, resets_in=1800),
                      "agy-gemini": entry(0.5)})
    decision, asked = decide(CLAUDE_MODEL)
    assert asked.effort is None
    assert decision.settings.model == DEFAULT_MODEL
    assert decision.settings.effort == "high"  # effort follows the model: Gemini gets one
    assert decision.settings.timeout_s == asked.timeout_s
    reset = q.read_snapshot()["groups"]["agy-claude-gpt"]["resets_at"]
    assert decision.note == (f"MODEL-FALLBACK from={CLAUDE_MODEL} to={DEFAULT_MODEL} "
                             f"reason=claude-and-gpt-quota-exhausted resets={reset}")


def test_fallback_uses_the_configured_effort(q):
    q.write_snapshot({"agy-claude-gpt": entry(0.0)})
    decision, _ = decide("gpt-oss-120b-medium", env={"ANTIGRAVITY_DISPATCH_EFFORT": "medium"})
    assert decision.settings.model == DEFAULT_MODEL and decision.settings.effort == "medium"


def test_fallback_when_gemini_unknown(q):
    q.write_snapshot({"agy-claude-gpt": entry(0.0)})  # Gemini not reported: unknown, not empty
    decision, _ = decide(CLAUDE_MODEL)
    assert decision.settings.model == DEFAULT_MODEL


def test_gemini_empty_refuses_and_names_the_variable(q):
    q.write_snapshot({"agy-gemini": entry(0.0, resets_in=2040), "agy-claude-gpt": entry(0.9)})
    with pytest.raises(QuotaExhausted) as e:
        decide()
    err = e.value
    assert err.exit_code == ExitCode.QUOTA == 75
    assert err.group == "agy-gemini"
    assert "ANTIGRAVITY_DISPATCH_MODEL" in err.message
    reset = q.read_snapshot()["groups"]["agy-gemini"]["resets_at"]
    assert err.resets_at == reset and reset in err.message
    assert err.note == f"QUOTA-EXHAUSTED model={DEFAULT_MODEL} groups=agy-gemini resets={reset}"


def test_gemini_empty_never_escalates_on_its_own(q):
    q.write_snapshot({"agy-gemini": entry(0.0), "agy-claude-gpt": entry(1.0)})
    with pytest.raises(QuotaExhausted):
        decide("gemini-3.8-pro")


def test_gemini_empty_but_claude_model_asked_launches(q):
    q.write_snapshot({"agy-gemini": entry(0.0), "agy-claude-gpt": entry(0.4)})
    decision, _ = decide(CLAUDE_MODEL)
    assert decision is None


@pytest.mark.parametrize("model", [None, CLAUDE_MODEL])
def test_both_empty_refuses_with_both_reset_times(q, model):
    q.write_snapshot({"agy-gemini": entry(0.0, resets_in=600),
                      "agy-claude-gpt": entry(0.0, resets_in=7200)})
    with pytest.raises(QuotaExhausted) as e:
        decide(model)
    groups = q.read_snapshot()["groups"]
    g_reset, c_reset = groups["agy-gemini"]["resets_at"], groups["agy-claude-gpt"]["resets_at"]
    assert g_reset in e.value.message and c_reset in e.value.message
    assert e.value.note.endswith(f"groups=agy-gemini,agy-claude-gpt resets={g_reset},{c_reset}")
    assert e.value.resets_at == g_reset  # the earlier one: the unit can run then


def test_reset_passed_is_not_empty(q):
    q.write_snapshot({"agy-gemini": entry(0.0, resets_in=-5)})
    assert decide()[0] is None


@pytest.mark.parametrize("left", [0.01, 0.5, 1.0, None])
def test_not_empty_launches_as_asked(q, left):
    q.write_snapshot({"agy-gemini": entry(left), "agy-claude-gpt": entry(left)})
    assert decide()[0] is None
    assert decide(CLAUDE_MODEL)[0] is None


def test_unreported_groups_are_unknown(q, capsys):
    q.write_snapshot({"claude": entry(0.0)})
    assert decide()[0] is None
    assert decide(CLAUDE_MODEL)[0] is None
    assert capsys.readouterr().err == ""


FUTURE = '{"groups": {"agy-gemini": {"left": 0, "read_at": "2999-01-01T00:00:00Z"}}}'


@pytest.mark.parametrize("raw", ["", '{"groups": {"agy-gemini": {"left": 0', "null",
                                 '{"groups": {"agy-gemini": {"left": "0"}}}', FUTURE])
def test_unreadable_snapshot_skips_with_one_warning(q, capsys, raw):
    q.write_raw(raw)
    assert decide()[0] is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("prun: warning: quota snapshot") and "quota gate skipped" in err


def test_missing_snapshot_skips_with_one_warning(q, capsys):
    assert decide()[0] is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no snapshot file yet" in err


def test_bad_entry_in_another_group_does_not_skip(q):
    q.write_snapshot({"claude": {"left": "lots"}, "agy-gemini": entry(0.0)})
    with pytest.raises(QuotaExhausted):
        decide()


@pytest.mark.parametrize("value", ["off", "OFF", "0", "false", "no"])
def test_gate_off(q, value):
    q.write_snapshot({"agy-gemini": entry(0.0), "agy-claude-gpt": entry(0.0)})
    assert decide(env={"PRUN_AGY_QUOTA_GATE": value})[0] is None


def test_gate_on_values(q):
    q.write_snapshot({"agy-gemini": entry(0.0)})
    for value in ("on", "1", "true", "yes", ""):
        with pytest.raises(QuotaExhausted):
            decide(env={"PRUN_AGY_QUOTA_GATE": value})


def test_other_executors_are_not_gated(q):
    q.write_snapshot({"agy-gemini": entry(0.0), "agy-claude-gpt": entry(0.0)})
    command = get_executor("command")
    settings = command.settings(os.environ)
    assert command.gate(settings, dict(os.environ)) is None


def test_stale_snapshot_is_refreshed_by_probe_before_deciding(q):
    q.write_snapshot({"agy-gemini": entry(0.9, age_s=400)})
    count = q.probe("agy-gemini", json={"left": 0.0, "resets_in": 900})
    with pytest.raises(QuotaExhausted) as e:
        decide()
    assert runs(count) == 1
    assert e.value.resets_at[:15] == iso(900)[:15]


def test_fresh_snapshot_runs_no_probe(q):
    q.write_snapshot({"agy-gemini": entry(0.9, age_s=10), "agy-claude-gpt": entry(0.9)})
    count = q.probe("agy-gemini", json={"left": 0.0})
    other = q.probe("agy-claude-gpt", json={"left": 0.0})
    claude = q.probe("claude", json={"left": 0.0})
    assert decide()[0] is None
    assert runs(count) == runs(other) == runs(claude) == 0


def test_missing_snapshot_with_probes_reads_them_first(q, capsys):
    q.probe("agy-gemini", json={"left": 0.5})
    q.probe("agy-claude-gpt", json={"left": 0.0, "resets_in": 60})
    claude = q.probe("claude", json={"left": 0.0})
    decision, _ = decide(CLAUDE_MODEL)
    assert decision.settings.model == DEFAULT_MODEL
    assert runs(claude) == 0  # the gate reads only agy's groups
    assert capsys.readouterr().err == ""


def test_failed_probe_never_blocks(q):
    q.set("probe_timeout", "1s")
    q.probe("agy-gemini", hang=True)
    q.probe("agy-claude-gpt", exit=1)
    assert decide()[0] is None
