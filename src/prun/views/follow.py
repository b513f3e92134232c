"""Following a run from any terminal while its supervisor drives it elsewhere (``prun status
RUN --watch``, ``prun top RUN``): everything comes from the ledger and the state dirs.

The ledger is asked ``PRAGMA data_version`` every ``POLL_S`` (a read of a counter that changes
only when another connection committed), so a change shows within that; on a terminal the
view is redrawn then, and once a second for the clocks. Elsewhere a snapshot of ``prun
status`` lines is printed at each new event of the run, never a terminal frame. Either way it
ends when the run does, or when its supervisor is gone while the run is still running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live

from ..settings import current
from .lines import summary_lines
from .live import frame, ledger_notices
from .model import view

if TYPE_CHECKING:
    from rich.console import Console

    from ..ledger import Ledger
    from .model import RunView

POLL_S = 0.1
REDRAW_S = 1.0


def _ended(v: RunView) -> bool:
    return v.run["status"] != "running" or not v.supervisor_alive


class Changes:
    """Whether the ledger changed since last asked: its data_version, then the run's last
    event."""

    def __init__(self, ledger: Ledger, run_id: str):
        self.ledger, self.run_id = ledger, run_id
        self.version = self._version()
        self.seq = ledger.last_event_seq(run_id)

    def _version(self) -> int:
        return int(self.ledger.conn.execute("PRAGMA data_version").fetchone()[0])

    def committed(self) -> bool:
        """Another connection committed since the last call."""
        v = self._version()
        changed, self.version = v != self.version, v
        return changed

    def new_event(self) -> bool:
        """The run has an event it did not have at the last call."""
        seq = self.ledger.last_event_seq(self.run_id)
        changed, self.seq = seq != self.seq, seq
        return changed


def follow_lines(ledger: Ledger, run_id: str, emit: Callable[[list[str]], None], *,
                 everything: bool = False) -> RunView:
    """Print ``prun status`` lines now and at each new event of the run, until it ends;
    returns the run as it ended (its last snapshot is its final summary)."""
    changes = Changes(ledger, run_id)
    v = view(ledger, run_id)
    emit(summary_lines(v, everything))
    last_look = time.monotonic()
    while not _ended(v):
        time.sleep(POLL_S)
        committed = changes.committed()
        if not committed and time.monotonic() - last_look < REDRAW_S:
            continue            # the supervisor's liveness is looked at once a second
        last_look = time.monotonic()
        new = changes.new_event() if committed else False
        v = view(ledger, run_id)
        if new or _ended(v):
            emit(summary_lines(v, everything))
    return v


def follow_live(ledger: Ledger, run_id: str, console: Console | None = None) -> RunView:
    """The live view of the run, redrawn at each change and once a second, until it ends;
    the last frame stays on the screen. Returns the run as it ended."""
    console = console or Console()
    stall_s = current().stall_s
    changes = Changes(ledger, run_id)

    def draw() -> RunView:
        v = view(ledger, run_id)
        live.update(frame(v, ledger_notices(ledger, run_id), width=console.width,
                          height=max(3, console.height - 1), stall_s=stall_s), refresh=True)
        return v

    with Live(console=console, auto_refresh=False, transient=False) as live:
        v = draw()
        drawn = time.monotonic()
        while not _ended(v):
            time.sleep(POLL_S)
            if changes.committed() or time.monotonic() - drawn >= REDRAW_S:
                v = draw()
                drawn = time.monotonic()
    return v
