"""prun's exit codes and its exception tree. Every error prun expects carries its data and its
exit code; code branches on the attributes, never on the message text.

    BaseException
    ├── Cancelled              a dispatcher was told to stop (SIGTERM, SIGINT, SIGHUP): not an
    │                          Exception, so no ``except Exception`` can swallow it
    └── Exception
        └── PrunError          exit 1: message, hint, exit_code
            ├── UsageError     exit 2: refused before anything was made (bad flag, file, value)
            │   └── ConfigError       the config file cannot be read or holds a bad value
            ├── QuotaExhausted exit 75: a quota group is known to be empty (group, resets_at)
            │   └── GateRefusal       an executor's quota gate refused the launch (note)
            ├── LaunchError    the executor's program could not be started
            ├── StateError     a state dir, snapshot, registry or ledger is unreadable or
            │                  inconsistent
            ├── GitError       a git command failed (argv, returncode, stderr)
            ├── WorkspaceError a workspace could not be made, prepared or removed
            │   ├── SetupFailed       the plan's setup command failed or timed out (result)
            │   └── PrimeFailed       the plan's workspace prime failed or timed out (key, log)
            ├── PortsUnavailable      the ports a unit needs cannot be had now
            │   ├── PortBusy          a fixed port another live unit holds (port, wanted, holder)
            │   └── PortsExhausted    no free run of ports is left (count, start)
            └── Blocked        a packet a dependent comes after was rejected (reason)

The CLI is the single boundary that turns these into one stderr line and an exit code
(``prun.cli.main``); anything else is a bug and keeps its traceback (exit 70).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Every exit code of every ``prun`` command; each means one thing wherever it appears."""

    OK = 0                 # done; every unit succeeded; nothing to report
    FAILED = 1             # something did not succeed: a unit, a run, a check, a rejection
    USAGE = 2              # bad usage, refused before anything was made (and gather's
                           # TIMEOUT, which the seed fixes at 2)
    STOPPED = 3            # a run stopped: a packet could not be dispatched (no receipt)
    UNIT_FAILED = 4        # wait, monitor: a unit failed, timed out, was cancelled or blocked
    STALLED = 5            # wait, monitor: a unit stalled (no output for the stall threshold)
    PARKED = 6             # wait: a unit was parked until its quota pool resets
    SUPERVISOR_GONE = 7    # wait: the run's supervisor is gone (prun resume RUN)
    UNIT_SUCCEEDED = 8     # wait --any: a unit succeeded
    HANDOFF = 9            # wait: a session unit was handed to the coordinator
    NEEDS_REVIEW = 10      # reconcile: nothing rejected, something needs review or is unfinished;
                           # panel: the answers disagree somewhere, or one is invalid
    CONFLICT = 11          # integrate: a change conflicted and was not applied
    INTERNAL = 70          # a bug in prun: a traceback was printed
    QUOTA = 75             # a quota pool is empty: the dispatcher refused, a unit waits
    TIMEOUT = 124          # a timeout or deadline passed
    INTERRUPTED = 130      # Ctrl-C


class Cancelled(BaseException):
    """A waiting dispatcher was told to stop (SIGTERM, SIGINT or SIGHUP)."""


class PrunError(Exception):
    """An error prun expected: one line of message, an optional hint saying how to fix it."""

    exit_code: int = ExitCode.FAILED

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

    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """The config file cannot be read or holds a bad value (exit 2)."""


class QuotaExhausted(PrunError):
    """A quota group the snapshot reads as empty; ``resets_at`` is an ISO time or None."""

    exit_code = ExitCode.QUOTA

    def __init__(self, message: str, *, group: str, resets_at: str | None = None,
                 hint: str | None = None):
        super().__init__(message, hint=hint)
        self.group = group
        self.resets_at = resets_at


