"""A session unit's handle (``executors.session``): what was handed to the coordinator, who
runs it as a subagent and attaches its receipt with ``prun receipt``. There is no process: it
is followed by its receipt and then its result landing, and stopped by being marked cancelled
by whoever runs it (nothing to signal). ``session_launcher.SessionLauncher`` hands it off.
"""

from __future__ import annotations

from . import statedir

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .outcome import Outcome


class HandedOff:
    """A session unit handed to the coordinator: its ``outcome`` (``handed-off``, with the
    lines the coordinator reads), its receipt once attached, whether its result landed."""

    __slots__ = ("outcome", "result_file", "state")

    def __init__(self, outcome: Outcome, state: statedir.StateDir, result_file: str):
        self.outcome = outcome
        self.state = state
        self.result_file = result_file

    def line(self, key: str) -> str | None:
        """The value of the hand-off line ``key`` (``RECEIPT-CMD``: the command that attaches
        the receipt)."""
        return next((x.split(" ", 1)[1] for x in self.outcome.lines
                     if x.startswith(key + " ")), None)

    def receipt(self) -> str | None:
        """The subagent's identifier, once ``prun receipt`` attached it."""
        return self.state.read(statedir.RECEIPT)

    def landed(self) -> bool:
        """Whether its result file landed (non-empty)."""
        from .._util.fsutil import file_size

        return file_size(self.result_file) > 0
