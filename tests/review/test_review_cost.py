"""An attempt's cost on the page: from outcome.json's tokens and cost_usd, else the ledger's
columns, else the agent CLI's raw usage; never guessed."""

from __future__ import annotations

import json

from prun.review.cost import Cost, cost_of


def attempt_with(tmp_path, outcome: dict | None, **row) -> dict:
    if outcome is not None:
        (tmp_path / "outcome.json").write_text(json.dumps(outcome))
    return {"state_dir": str(tmp_path), **row}


def test_tokens_and_dollars_from_the_outcome(tmp_path):
    a = attempt_with(tmp_path, {"tokens": {"in": 1200, "out": 34, "cached": None},
                                "cost_usd": 0.0123})
    assert cost_of(a) == Cost(1200, 34, None, 0.0123)


def test_the_ledger_columns_when_the_outcome_has_none(tmp_path):
    a = attempt_with(tmp_path, {"outcome": "succeeded"}, tokens_in=5, tokens_out=6,
                     tokens_cached=7, cost_usd=0.5)
    assert cost_of(a) == Cost(5, 6, 7, 0.5)


def test_the_raw_usage_of_an_agent_cli_is_the_last_resort(tmp_path):
    a = attempt_with(tmp_path, {"usage": {"input_tokens": 12200, "output_tokens": 12,
                                          "cache_read_input_tokens": 0}})
    assert cost_of(a) == Cost(12200, 12, 0, None)


def test_nothing_known_is_nothing_shown(tmp_path):
    assert not cost_of({}).known
    assert not cost_of(attempt_with(tmp_path, {"tokens": "bad", "cost_usd": "1"})).known
    assert cost_of(attempt_with(tmp_path, None)) == Cost()


def test_a_total_adds_what_is_known():
    total = Cost.total([Cost(1, None, None, 0.25), Cost(2, None, None, None), Cost()])
    assert total == Cost(3, None, None, 0.25)