class GateRefusal(QuotaExhausted):
    """An executor's quota gate refused a launch (exit 75). ``note`` is the line for
    ``<state>/quota-note``."""

    def __init__(self, message: str, *, group: str, resets_at: str | None, hint: str | None,
                 note: str):
        super().__init__(message, group=group, resets_at=resets_at, hint=hint)
        self.note = note


class LaunchError(PrunError):
    """The executor's program could not be started."""


class StateError(PrunError):
    """Persistent state (state dir, snapshot, registry, ledger) is missing, unreadable or
    inconsistent."""


class GitError(PrunError):
    """A git command failed: ``argv``, ``returncode`` and ``stderr`` say how."""

    def __init__(self, argv: list[str] | tuple[str, ...], returncode: int, stderr: str, *,
                 hint: str | None = None):
        first = (stderr.strip().splitlines() or [f"exit code {returncode}"])[-1]
        super().__init__(f"git {' '.join(argv)}: {first}", hint=hint)
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr


class WorkspaceError(PrunError):
    """A workspace could not be made, prepared or removed."""


class SetupFailed(WorkspaceError):
    """The plan's setup ``command`` failed (``returncode``) or timed out (``timed_out``);
    ``last_line`` is the last line of its output and ``log`` the file that holds all of it."""

    def __init__(self, command: str, *, returncode: int | None, timed_out: bool,
                 last_line: str, log: str):
        why = "timed out" if timed_out else f"exited with code {returncode}"
        super().__init__(f"setup command {command!r} {why}: {last_line}".rstrip(": "),
                         hint=f"see {log}; fix the plan's setup command")
        self.command = command
        self.returncode = returncode
        self.timed_out = timed_out
        self.last_line = last_line
        self.log = log


class PrimeFailed(WorkspaceError):
    """The plan's workspace ``prime`` failed or timed out in the template of ``key``; ``log``
    holds its output. Its template is not kept: the next unit needing it primes again."""

    def __init__(self, key: str, why: str, *, log: str):
        super().__init__(f"prime {key[:12]} {why}", hint=f"see {log}; fix the plan's "
                         "workspace prime")
        self.key = key
        self.why = why
        self.log = log


class PortsUnavailable(PrunError):
    """The ports a unit needs cannot be had now; they can once other units release theirs."""


class PortBusy(PortsUnavailable):
    """A fixed port the unit asked for (``wanted``: first port and count) is held by another
    live attempt (``attempt_id`` of ``run_id``, ``packet_id``)."""

    def __init__(self, port: int, wanted: tuple[int, int], *, attempt_id: str,
                 run_id: str | None, packet_id: str | None):
        base, count = wanted
        what = f"port {port}" if count == 1 else f"port {port} of port:{base}-{base + count - 1}"
        super().__init__(
            f"{what} is held by attempt {attempt_id} (run {run_id or '-'}, "
            f"packet {packet_id or '-'})",
            hint="it is free again when that attempt ends; port:NAME gives a port of its own")
        self.port = port
        self.wanted = wanted
        self.attempt_id = attempt_id
        self.run_id = run_id
        self.packet_id = packet_id


class PortsExhausted(PortsUnavailable):
    """No free run of ``count`` ports is left from ``start`` up to the last port."""

    def __init__(self, count: int, start: int, last: int = 65535):
        super().__init__(f"no {count} free contiguous ports from {start} to {last}",
                         hint="wait for other units to end, or set a lower PRUN_PORT_START "
                         "or PRUN_PORT_COUNT")
        self.count = count
        self.start = start


class Blocked(PrunError):
    """A packet a dependent comes after was rejected: ``reason`` says which and why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NotIndependent(PrunError):
    """A plan failed the independence test and no overlap was allowed: nothing was made.
    ``lines`` are the test's ``FAIL`` lines and its summary line."""

    def __init__(self, lines: tuple[str, ...]):
        super().__init__("the plan fails the independence test; nothing was run",
                         hint="fix the packets, or pass --allow-overlap to run it anyway")
        self.lines = lines
