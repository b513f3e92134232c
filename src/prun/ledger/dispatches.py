"""What a standalone ``prun dispatch`` records in the ledger: its attempt as it begins
(``begun``), launches (``launched``) and finishes (``finished``), and a session unit's receipt,
each from plain values its driver passes (``prun.attempt.recording``). Never raises: an
unwritable ledger costs one warning on stderr, not the dispatch."""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Callable, Mapping

from ..errors import StateError
from ..settings import current
from .statuses import OutcomeKind, Status, attempt_status
from .store import Ledger
from .writes import now_iso

_warned = False


def _guarded(write: Callable[[Ledger], None]) -> None:
    """``write`` on the ledger, never raising: one warning, then nothing more is tried."""
    global _warned
    if _warned or _off():
        return
    try:
        ledger = Ledger.open()
        try:
            write(ledger)
        finally:
            ledger.close()
    except (sqlite3.Error, OSError, StateError, ValueError) as e:  # never fails a dispatch
        _warned = True
        print(f"prun: warning: the ledger was not updated ({e}); the dispatch goes on",
              file=sys.stderr)


def begun(attempt_id: str, *, packet_id: str, executor: str, requested_model: str | None,
          model: str | None, mode: str, workspace: str | None, state_dir: str,
          result_path: str, continue_from: str | None) -> None:
    """A standalone attempt's row, as it begins."""
    _guarded(lambda ledger: ledger.record_attempt(
        attempt_id, "prun dispatch", packet_id=packet_id, executor=executor,
        requested_model=requested_model, model=model, routing_reason="named by the caller",
        mode=mode, workspace=workspace, state_dir=state_dir, result_path=result_path,
        continue_from=continue_from))


def launched(attempt_id: str, *, receipt: str | None, workspace: str | None,
             model: str | None, sandboxed: bool | None) -> None:
    """Its worker started."""
    _guarded(lambda ledger: ledger.update_attempt(
        attempt_id, "worker started", status=Status.DISPATCHED, receipt=receipt,
        workspace=workspace, model=model, dispatched_at=now_iso(), sandboxed=sandboxed))


def finished(attempt_id: str, *, kind: OutcomeKind, reason: str, exit_code: int,
             error: str | None, resets_at: str | None, dispatched: bool,
             tokens_in: int | None = None, tokens_out: int | None = None,
             tokens_cached: int | None = None, cost_usd: float | None = None) -> None:
    """Its end (``dispatched``: a worker was started, or the coordinator attached a
    receipt; else it ends not dispatched, unless the quota gate refused it)."""
    status = attempt_status(kind)
    if not dispatched and kind != OutcomeKind.QUOTA:
        status = Status.NOT_DISPATCHED
    _guarded(lambda ledger: ledger.update_attempt(
        attempt_id, reason, status=status, reason=reason, exit_code=exit_code,
        error=error or None, resets_at=resets_at, tokens_in=tokens_in, tokens_out=tokens_out,
        tokens_cached=tokens_cached, cost_usd=cost_usd, finished_at=now_iso()))


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
    return current().ledger_off
