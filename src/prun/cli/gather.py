"""Wait until result files have landed; print each one the moment it does.

Prints `GATHER-START count=N timeout=Ss`, then `DONE <absolute path>` per file as it lands.
A file has landed when it exists, is non-empty and is final: published by a prun dispatcher
(at once), or quiet for the stable window (anyone else's file). A file already complete when
gather starts counts. A file prun published that was then written again in place (by something
its unit left running) lands as `CHANGED <path> reason=result-changed` instead: do not trust it.

environment: PRUN_GATHER_TIMEOUT, PRUN_STABLE_WINDOW (seconds or 10s, 2m, ...),
PRUN_WATCH=native|poll, PRUN_WATCH_POLL_INTERVAL, PRUN_STATE_ROOT (where the published-results
index lives).

exit codes: 0 every file landed; 1 every file landed, one or more CHANGED; 2 the timeout passed
first (`TIMEOUT remaining=<k>`), or bad usage.
"""

from __future__ import annotations

import argparse
import sys

from ..settings import current
from ..watch.gather import gather
from ..watch.notify import exit_quickly, poll_interval, resolve_mode
from . import options
from .options import duration_option


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("results", nargs="+", metavar="RESULT", type=options.path, help="result files to wait for")
    p.add_argument("--timeout", type=options.duration,
                   help="give up after this long (seconds or 45m; default "
                   "$PRUN_GATHER_TIMEOUT, else 3600)")
    p.add_argument("--stable-window", type=options.duration,
                   help="how long a file not published by a prun dispatcher "
                   "must stay unchanged (default $PRUN_STABLE_WINDOW, else 10s)")
    p.add_argument("--poll", action="store_true",
                   help="poll folders instead of file-system notifications (as PRUN_WATCH=poll)")


def run(args: argparse.Namespace) -> int:
    s = current()
    timeout = duration_option(args.timeout, "--timeout", s.gather_timeout_s)
    window = duration_option(args.stable_window, "--stable-window", s.stable_window_s)
    mode = resolve_mode(args.poll)
    interval = poll_interval()

    def emit(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    exit_quickly()
    return gather(args.results, emit=emit, timeout=timeout, window=window, mode=mode,
                  interval=interval)
