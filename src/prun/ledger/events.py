"""The event log: every state change with its time and cause, append-only (``events``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from .writes import Stmt, WriteQueue, now_iso


class EventLog(WriteQueue):
    """Appending events and reading them back."""

    def record_event(self, kind: str, *, run_id: str | None = None,
                     packet_id: str | None = None, attempt_id: str | None = None,
                     status: str | None = None, cause: str = "",
                     data: Mapping[str, object] | None = None,
                     at: str | None = None) -> int | None:
        """Append one event; returns its sequence number."""
        stmt = self._event(kind, run_id=run_id, packet_id=packet_id, attempt_id=attempt_id,
                           status=status, cause=cause, data=data, at=at)
        with self.transaction() as c:
            return c.execute(stmt[0], stmt[1]).lastrowid

    @staticmethod
    def _event(kind: str, *, run_id: str | None = None, packet_id: str | None = None,
               attempt_id: str | None = None, status: str | None = None, cause: str = "",
               data: Mapping[str, object] | None = None, at: str | None = None) -> Stmt:
        """The statement appending one event (``at``: default now)."""
        return ("INSERT INTO events (at, run_id, packet_id, attempt_id, kind, status, cause,"
                " data) VALUES (?,?,?,?,?,?,?,?)",
                (at or now_iso(), run_id, packet_id, attempt_id, kind,
                 str(status) if status is not None else None, cause,
                 json.dumps(data, default=str) if data else None), None)

    def events(self, run_id: str | None = None, since: int = 0,
               limit: int | None = None) -> list[sqlite3.Row]:
        sql = "SELECT * FROM events WHERE seq > ?"
        args: list[object] = [since]
        if run_id is not None:
            sql += " AND run_id = ?"
            args.append(run_id)
        sql += " ORDER BY seq"
        if limit:
            sql += " LIMIT ?"
            args.append(limit)
        return self.conn.execute(sql, args).fetchall()

    def packet_notes(self, run_id: str) -> dict[str, str]:
        """Each packet's latest status note: the cause of its last status change."""
        rows = self.conn.execute(
            "SELECT packet_id, cause FROM events WHERE seq IN (SELECT max(seq) FROM events"
            " WHERE run_id = ? AND kind = 'packet' GROUP BY packet_id)", (run_id,)).fetchall()
        return {r["packet_id"]: r["cause"] for r in rows if r["cause"]}

    def packet_data(self, run_id: str) -> dict[str, dict[str, object]]:
        """Each packet's latest status change's data, where it had some (a parked packet's
        ``resets_at``: when it is launched again)."""
        rows = self.conn.execute(
            "SELECT packet_id, data FROM events WHERE seq IN (SELECT max(seq) FROM events"
            " WHERE run_id = ? AND kind = 'packet' GROUP BY packet_id)", (run_id,)).fetchall()
        out = {}
        for r in rows:
            try:
                data = json.loads(r["data"]) if r["data"] else None
            except ValueError:
                data = None
            if isinstance(data, dict):
                out[r["packet_id"]] = data
        return out

    def last_event_seq(self, run_id: str | None = None) -> int:
        if run_id is None:
            row = self.conn.execute("SELECT max(seq) FROM events").fetchone()
        else:
            row = self.conn.execute("SELECT max(seq) FROM events WHERE run_id = ?",
                                    (run_id,)).fetchone()
        seq: int | None = row[0]
        return seq or 0
