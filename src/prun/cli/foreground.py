"""A run driven in this process (``prun run``, ``prun resume``): the supervisor with the live
table or the terse lines, then the summary and the run's exit code (not a command itself)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from ..api import run_exit_code
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
    return exit_code(status)


def exit_code(status: str) -> int:
    return run_exit_code(status)
