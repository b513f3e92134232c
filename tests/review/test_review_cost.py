"""What an attempt used, on the page: from outcome.json's tokens and cost_usd, else the
ledger's columns; never estimated."""

from __future__ import annotations

import json

from prun.executors.records import Usage
from prun.review.cost import as_dict, cost_of, spent


def attempt_with(tmp_path, outcome: dict | None, **row) -> dict:
    if outcome is not None:
        (tmp_path / "outcome.json").write_text(json.dumps(outcome))
    return {"state_dir": str(tmp_path), **row}


def test_tokens_and_dollars_from_the_outcome(tmp_path):
    a = attempt_with(tmp_path, {"tokens": {"in": 1200, "out": 34, "cached": None},
                                "cost_usd": 0.0123}, tokens_in=1, cost_usd=9.0)
    assert cost_of(a) == Usage(1200, 34, None, 0.0123)
    assert as_dict(cost_of(a)) == {"tokens": {"in": 1200, "out": 34, "cached": None},
                                   "cost_usd": 0.0123}


def test_the_ledger_columns_when_the_outcome_reports_none(tmp_path):
    a = attempt_with(tmp_path, {"outcome": "succeeded"}, tokens_in=5, tokens_out=6,
                     tokens_cached=7, cost_usd=0.5)
    assert cost_of(a) == Usage(5, 6, 7, 0.5)


def test_nothing_reported_is_nothing_shown(tmp_path):
    assert not cost_of({}).reported
    assert not cost_of(attempt_with(tmp_path, {"tokens": "bad", "cost_usd": "1"})).reported
    raw = {"usage": {"input_tokens": 12200, "output_tokens": 12}}   # not normalised: not read
    assert not cost_of(attempt_with(tmp_path, raw)).reported


def test_a_total_adds_what_was_reported():
    assert spent([Usage(1, None, None, 0.25), Usage(2, None, None, None), Usage()]) == \
        Usage(3, None, None, 0.25)
    assert not spent([]).reported
