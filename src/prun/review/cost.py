"""What one attempt used: tokens in, out and cached, and dollars, as its agent CLI reported them.

Read from the attempt's ``outcome.json`` (``"tokens": {"in", "out", "cached"}`` and
``"cost_usd"``, written by its dispatcher), else from the ledger's attempt columns
(``tokens_in``, ``tokens_out``, ``tokens_cached``, ``cost_usd``). Anything not reported stays
None and is shown as a dash: a cost is never estimated.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from .._util.fsutil import read_json
from ..executors.records import Usage, count, dollars, total


def cost_of(attempt: Mapping[str, Any]) -> Usage:
    """The use of the attempt whose ledger row is ``attempt`` ({}: no attempt)."""
    state_dir = attempt.get("state_dir")
    read = read_json(os.path.join(state_dir, "outcome.json")) if state_dir else None
    outcome: dict[str, Any] = read if isinstance(read, dict) else {}
    tokens = outcome.get("tokens")
    if isinstance(tokens, dict) or "cost_usd" in outcome:
        t: dict[str, Any] = tokens if isinstance(tokens, dict) else {}
        found = Usage(count(t.get("in")), count(t.get("out")), count(t.get("cached")),
                      dollars(outcome.get("cost_usd")))
        if found.reported:
            return found
    return Usage(count(attempt.get("tokens_in")), count(attempt.get("tokens_out")),
                 count(attempt.get("tokens_cached")), dollars(attempt.get("cost_usd")))


def spent(usages: Iterable[Usage]) -> Usage:
    """The sum of what was reported (None where no attempt reported it)."""
    usages = list(usages)
    cost = [u.cost_usd for u in usages if u.cost_usd is not None]
    return Usage(total(*(u.tokens_in for u in usages)), total(*(u.tokens_out for u in usages)),
                 total(*(u.tokens_cached for u in usages)), sum(cost) if cost else None)


def as_dict(u: Usage) -> dict[str, Any]:
    """The shape ``outcome.json`` uses."""
    return {"tokens": {"in": u.tokens_in, "out": u.tokens_out, "cached": u.tokens_cached},
            "cost_usd": u.cost_usd}
