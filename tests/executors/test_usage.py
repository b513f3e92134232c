"""What each agent CLI reports it used, as its executor reads it: the reader of each CLI's
stream normalises its own usage record, never estimating a number it did not print."""

from __future__ import annotations

import json

import pytest

from prun.attempt.outcome import Outcome
from prun.executors import agy, claude, gemini
from prun.executors.records import Usage, count, dollars
from prun.ledger import Ledger, OutcomeKind


def read(reader, events):
    for e in events:
        reader.event(e)
    return reader.result


def test_claude_adds_the_cached_prompt_tokens_back_and_takes_its_cost():
    r = read(claude.ClaudeReader(), [{"type": "result", "subtype": "success", "is_error": False,
                                      "result": "ok", "total_cost_usd": 0.02452, "usage": {
                                          "input_tokens": 200, "cache_creation_input_tokens": 30,
                                          "cache_read_input_tokens": 12000,
                                          "output_tokens": 12}}])
    assert r.spend == Usage(tokens_in=12230, tokens_out=12, tokens_cached=12000,
                            cost_usd=0.02452)


def test_claude_without_a_cost_or_cache_fields_says_none_of_them():
    r = read(claude.ClaudeReader(), [{"type": "result", "subtype": "success", "is_error": False,
                                      "usage": {"input_tokens": 5, "output_tokens": 1}}])
    assert r.spend == Usage(tokens_in=5, tokens_out=1, tokens_cached=None, cost_usd=None)
    r = read(claude.ClaudeReader(), [{"type": "result", "subtype": "success", "usage": {}}])
    assert r.spend is None


def test_gemini_reads_the_totals_and_falls_back_to_the_models():
    stats = {"total_tokens": 10587, "input_tokens": 10547, "output_tokens": 40, "cached": 7,
             "input": 10540, "models": {"gemini-3.8-flash": {"input_tokens": 1}}}
    r = read(gemini.GeminiReader(), [{"type": "result", "status": "success", "stats": stats}])
    assert r.spend == Usage(tokens_in=10547, tokens_out=40, tokens_cached=7, cost_usd=None)
    per_model = {"models": {"a": {"input_tokens": 100, "output_tokens": 4, "cached": 0},
                            "b": {"input_tokens": 50, "output_tokens": 6}}}
    r = read(gemini.GeminiReader(), [{"type": "result", "status": "success",
                                      "stats": per_model}])
    assert r.spend == Usage(tokens_in=150, tokens_out=10, tokens_cached=0, cost_usd=None)


def test_agy_reads_its_usage_by_name_only():
    r = read(agy.AgyReader(), [{"event": "result", "result": {
        "status": "SUCCESS", "response": "x", "usage": {"input_tokens": 9, "output_tokens": 3,
                                                         "mystery": 4}}}])
    assert r.spend == Usage(tokens_in=9, tokens_out=3, tokens_cached=None, cost_usd=None)
    r = read(agy.AgyReader(), [{"event": "result", "result": {"status": "SUCCESS"}}])
    assert r.spend is None


@pytest.mark.parametrize("value", [-1, 1.5, True, "12", None, float("nan"), float("inf")])
def test_a_count_that_is_not_a_count_is_not_reported(value):
    assert count(value) is None


def test_counts_and_dollars():
    assert count(12) == 12 and count(12.0) == 12 and count(0) == 0
    assert dollars(0) == 0.0 and dollars(0.5) == 0.5
    assert dollars(-0.1) is None and dollars(float("inf")) is None and dollars("1") is None


def test_outcome_json_carries_tokens_and_cost_and_reads_them_back():
    o = Outcome(OutcomeKind.SUCCEEDED, "ok", usage={"input_tokens": 3},
                spend=Usage(3, 2, None, 0.01))
    d = json.loads(json.dumps(o.to_json()))
    assert d["tokens"] == {"in": 3, "out": 2, "cached": None} and d["cost_usd"] == 0.01
    assert d["usage"] == {"input_tokens": 3} and "spend" not in d
    assert Outcome.from_json(d).spend == Usage(3, 2, None, 0.01)
    bare = Outcome(OutcomeKind.FAILED, "exit-nonzero").to_json()
    assert bare["tokens"] == {"in": None, "out": None, "cached": None}
    assert bare["cost_usd"] is None and Outcome.from_json(bare).spend is None


def test_dispatch_writes_what_claude_reported(claude_unit, fake_claude):
    p = claude_unit.dispatch(env={"FAKE_CLAUDE_USAGE": json.dumps(
        {"input_tokens": 100, "cache_read_input_tokens": 900, "output_tokens": 20}),
        "FAKE_CLAUDE_COST": "0.0031"})
    assert p.returncode == 0, p.stderr
    out = claude_unit.outcome
    assert out["tokens"] == {"in": 1000, "out": 20, "cached": 900}
    assert out["cost_usd"] == 0.0031 and out["usage"]["cache_read_input_tokens"] == 900
    with Ledger.open() as led:             # a standalone dispatch's own row
        row = led.attempt(claude_unit.state.name)
    assert (row["tokens_in"], row["tokens_out"], row["tokens_cached"], row["cost_usd"]) == \
        (1000, 20, 900, 0.0031)


def test_dispatch_writes_what_gemini_reported(gemini_unit, fake_gemini):
    p = gemini_unit.dispatch()
    assert p.returncode == 0, p.stderr
    out = gemini_unit.outcome
    assert out["tokens"] == {"in": 10547, "out": 40, "cached": 0} and out["cost_usd"] is None
