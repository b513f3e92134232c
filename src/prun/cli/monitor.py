"""Watch running units' state dirs; return on the first actionable event.

Prints one summary line naming the event and counting units by state
(`<EVENT> units=N done= running= stalled= failed= waiting= watch=`), one `UNIT <id> ...` digest
line per unit, then, when some units are still running, the command that re-launches the monitor
on them. `--json` prints the same as one object. It only observes: it never signals, moves or
writes anything of a unit's.

events and exit codes:
  0    ALL-DONE  every unit's result has landed
  5    STALLED   a unit's tail has not grown for the stall threshold
  4    FAILED    a FALLBACK result, a dead dispatcher (gone without outcome.json), or no result
  124  TIMEOUT   --timeout passed first
  2    bad usage (not a state dir, bad duration, bad PRUN_WATCH)

environment: PRUN_STALL_THRESHOLD (seconds or 10m; default 10m), PRUN_STABLE_WINDOW (default
10s), PRUN_WATCH=native|poll, PRUN_WATCH_POLL_INTERVAL, PRUN_MONITOR_COMMAND (how the
re-launch line starts, verbatim, in the caller's shell syntax; default `prun monitor`; the
skill's monitor scripts set it to themselves).
"""

from __future__ import annotations

import argparse
import json
import sys

from .._util.quoting import shell_word
from .._util.timeparse import parse_duration
from ..errors import UsageError
from ..settings import current
from ..watch.monitor import Monitor, digest_line, relaunch_argv, summary_line
from ..watch.notify import exit_quickly, poll_interval, resolve_mode
from . import options
from .options import duration_option


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("state_dirs", nargs="*", metavar="STATE_DIR", type=options.path,
                   help="state dirs to watch")
    p.add_argument("--stall-threshold", type=options.duration, help="tail idle time that counts as a stall "
                   "(default $PRUN_STALL_THRESHOLD, else 10m)")
    p.add_argument("--stable-window", type=options.duration,
                   help="how long a worker-written result must stay "
                   "unchanged to count as done (default $PRUN_STABLE_WINDOW, else 10s)")
    p.add_argument("--seen-stalled", action="append", default=[], metavar="STATE_DIR",
                   type=options.path,
                   help="a unit already reported stalled: its stall clock restarts now")
    p.add_argument("--timeout", type=options.duration,
                   help="return TIMEOUT (124) after this long (default: never)")
    p.add_argument("--poll", action="store_true",
                   help="poll folders instead of file-system notifications (as PRUN_WATCH=poll)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of lines")


def run(args: argparse.Namespace) -> int:
    if not args.state_dirs and not args.seen_stalled:
        raise UsageError("no state dir given", hint="pass the STATE-DIR paths of the units")
    s = current()
    stall = duration_option(args.stall_threshold, "--stall-threshold", s.stall_s)
    window = duration_option(args.stable_window, "--stable-window", s.stable_window_s)
    timeout = parse_duration(args.timeout, what="--timeout") if args.timeout else None
    mode = resolve_mode(args.poll)
    monitor = Monitor(args.state_dirs, stall_s=stall, window=window, mode=mode,
                      interval=poll_interval(), seen_stalled=args.seen_stalled)
    report = monitor.run(timeout)
    exit_quickly()

    flags = []
    for flag, value in (("--stall-threshold", args.stall_threshold),
                        ("--stable-window", args.stable_window)):
        if value is not None:
            flags += [flag, value]
    if args.poll:
        flags.append("--poll")
    prefix = s.monitor_command
    relaunch = (f"{prefix} {' '.join(shell_word(a) for a in relaunch_argv(report, flags))}"
                if report.still_running else None)
    if args.json:
        obj = report.as_dict()
        obj["relaunch"] = relaunch
        sys.stdout.write(json.dumps(obj, sort_keys=True) + "\n")
    else:
        lines = [summary_line(report), *(digest_line(u) for u in report.units)]
        if relaunch:
            lines.append(relaunch)
        sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()
    return report.exit_code
