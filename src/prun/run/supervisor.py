"""The run supervisor's process: ``python -m prun.run.supervisor RUN`` (a detached run, its
output to its log) and ``run_supervisor`` (``prun run`` in the foreground). Either drives the
run to its end with the run loop (``prun.run.loop``) and prints nothing of its own.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from ..ledger import Ledger, RunStatus
from .detached import ready_signal
from .events import Event, LineRenderer
from .keeper import Keeper
from .loop import Loop


def run_supervisor(run_id: str, emit: Callable[[Event], None], ledger: Ledger | None = None,
                   env: dict[str, str] | None = None, keeper: Keeper | None = None,
                   on_claimed: Callable[[], None] | None = None) -> str:
    """Drive the run to its end in this process; returns the run's final status. ``keeper``:
    one launched already (``Keeper.launch``), else the loop starts its own."""
    own = ledger is None
    ledger = ledger or Ledger.open()
    try:
        loop = Loop(ledger, run_id, emit=emit, env=env, keeper=keeper, on_claimed=on_claimed)
        try:
            return asyncio.run(loop.run_until_done())
        finally:
            loop.ctx.keeper.close()
    finally:
        if own:
            ledger.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m prun.run.supervisor RUN``: the detached supervisor (output to its log)."""
    args = sys.argv[1:] if argv is None else argv
    renderer = LineRenderer(sys.stdout, verbose=True)
    status = run_supervisor(args[0], renderer.handle, on_claimed=ready_signal())
    return 0 if status == RunStatus.SUCCEEDED else 1


if __name__ == "__main__":
    raise SystemExit(main())
