"""prun's exception tree. Every error that prun expects carries its data and its exit code.

    PrunError                 exit 1   base: message, hint, exit_code
    ├── UsageError            exit 2   refused before anything was made (bad flag, file, env value)
    ├── QuotaExhausted        exit 75  a quota group is known to be empty (group, resets_at)
    ├── LaunchError           exit 1   the executor could not be started (binary missing, exec failed)
    └── StateError            exit 1   a state dir, snapshot or ledger is unreadable or inconsistent

The CLI is the single boundary that turns these into one stderr line and an exit code
(`prun.cli.main`); anything else is a bug and keeps its traceback. Code branches on the
attributes (``exit_code``, ``resets_at``), never on the message text.
"""

from __future__ import annotations

# Exit codes shared by every command; each command's docs list the ones it uses.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_QUOTA = 75
EXIT_TIMEOUT = 124
EXIT_INTERNAL = 70


class PrunError(Exception):
    """An error prun expected: one line of message, an optional hint saying how to fix it."""

    exit_code: int = EXIT_FAILED

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if exit_code is not None:
            self.exit_code = exit_code

    def line(self) -> str:
        """The one stderr line the CLI prints for this error."""
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(PrunError):
    """Bad input: refused before any state was created, nothing left behind."""

    exit_code = EXIT_USAGE


class QuotaExhausted(PrunError):
    """A quota group the snapshot reads as empty; ``resets_at`` is an ISO time or None."""

    exit_code = EXIT_QUOTA

    def __init__(self, message: str, *, group: str, resets_at: str | None = None, hint=None):
        super().__init__(message, hint=hint)
        self.group = group
        self.resets_at = resets_at


class LaunchError(PrunError):
    """The executor's program could not be started."""


class StateError(PrunError):
    """Persistent state (state dir, snapshot, ledger) is missing, unreadable or inconsistent."""
