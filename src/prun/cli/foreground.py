"""A run driven in this process (``prun run``, ``prun resume``): the supervisor with the live
table or the terse lines, then the summary (and, when every unit succeeded, a ``REJECTED``
line for each packet ``prun reconcile`` will reject all the same) and the run's exit code (not
a command itself)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ..api import foreseen_rejections, run_exit_code
from ..run.keeper import Keeper
from ..views.lines import summary_lines
from ..views.model import view

if TYPE_CHECKING:
    from ..ledger import Ledger


def supervise(ledger: Ledger, run_id: str, *, verbose: bool = False, plain: bool = False) -> int:
    """Drive the run in this process with a renderer; print the summary; the exit code."""
    keeper = Keeper(dict(os.environ))
    keeper.launch()  # its start-up overlaps the supervisor's imports
    try:
        from ..ledger import Ledger
        from ..run.events import LineRenderer
        from ..run.supervisor import run_supervisor
        from ..views.live import LiveRenderer

        live = sys.stdout.isatty() and not plain
        renderer = LiveRenderer(Ledger.open(ledger.path), run_id) if live else \
            LineRenderer(sys.stdout, verbose=verbose)
        try:
            status = run_supervisor(run_id, renderer.handle, ledger, keeper=keeper)
        finally:
            renderer.close()
    finally:
        keeper.close()

    for line in summary_lines(view(ledger, run_id)):
        print(line)
    if status == "succeeded":
        _foresee(run_id)
    return exit_code(status)


def _foresee(run_id: str) -> None:
    """Every unit succeeded: say which packets ``prun reconcile`` will reject all the same."""
    rejected = foreseen_rejections(run_id)
    for v in rejected:
        for line in v.lines():
            print(line)
    if rejected:
        print(f"prun: every unit succeeded, but `prun reconcile {run_id}` will reject "
              f"{len(rejected)} packet{'s' if len(rejected) > 1 else ''} (the REJECTED lines)",
              file=sys.stderr)


def exit_code(status: str) -> int:
    return run_exit_code(status)
