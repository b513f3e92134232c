"""What one attempt cost: tokens in, out and cached, and dollars, read defensively.

Where from, first found wins: the attempt's ``outcome.json`` (``"tokens": {"in", "out",
"cached"}`` and ``"cost_usd"``), the ledger's attempt columns (``tokens_in``, ``tokens_out``,
``tokens_cached``, ``cost_usd``), then the raw ``usage`` an agent CLI reported in
``outcome.json``. Anything not reported stays None (shown as a dash): a cost is never guessed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._util.fsutil import read_json

# The raw usage keys of the agent CLIs (Claude Code's ``usage``, Gemini CLI's ``stats``)
_RAW = {"in": ("input_tokens", "prompt_tokens", "prompt", "input"),
        "out": ("output_tokens", "candidates_tokens", "candidates", "output"),
        "cached": ("cache_read_input_tokens", "cached_tokens", "cached", "cached_content")}


@dataclass(frozen=True)
class Cost:
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    usd: float | None = None

    @property
    def known(self) -> bool:
        return any(v is not None for v in (self.tokens_in, self.tokens_out,
                                           self.tokens_cached, self.usd))

    def as_dict(self) -> dict[str, Any]:
        return {"tokens": {"in": self.tokens_in, "out": self.tokens_out,
                           "cached": self.tokens_cached}, "cost_usd": self.usd}

    @staticmethod
    def total(costs: Iterable[Cost]) -> Cost:
        """The sum of what is known (None where no attempt reported it)."""
        costs = list(costs)

        def add(values: list[Any]) -> Any:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        return Cost(add([c.tokens_in for c in costs]), add([c.tokens_out for c in costs]),
                    add([c.tokens_cached for c in costs]), add([c.usd for c in costs]))


def cost_of(attempt: Mapping[str, Any]) -> Cost:
    """The cost of the attempt whose ledger row is ``attempt`` ({}: no attempt)."""
    state_dir = attempt.get("state_dir")
    read = read_json(os.path.join(state_dir, "outcome.json")) if state_dir else None
    outcome: dict[str, Any] = read if isinstance(read, dict) else {}
    tokens: dict[str, Any] = outcome["tokens"] if isinstance(outcome.get("tokens"), dict) else {}
    found = Cost(_int(tokens.get("in")), _int(tokens.get("out")), _int(tokens.get("cached")),
                 _float(outcome.get("cost_usd")))
    if found.known:
        return found
    found = Cost(_int(attempt.get("tokens_in")), _int(attempt.get("tokens_out")),
                 _int(attempt.get("tokens_cached")), _float(attempt.get("cost_usd")))
    if found.known:
        return found
    usage = outcome.get("usage")
    return _raw(usage) if isinstance(usage, dict) else Cost()


def _raw(usage: Mapping[str, Any]) -> Cost:
    def pick(which: str) -> int | None:
        return next((v for k in _RAW[which] if (v := _int(usage.get(k))) is not None), None)

    usd = next((v for k in ("total_cost_usd", "cost_usd")
                if (v := _float(usage.get(k))) is not None), None)
    return Cost(pick("in"), pick("out"), pick("cached"), usd)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
