"""Attach the subagent's identifier to a session unit (the dispatch receipt).

A session unit (`prun dispatch --executor session`) has no process; the coordinator spawns the
subagent itself and hands its non-empty identifier here. It is written atomically to
`<state-dir>/receipt`. stdout: `RECEIPT <state-dir> attempt-id=<id>`.

Giving the same identifier again is a no-op; a different one is refused (a reassignment is a
new attempt: dispatch the unit again).

exit codes: 0 recorded (or already recorded); 2 refused (not a session unit's state dir, empty
identifier, or another identifier already recorded).
"""

from __future__ import annotations

import argparse

from .. import executors
from .._util.fsutil import publish_new
from .._util.quoting import quote, word
from ..attempt import statedir
from ..errors import UsageError
from ..ledger import record_receipt
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("state_dir", metavar="STATE_DIR", type=options.path,
                   help="the STATE-DIR of a session unit")
    p.add_argument("--attempt-id", required=True,
                   help="the identifier the runtime returned for the subagent")


def run(args: argparse.Namespace) -> int:
    attempt = (args.attempt_id or "").strip()
    if not attempt or not attempt.isprintable() or len(attempt) > options.NAME_MAX:
        raise UsageError("empty, multi-line or unprintable --attempt-id (or over "
                         f"{options.NAME_MAX} characters)",
                         hint="pass the non-empty identifier the runtime returned; "
                              "no identifier means the unit was not dispatched")
    sd = statedir.open_existing(args.state_dir)
    unit = sd.unit
    if not unit:
        raise UsageError(f"no unit.json in {sd.path}", hint="pass the path printed as STATE-DIR")

    ex = executors.lookup(unit.get("executor"))
    if ex is None or ex.launches_process:
        raise UsageError(f"{sd.path} is a {unit.get('executor')} unit, not a session unit",
                         hint="receipts are only for units the coordinator runs itself")
    # publish_new never replaces: of two racing receipts exactly one is kept
    if not publish_new(sd.file(statedir.RECEIPT), attempt + "\n"):
        held = sd.read(statedir.RECEIPT)
        if held != attempt:
            raise UsageError(f"{sd.path} already has receipt {held}",
                             hint="a reassignment is a new attempt: dispatch the unit again")
    record_receipt(sd.path, unit, attempt)  # the ledger (never fails the command)
    print(f"RECEIPT {quote(sd.path)} {word('attempt-id', attempt)}")
    return 0
