"""What a standalone ``prun dispatch`` records in the ledger: its attempt as it begins, launches
and finishes, and a session unit's receipt. Never raises: an unwritable ledger costs one warning
on stderr, not the dispatch."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import StateError
from .statuses import OutcomeKind, Status, attempt_status
from .store import Ledger
from .writes import now_iso

if TYPE_CHECKING:
    from ..attempt.dispatch import Dispatch

_warned = False


def record_dispatch(step: str, dispatch: Dispatch) -> None:
    """Record a standalone ``prun dispatch`` attempt (``step``: begin, launch, finish).

    Never raises: an unwritable ledger costs one warning on stderr, not the dispatch.
    """
    global _warned
    if _warned or _off():
        return
    try:
        _record_dispatch(step, dispatch)
    except (sqlite3.Error, OSError, StateError, ValueError) as e:  # never fails a dispatch
        _warned = True
        print(f"prun: warning: the ledger was not updated ({e}); the dispatch goes on",
              file=sys.stderr)


def record_receipt(state_dir: str, unit: Mapping[str, object], receipt: str) -> None:
    """A standalone session unit's receipt (``prun receipt``); a run's supervisor picks its
    own units' receipts up from the state dir. Never raises (one warning at most)."""
    global _warned
    if unit.get("attempt_id") or _warned or _off():
        return
    try:
        with Ledger.open() as ledger:
            aid = os.path.basename(os.path.normpath(state_dir))
            if ledger.attempt(aid) is not None:
                ledger.update_attempt(aid, "the coordinator attached its receipt",
                                      status=Status.DISPATCHED, receipt=receipt,
                                      dispatched_at=now_iso())
    except (sqlite3.Error, OSError, StateError, ValueError) as e:
        _warned = True
        print(f"prun: warning: the ledger was not updated ({e})", file=sys.stderr)


def _off() -> bool:
    """``PRUN_LEDGER=off``: standalone dispatches record nothing."""
    from ..settings import current

    return current().ledger_off


def _record_dispatch(step: str, d: Dispatch) -> None:
    p = d.p
    attempt_id = os.path.basename(d.state.path)
    ledger = Ledger.open()
    try:
        if step == "begin":
            ledger.record_attempt(
                attempt_id, "prun dispatch", packet_id=p.request.unit_id,
                executor=p.executor.name, requested_model=d.requested_model,
                model=d.settings.model, routing_reason="named by the caller", mode=p.mode,
                workspace=d.workspace, state_dir=d.state.path, result_path=p.result_file,
                continue_from=p.request.continue_from)
        elif step == "launch":
            ledger.update_attempt(attempt_id, "worker started", status=Status.DISPATCHED,
                                  receipt=d.receipt, workspace=d.workspace,
                                  model=d.settings.model, dispatched_at=now_iso(),
                                  sandboxed=d.sandboxed)
        elif step == "finish":
            o = d.outcome
            assert o is not None, "a dispatch finishes once its outcome is judged"
            status = attempt_status(o.kind)
            if not d.receipt and o.kind != OutcomeKind.QUOTA:
                status = Status.NOT_DISPATCHED
            spent = o.spend
            ledger.update_attempt(attempt_id, o.reason, status=status, reason=o.reason,
                                  exit_code=int(o.exit_code), error=(o.error or None),
                                  resets_at=o.quota.resets_at if o.quota else None,
                                  tokens_in=spent.tokens_in if spent else None,
                                  tokens_out=spent.tokens_out if spent else None,
                                  tokens_cached=spent.tokens_cached if spent else None,
                                  cost_usd=spent.cost_usd if spent else None,
                                  finished_at=now_iso())
    finally:
        ledger.close()
