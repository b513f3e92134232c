"""Settle a standalone unit whose dispatcher is gone (killed, crashed, its terminal closed):
judge it from what it left, publish its result or its FALLBACK, write `outcome.json` and
close its ledger row, so that monitor, gather and the ledger see it finished.

    prun settle STATE_DIR
    SETTLED <state dir> outcome=<kind> reason=<why> result=<path>

Its exit code was its dispatcher's to see, so it is recorded as unknown, never made up. A
unit whose dispatcher or worker still runs is refused: `prun cancel STATE_DIR` ends it (and
settles it). A unit of a run is its supervisor's to settle (`prun resume RUN`). Settling a
settled unit prints its outcome again and changes nothing.

exit codes (README, "Exit codes"): 0 settled (or already); 1 it still runs; 2 not a
standalone unit's state dir.
"""

from __future__ import annotations

import argparse

from .._util.quoting import quote, word
from ..attempt.orphaned import settle, standalone
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("state_dir", metavar="STATE_DIR", type=options.path, help="the path printed as STATE-DIR")


def run(args: argparse.Namespace) -> int:
    sd = standalone(args.state_dir)
    outcome = settle(sd)
    print(f"SETTLED {quote(sd.path)} outcome={outcome.kind.value} "
          f"{word('reason', outcome.reason)} {word('result', outcome.result_file)}")
    return 0
