"""The person's decisions on a run's packets (``decisions``): accept, reject or include the
change of one attempt, with who decided, when and why. Append-only: a later decision on the
same packet's attempt replaces an earlier one; one made on an attempt that is no longer the
packet's deciding attempt no longer counts.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from .events import EventLog
from .writes import now_iso

DECISIONS = ("accept", "reject", "include")


class DecisionLog(EventLog):
    """Recording decisions and reading them back."""

    def record_decision(self, run_id: str, packet_id: str, attempt_id: str | None,
                        decision: str, who: str, note: str | None = None) -> str:
        """Append one decision (and its event); returns its time."""
        if decision not in DECISIONS:
            raise ValueError(f"unknown decision {decision!r}")
        at = now_iso()
        self._write(("INSERT INTO decisions (run_id, packet_id, attempt_id, decision, note, who,"
                     " at) VALUES (?,?,?,?,?,?,?)",
                     (run_id, packet_id, attempt_id, decision, note or None, who, at), None),
                    self._event("decision", run_id=run_id, packet_id=packet_id,
                                attempt_id=attempt_id, status=decision, cause=f"by {who}",
                                data={"note": note} if note else None, at=at))
        return at

    def decisions(self, run_id: str, packet_id: str | None = None) -> list[sqlite3.Row]:
        """A run's decisions, oldest first."""
        sql, args = "SELECT * FROM decisions WHERE run_id = ?", [run_id]
        if packet_id is not None:
            sql += " AND packet_id = ?"
            args.append(packet_id)
        return self.conn.execute(sql + " ORDER BY id", args).fetchall()

    def current_decisions(self, run_id: str,
                          deciding: Mapping[str, str | None]) -> dict[str, sqlite3.Row]:
        """Packet id -> its latest decision that was made on its deciding attempt (``deciding``:
        packet id -> attempt id, None for a packet never dispatched)."""
        out: dict[str, sqlite3.Row] = {}
        for row in self.decisions(run_id):
            pid = row["packet_id"]
            if pid in deciding and row["attempt_id"] == deciding[pid]:
                out[pid] = row
        return out
