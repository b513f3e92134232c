"""Block until a run has something to act on, like the seed's monitor, then say what.

Wakes on the first actionable event after the cursor: a unit failed, timed out, was
cancelled or blocked, its acceptance check did not pass in the run (``status=accept-failed``),
stalled (no output for PRUN_STALL_THRESHOLD, default 10 min), was parked (for quota, or by the
run's budget: reason=budget), a session unit waits for the coordinator, the run stopped (no
receipt) or finished, or its supervisor is gone. A run's end that a later re-opening (a
follow-up, a resume) superseded is not reported: the wait goes on to the re-opened run's own
events.
`--any` also wakes on each unit that succeeded (to keep a pool busy with follow-ups).

    EVENT <seq> <kind> packet=<id> [reason=<quota|budget>] [status=<s>] [cause="..."]
                                    (each event found; reason for a parked unit)
    RUN <run-id> status=<s> packets=<n> <status>=<count>... supervisor=<alive|gone>
    CURSOR <seq>                    (pass it as --since to wait for the next event)

exit codes (README, "Exit codes"): 0 the run finished and every packet succeeded; 1 the run
finished otherwise; 3 the run stopped (no receipt); 4 a unit failed, timed out, was cancelled or
blocked, or its acceptance check did not pass; 5 a unit stalled; 6 a unit was parked (quota or
budget); 7 the supervisor is gone (prun resume RUN), whatever else the cursor finds; 8 a unit
succeeded (--any); 9 a session unit was handed to the coordinator (run its `handoff=` file as a
subagent, then its `receipt_cmd=`); 124 --timeout passed with nothing to report.
"""

from __future__ import annotations

import argparse

from .._util.quoting import word
from .._util.timeparse import parse_duration
from ..api import wait
from ..views.lines import run_line
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="run id (default: the latest)")
    p.add_argument("--since", type=options.int_in(0, options.CURSOR_MAX), default=0,
                   metavar="CURSOR",
                   help="only events after this cursor (printed by the last wait)")
    p.add_argument("--timeout", type=options.duration, help="give up after this long (exit 124)")
    p.add_argument("--any", action="store_true", help="also wake when a unit succeeds")


def run(args: argparse.Namespace) -> int:
    limit = parse_duration(args.timeout, what="--timeout") if args.timeout else None
    woke = wait(args.run_id, since=args.since, timeout=limit, any_done=args.any)
    for ev in woke.events:
        words = ["EVENT", str(ev.seq), ev.what]
        if ev.packet_id:
            words.append(word("packet", ev.packet_id))
        if ev.what == "parked" and ev.data.get("reason"):
            words.append(word("reason", ev.data["reason"]))
        if ev.status and ev.status != ev.what:
            words.append(word("status", ev.status))
        if ev.cause:
            words.append(word("cause", ev.cause.splitlines()[0][:200]))
        words += [word(k, ev.data[k]) for k in ("handoff", "receipt_cmd", "resets_at")
                  if ev.data.get(k)]
        print(" ".join(words))
    if woke.supervisor_gone:
        print(f"EVENT {woke.cursor} supervisor-gone cause=\"run `prun resume {woke.run_id}`\"")
    print(run_line(woke.run))
    print(f"CURSOR {woke.cursor}")
    return woke.exit_code
