"""The person's decision on one packet, checked and recorded in the ledger: accept, reject or
include the change of the packet's deciding attempt, with who decided and why. ``prun
integrate`` honours it (an accept or include applies the change as ``--include`` does, a reject
leaves it out as a rejected verdict is). Used by the page and by ``prun review --decide``.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._util.quoting import quote
from ..errors import UsageError
from ..ledger import DECISIONS
from ..views.model import view

if TYPE_CHECKING:
    from ..ledger import Ledger

NOTE_LIMIT = 4000


@dataclass(frozen=True)
class Decided:
    run_id: str
    packet_id: str
    decision: str
    attempt_id: str | None
    who: str
    at: str
    note: str | None

    def line(self) -> str:
        return (f"DECIDED {self.packet_id} decision={self.decision} "
                f"attempt={self.attempt_id or 'none'} who={_word(self.who)} at={self.at}")

    def as_dict(self) -> dict[str, str | None]:
        return {"run": self.run_id, "packet": self.packet_id, "decision": self.decision,
                "attempt": self.attempt_id, "who": self.who, "at": self.at, "note": self.note}


def who_am_i() -> str:
    """The operating system's name for the user running this process."""
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid-{os.getuid()}"


def decide(ledger: Ledger, run_id: str, packet_id: str, decision: str, *,
           note: str | None = None, who: str | None = None,
           attempt_id: str | None = None) -> Decided:
    """Record ``decision`` on ``packet_id`` of run ``run_id``, made on its deciding attempt
    (``attempt_id``, when given, must still be that attempt: the person decided on what they
    saw)."""
    if decision not in DECISIONS:
        raise UsageError(f"no such decision: {decision!r}",
                         hint=f"decide one of {', '.join(DECISIONS)}")
    rv = view(ledger, run_id)
    if rv.packet(packet_id) is None:
        raise UsageError(f"no such packet in run {rv.id}: {packet_id}",
                         hint="name packets by the ids reconcile printed")
    deciding = (rv.deciding(packet_id) or {}).get("id")
    if attempt_id is not None and attempt_id != deciding:
        raise UsageError(f"packet {packet_id} has a newer attempt ({deciding or 'none'}) than "
                           f"the one decided on ({attempt_id})", hint="reload and decide again")
    note = (note or "").strip()[:NOTE_LIMIT] or None
    who = (who or "").strip() or who_am_i()
    at = ledger.record_decision(rv.id, packet_id, deciding, decision, who, note)
    return Decided(rv.id, packet_id, decision, deciding, who, at, note)


def _word(value: str) -> str:
    """A value as one token (``prun._util.quoting``)."""
    return quote(value)
