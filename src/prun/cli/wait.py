"""Block until a run has something to act on, like the seed's monitor, then say what.

Wakes on the first actionable event after the cursor: a unit failed, timed out, was
cancelled or blocked, stalled (no output for PRUN_STALL_THRESHOLD, default 10 min), was
parked for quota, a session unit waits for the coordinator, the run stopped (no receipt)
or finished, or its supervisor is gone. A run's end that a later re-opening (a follow-up, a
resume) superseded is not reported: the wait goes on to the re-opened run's own events.
`--any` also wakes on each unit that succeeded (to keep a pool busy with follow-ups).

    EVENT <seq> <kind> packet=<id> [status=<s>] [cause="..."]     (each event found)
    RUN <run-id> status=<s> packets=<n> <status>=<count>... supervisor=<alive|gone>
    CURSOR <seq>                    (pass it as --since to wait for the next event)

exit codes (README, "Exit codes"): 0 the run finished and every packet succeeded; 1 the run
finished otherwise; 3 the run stopped (no receipt); 4 a unit failed, timed out, was cancelled or
blocked; 5 a unit stalled; 6 a unit was parked for quota; 7 the supervisor is gone (prun resume
RUN); 8 a unit succeeded (--any); 9 a session unit was handed to the coordinator (run its
`handoff=` file as a subagent, then its `receipt_cmd=`); 124 --timeout passed with nothing to
report.
"""

from __future__ import annotations

import argparse
import json
import time

from ..errors import ExitCode
from . import options

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

FAIL_STATUSES = {"failed", "timeout", "cancelled", "blocked"}
CODES = {"stopped": ExitCode.STOPPED, "failed": ExitCode.UNIT_FAILED,
         "stalled": ExitCode.STALLED, "parked": ExitCode.PARKED,
         "supervisor-gone": ExitCode.SUPERVISOR_GONE, "succeeded": ExitCode.UNIT_SUCCEEDED,
         "handoff": ExitCode.HANDOFF}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="run id (default: the latest)")
    p.add_argument("--since", type=options.int_in(0, options.CURSOR_MAX), default=0,
                   metavar="CURSOR",
                   help="only events after this cursor (printed by the last wait)")
    p.add_argument("--timeout", type=options.duration, help="give up after this long (exit 124)")
    p.add_argument("--any", action="store_true", help="also wake when a unit succeeds")


def classify(ev: sqlite3.Row, any_done: bool) -> str | None:
    kind: str = ev["kind"]
    status: str | None = ev["status"]
    if kind in ("stalled", "stopped", "parked", "handoff"):
        return kind
    if kind == "packet" and status in FAIL_STATUSES:
        return "failed"
    if kind == "packet" and status == "succeeded" and any_done:
        return "succeeded"
    if kind == "run" and status not in (None, "running"):
        return "run-done"
    return None


def run(args: argparse.Namespace) -> int:
    from .._util.quoting import word
    from .._util.timeparse import parse_duration
    from ..ledger import Ledger
    from ..run.detached import supervisor_alive
    from ..views.lines import run_line
    from ..views.model import find_run, view

    limit = parse_duration(args.timeout, what="--timeout") if args.timeout else None
    start = time.monotonic()
    delay = 0.05
    with Ledger.open(create=False) as ledger:
        run_id = find_run(ledger, args.run_id)["id"]
        cursor = args.since
        while True:
            found: list[tuple[str, sqlite3.Row]] = []
            for ev in ledger.events(run_id, since=cursor):
                cursor = ev["seq"]
                if ev["kind"] == "run" and ev["status"] == "running":
                    # re-opened (a follow-up, a resume): its earlier end is no longer news
                    found = [f for f in found if f[0] != "run-done"]
                what = classify(ev, args.any)
                if what:
                    found.append((what, ev))
            # read after the events: a run that ended meanwhile shows its end event next time
            run = ledger.run(run_id)
            assert run is not None  # the run just found; runs are never deleted
            gone = not found and run["status"] == "running" and not supervisor_alive(run)
            if found or gone:
                for what, ev in found:
                    words = ["EVENT", str(ev["seq"]), what]
                    if ev["packet_id"]:
                        words.append(word("packet", ev["packet_id"]))
                    if ev["status"] and ev["status"] != what:
                        words.append(word("status", ev["status"]))
                    if ev["cause"]:
                        words.append(word("cause", ev["cause"].splitlines()[0][:200]))
                    data = json.loads(ev["data"]) if ev["data"] else {}
                    words += [word(k, data[k]) for k in ("handoff", "receipt_cmd", "resets_at")
                              if data.get(k)]
                    print(" ".join(words))
                if gone:
                    print(f"EVENT {cursor} supervisor-gone cause=\"run `prun resume {run_id}`\"")
                print(run_line(view(ledger, run_id)))
                print(f"CURSOR {cursor}")
                end = ledger.run(run_id)
                assert end is not None
                return _code(found, gone, end["status"])
            if limit is not None and time.monotonic() - start >= limit:
                print(run_line(view(ledger, run_id)))
                print(f"CURSOR {cursor}")
                return ExitCode.TIMEOUT
            time.sleep(delay)
            delay = min(delay * 1.5, 1.0)


def _code(found: list[tuple[str, sqlite3.Row]], gone: bool, status: str) -> int:
    kinds = [w for w, _ in found]
    if "run-done" in kinds:
        return {"succeeded": ExitCode.OK, "stopped": ExitCode.STOPPED}.get(status,
                                                                          ExitCode.FAILED)
    for k in ("stopped", "failed", "handoff", "stalled", "parked", "succeeded"):
        if k in kinds:
            return CODES[k]
    return CODES["supervisor-gone"] if gone else ExitCode.FAILED
