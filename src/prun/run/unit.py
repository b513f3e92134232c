"""One packet as a run's supervisor drives it: ``UnitState``, the per-unit state every part of
the supervisor reads and changes (the scheduler, the attempt's driving, control requests,
recovery).

The packet's status is the truth the ledger records; the other fields say what its current
(or last) attempt is and what its next attempt carries on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._util.fsutil import file_size, read_head
from .._util.timeparse import epoch
from ..attempt import statedir
from ..ledger import PacketStatus
from ..plan import Packet
from . import brief

if TYPE_CHECKING:
    from ..executors.base import Executor
    from ..ports.reserve import Reservation

EXCERPT_BYTES = 8000


@dataclass
class UnitState:
    """One packet as the supervisor drives it."""

    packet: Packet
    status: PacketStatus
    executor: str
    reason: str
    base: str | None
    seq: int = 0                       # attempts made so far
    attempt_id: str | None = None      # the current (or last) attempt
    predecessor: str | None = None     # links the next attempt to the one before it
    continue_from: str | None = None   # a state dir to resume (quota follow-up)
    park_until: float | None = None
    not_before: float | None = None        # waiting for a held fixed port until then
    stop: asyncio.Event | None = None
    superseded: bool = False           # reassigned while running: its output is rejected
    cancel_requested: bool = False
    state_dir: str | None = None
    stalled: bool = False
    started: float | None = None
    # the current (or last) attempt's workspace, the commit it started from, its result file
    workspace: str | None = None
    attempt_base: str | None = None
    result_file: str | None = None
    # the next attempt: a follow-up keeps the workspace; its prompt, or what it carries on
    reuse_workspace: str | None = None
    followup: str | None = None
    earlier: brief.Earlier | None = None   # what a fresh start carries on
    followups: list[str] = field(default_factory=list)   # requested while it was running
    # the current attempt: its ports, the follow-up request it was given, the result of the
    # attempt whose conversation it resumes (a fresh start after a refused resume carries it)
    ports: Reservation | None = None
    asked: str | None = None
    resumed_result: str | None = None
    port_note: str | None = None           # why it waits for its ports, said once
    held: str | None = None                # why the machine's room holds it (memfree, load)
    lost_retries: int = 0                  # successors given after lost cluster workers

    @property
    def current_attempt(self) -> str:
        """The id of its current (or last) attempt, which it has from its first one on."""
        if self.attempt_id is None:
            raise RuntimeError(f"packet {self.packet.id} has no attempt yet")
        return self.attempt_id

    def carry_on(self, executor: Executor, asked: str | None, *, because: str,
                 fresh: bool = False, earlier_result: str | None = None) -> None:
        """Make the next attempt carry on the latest one: linked to it, in the same
        workspace (no edit is lost; Gemini resumes only from the folder it ran in), resuming
        its conversation where the executor can, else a fresh brief saying what it left."""
        last = self.attempt_id
        self.predecessor = last
        self.reuse_workspace = self.workspace
        self.followup = asked
        resumable = (not fresh and executor.can_resume and self.state_dir
                     and statedir.StateDir(self.state_dir).read(statedir.CONVERSATION_ID))
        self.continue_from = self.state_dir if resumable else None
        self.resumed_result = self.result_file if resumable else None
        if not resumable:
            result = earlier_result or self.result_file
            self.earlier = brief.Earlier(last or "", because, result, excerpt(result))


def excerpt(path: str | None) -> str | None:
    """The start of an earlier attempt's result, for a fresh attempt that carries it on (only
    its start is read: a result may be tens of megabytes)."""
    if not path:
        return None
    head = read_head(path, 4 * EXCERPT_BYTES)   # at least EXCERPT_BYTES characters
    text = head.decode("utf-8", "replace").strip()
    if not text:
        return None
    if len(text) > EXCERPT_BYTES or file_size(path) > len(head):
        text = text[:EXCERPT_BYTES] + f"\n\n[... cut: the whole result is at {path}]"
    return text


def parse_time(iso: str | None) -> float | None:
    return epoch(iso) if iso else None
