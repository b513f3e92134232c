"""The life of attempts, packets and runs: their statuses (``StrEnum``s stored in the ledger) and
the one transition table from how an attempt ended (an outcome) to its status, and from an
attempt's final status to its packet's.

    outcome (the dispatcher's judgement)  ->  attempt status  ->  packet status
    succeeded                                 succeeded           succeeded
    failed                                    failed              failed
    timeout                                   timeout             timeout
    cancelled                                 cancelled           cancelled
    quota                                     quota               (a linked attempt follows)
"""

from __future__ import annotations

from enum import StrEnum


class OutcomeKind(StrEnum):
    """How one attempt ended, as its dispatcher judged it (``outcome.json``'s ``outcome``)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    QUOTA = "quota"
    CANCELLED = "cancelled"
    HANDED_OFF = "handed-off"            # a session unit: handed to the coordinator


class Status(StrEnum):
    """An attempt's life. Terminal statuses never change again."""

    PENDING = "pending"                  # created, not launched yet (queued)
    PARKED = "parked"                    # waiting for a quota pool to reset (resets_at)
    DISPATCHED = "dispatched"            # launched; the executor returned a receipt
    RUNNING = "running"                  # a supervisor watches it
    CANCEL_REQUESTED = "cancel-requested"  # ending it; not yet confirmed quiescent
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    QUOTA = "quota"                      # stopped by a quota limit; a linked successor follows
    NOT_DISPATCHED = "not-dispatched"    # the executor gave no receipt (spawn failed)
    QUARANTINED = "quarantined"          # superseded: its late result or changes were rejected

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def live(self) -> bool:
        return self in (Status.DISPATCHED, Status.RUNNING, Status.CANCEL_REQUESTED)


TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.TIMEOUT, Status.CANCELLED,
                      Status.QUOTA, Status.NOT_DISPATCHED, Status.QUARANTINED})


class PacketStatus(StrEnum):
    PENDING = "pending"
    PARKED = "parked"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"                  # a packet it comes after did not succeed

    @property
    def terminal(self) -> bool:
        return self in (PacketStatus.SUCCEEDED, PacketStatus.FAILED, PacketStatus.TIMEOUT,
                        PacketStatus.CANCELLED, PacketStatus.BLOCKED)


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"              # every packet succeeded
    FAILED = "failed"                    # finished; some packet did not succeed
    STOPPED = "stopped"                  # a packet could not be dispatched (no receipt)
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"                  # the terminal deadline passed


# The transition table: an outcome gives its attempt's status; an attempt's final status gives
# its packet's (quota, no receipt and superseded attempts are followed by another attempt
# instead, so they have none).
ATTEMPT_STATUS: dict[OutcomeKind, Status] = {
    OutcomeKind.SUCCEEDED: Status.SUCCEEDED, OutcomeKind.FAILED: Status.FAILED,
    OutcomeKind.TIMEOUT: Status.TIMEOUT, OutcomeKind.QUOTA: Status.QUOTA,
    OutcomeKind.CANCELLED: Status.CANCELLED}
PACKET_STATUS: dict[Status, PacketStatus] = {
    Status.SUCCEEDED: PacketStatus.SUCCEEDED, Status.FAILED: PacketStatus.FAILED,
    Status.TIMEOUT: PacketStatus.TIMEOUT, Status.CANCELLED: PacketStatus.CANCELLED}


def attempt_status(outcome: str) -> Status:
    """The status of an attempt whose dispatcher judged ``outcome`` (anything unknown: failed)."""
    try:
        return ATTEMPT_STATUS[OutcomeKind(outcome)]
    except (ValueError, KeyError):
        return Status.FAILED
