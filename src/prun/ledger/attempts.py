"""Attempts: one dispatch of one packet, or of a standalone ``prun dispatch`` (``attempts``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..errors import StateError
from .events import EventLog
from .statuses import Status
from .writes import _plain, now_iso

_ATTEMPT_FIELDS = ("run_id", "packet_id", "seq", "executor", "requested_model", "model",
                   "routing_reason", "mode", "workspace", "base", "state_dir", "result_path",
                   "receipt", "predecessor", "continue_from", "status", "reason", "exit_code",
                   "error", "resets_at", "quarantine", "dispatched_at", "finished_at", "brief",
                   "sandboxed")
_ATTEMPT_SET = frozenset(_ATTEMPT_FIELDS)


class AttemptLog(EventLog):
    """Writing and reading attempts."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        super().__init__(conn, path)
        self._owners: dict[str, tuple] = {}  # attempt id -> (run id, packet id), to skip a read

    def record_attempt(self, attempt_id: str, cause: str, **fields) -> None:
        """Insert an attempt (status defaults to pending) and log it."""
        fields.setdefault("status", Status.PENDING)
        unknown = fields.keys() - _ATTEMPT_SET
        if unknown:
            raise ValueError(f"unknown attempt fields: {sorted(unknown)}")
        at = now_iso()
        cols = ["id", *fields, "created_at", "updated_at"]
        values = (attempt_id, *(_plain(v) for v in fields.values()), at, at)
        self._owners[attempt_id] = (fields.get("run_id"), fields.get("packet_id"))
        self._write((f"INSERT INTO attempts ({', '.join(cols)}) VALUES "
                     f"({', '.join('?' * len(cols))})", values, None),
                    self._event("attempt", run_id=fields.get("run_id"),
                                packet_id=fields.get("packet_id"), attempt_id=attempt_id,
                                status=fields["status"], cause=cause, at=at))

    def update_attempt(self, attempt_id: str, cause: str | None = None, **fields) -> None:
        """Change an attempt's columns; a status change is logged as an event."""
        unknown = fields.keys() - _ATTEMPT_SET
        if unknown:
            raise ValueError(f"unknown attempt fields: {sorted(unknown)}")
        at = now_iso()
        fields["updated_at"] = at
        cols = ", ".join(f"{k} = ?" for k in fields)
        update = (f"UPDATE attempts SET {cols} WHERE id = ?",
                  (*(_plain(v) for v in fields.values()), attempt_id),
                  f"no attempt {attempt_id} in the ledger")
        if "status" not in fields:
            return self._write(update)
        owner = self._owners.get(attempt_id)
        if owner is None:
            row = self.conn.execute("SELECT run_id, packet_id FROM attempts WHERE id = ?",
                                    (attempt_id,)).fetchone()
            if row is None:
                raise StateError(f"no attempt {attempt_id} in the ledger")
            owner = (row["run_id"], row["packet_id"])
        data = {k: fields[k] for k in ("reason", "exit_code", "resets_at", "receipt")
                if fields.get(k) is not None}
        self._write(update, self._event("attempt", run_id=owner[0], packet_id=owner[1],
                                        attempt_id=attempt_id, status=fields["status"],
                                        cause=cause or "", data=data or None, at=at))

    set_status = update_attempt

    def attempts(self, run_id: str | None, packet_id: str | None = None) -> list[sqlite3.Row]:
        """A run's attempts in creation order (``run_id=None``: standalone dispatches)."""
        where, args = ("run_id IS NULL", []) if run_id is None else ("run_id = ?", [run_id])
        if packet_id is not None:
            where += " AND packet_id = ?"
            args.append(packet_id)
        return self.conn.execute(f"SELECT * FROM attempts WHERE {where} ORDER BY rowid",
                                 args).fetchall()

    def attempt(self, attempt_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM attempts WHERE id = ?",
                                 (attempt_id,)).fetchone()
