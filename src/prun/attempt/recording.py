"""What a standalone attempt's driver records in the ledger (``prun dispatch``, and ``prun
settle`` of a unit whose dispatcher is gone), as plain values (``ledger.dispatches``); a run's
supervisor records its own units. The ledger is imported when a step is recorded, after the
``STATE-DIR`` line."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .core import Dispatch


def _attempt_id(d: Dispatch) -> str:
    return os.path.basename(d.state.path)


def begun(d: Dispatch) -> None:
    from ..ledger import dispatches

    p = d.p
    dispatches.begun(_attempt_id(d), packet_id=p.request.unit_id, executor=p.executor.name,
                     requested_model=d.requested_model, model=d.settings.model, mode=p.mode,
                     workspace=d.workspace, state_dir=d.state.path, result_path=p.result_file,
                     continue_from=p.request.continue_from)


def launched(d: Dispatch) -> None:
    from ..ledger import dispatches

    dispatches.launched(_attempt_id(d), receipt=d.receipt, workspace=d.workspace,
                        model=d.settings.model, sandboxed=d.sandboxed)


def finished(d: Dispatch) -> None:
    from ..ledger import dispatches

    o = d.outcome
    if o is None:
        raise RuntimeError("an attempt is recorded as finished once its outcome is judged")
    spent = o.spend
    dispatches.finished(_attempt_id(d), kind=o.kind, reason=o.reason,
                        exit_code=int(o.exit_code), error=o.error,
                        resets_at=o.quota.resets_at if o.quota else None,
                        dispatched=bool(d.receipt),
                        tokens_in=spent.tokens_in if spent else None,
                        tokens_out=spent.tokens_out if spent else None,
                        tokens_cached=spent.tokens_cached if spent else None,
                        cost_usd=spent.cost_usd if spent else None)
