"""What a plan would spend, before launching it: per executor and model, the projected tokens
and US dollars from the ledger's history (its samples and their range), beside each quota
pool's headroom and reset from the quota snapshot, and which pools the plan would exhaust.
Nothing is launched and nothing is written.

    ESTIMATE <executor> model=<m|default> units=<n> samples=<k> tokens=<n|unknown>
             usd=<x|unknown> [unit_tokens=<min>..<max>] [unit_usd=<min>..<max>]
    POOL <group> left=<0..1|unknown> resets=<ISO|unknown> units=<n> exhausts=<yes|unknown>
         why="..."
    BUDGET over="..."                   (the projection passes the budget)
    HISTORY none                        (no finished unit of these executors and models yet:
                                         nothing is projected)

With no history for an executor and model its tokens and usd are unknown: prun projects
nothing it cannot know. The snapshot holds a pool's headroom as a fraction, not tokens: a pool
is exhausted by the plan when it reads empty or the plan puts more units on it than the
routing policy's [capacity]; otherwise `unknown`. `--json` prints one entry per executor and
model with `samples`, `tokens` and `usd` (null where unknown), the pools and the budget.

exit codes: 0 printed; 2 a bad plan or option.
"""

from __future__ import annotations

import argparse
import json
import sys

from .._util.quoting import quote, word
from ..api import estimate
from ..plan import Budget
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("plan", metavar="PLAN", type=options.path, help="the plan file (YAML)")
    p.add_argument("--budget-usd", type=options.usd, metavar="USD",
                   help="judge the projection against this many US dollars (over budget:)")
    p.add_argument("--budget-tokens", type=options.token_count, metavar="N",
                   help="judge the projection against this many tokens, in + out")
    p.add_argument("--json", action="store_true", help="the estimate as JSON")


def run(args: argparse.Namespace) -> int:
    est = estimate(args.plan, budget=Budget(args.budget_usd, args.budget_tokens))
    if args.json:
        json.dump(est.to_json(), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for e in est.entries:
        words = ["ESTIMATE", quote(e.executor), word("model", e.model or "default"),
                 word("units", e.units), word("samples", e.samples),
                 word("tokens", "unknown" if e.tokens is None else e.tokens),
                 word("usd", "unknown" if e.usd is None else f"{e.usd:.4f}")]
        if e.tokens_range:
            words.append(word("unit_tokens", f"{e.tokens_range[0]}..{e.tokens_range[1]}"))
        if e.usd_range:
            words.append(word("unit_usd", f"{e.usd_range[0]:.4f}..{e.usd_range[1]:.4f}"))
        print(" ".join(words))
    for p in est.pools:
        print(" ".join(["POOL", quote(p.group),
                        word("left", "unknown" if p.left is None else f"{p.left:g}"),
                        word("resets", p.resets_at or "unknown"), word("units", p.units),
                        word("exhausts", "yes" if p.exhausts else "unknown"),
                        word("why", p.why)]))
    if est.budget_over:
        print(f"BUDGET {word('over', est.budget_over)}")
    if not est.history:
        print("HISTORY none")
    return 0
