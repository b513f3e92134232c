"""Attempts: one dispatch of one packet, or of a standalone ``prun dispatch`` (``attempts``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TypedDict, Unpack

from ..errors import StateError
from .events import EventLog
from .statuses import Status
from .writes import _plain, now_iso


class AttemptFields(TypedDict, total=False):
    """The ``attempts`` columns ``record_attempt`` and ``update_attempt`` write (``id``,
    ``created_at`` and ``updated_at`` are the ledger's own)."""

    run_id: str | None              # None: a standalone prun dispatch
    packet_id: str                  # the unit id
    seq: int
    executor: str | None
    requested_model: str | None
    model: str | None
    routing_reason: str | None
    mode: str | None
    workspace: str | None
    base: str | None
    state_dir: str | None
    result_path: str | None
    receipt: str | None
    predecessor: str | None
    continue_from: str | None
    status: str
    reason: str | None
    exit_code: int | None
    error: str | None
    resets_at: str | None
    quarantine: str | None
    dispatched_at: str | None
    finished_at: str | None
    brief: str | None
    sandboxed: bool | None
    tokens_in: int | None           # what its agent CLI reported it used (None: not reported)
    tokens_out: int | None
    tokens_cached: int | None
    cost_usd: float | None
    accept_status: str | None       # its acceptance check (prun.git.accept; None: not run)
    accept_exit: int | None
    accept_seconds: float | None
    accept_tail: str | None
    accept_log: str | None
    candidate: int | None           # its candidate number (1..N; None: its packet has none)


_ATTEMPT_SET = frozenset(AttemptFields.__annotations__)


class AttemptLog(EventLog):
    """Writing and reading attempts."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        super().__init__(conn, path)
        # attempt id -> (run id, packet id), to skip a read
        self._owners: dict[str, tuple[str | None, str | None]] = {}

    def record_attempt(self, attempt_id: str, cause: str,
                       **fields: Unpack[AttemptFields]) -> None:
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

    def update_attempt(self, attempt_id: str, cause: str | None = None,
                       **fields: Unpack[AttemptFields]) -> None:
        """Change an attempt's columns; a status change is logged as an event."""
        unknown = fields.keys() - _ATTEMPT_SET
        if unknown:
            raise ValueError(f"unknown attempt fields: {sorted(unknown)}")
        at = now_iso()
        columns: dict[str, object] = {**fields, "updated_at": at}
        cols = ", ".join(f"{k} = ?" for k in columns)
        update = (f"UPDATE attempts SET {cols} WHERE id = ?",
                  (*(_plain(v) for v in columns.values()), attempt_id),
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
        data = {k: columns[k] for k in ("reason", "exit_code", "resets_at", "receipt")
                if columns.get(k) is not None}
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

    def usage(self, executor: str, model: str | None,
              run_id: str | None = None) -> list[sqlite3.Row]:
        """What the finished attempts of ``executor`` running ``model`` (the model asked for)
        reported they used, oldest first (``run_id``: that run's only, else every run's):
        rows of ``tokens`` (in + out, NULL when not reported) and ``cost_usd``; attempts
        that reported nothing at all are left out."""
        where = "executor = ? AND requested_model IS ? AND finished_at IS NOT NULL" \
                " AND (tokens_in IS NOT NULL OR tokens_out IS NOT NULL OR cost_usd IS NOT NULL)"
        args: list[str | None] = [executor, model]
        if run_id is not None:
            where += " AND run_id = ?"
            args.append(run_id)
        return self.conn.execute(
            "SELECT id, run_id, CASE WHEN tokens_in IS NULL AND tokens_out IS NULL THEN NULL"
            " ELSE COALESCE(tokens_in, 0) + COALESCE(tokens_out, 0) END AS tokens, cost_usd"
            f" FROM attempts WHERE {where} ORDER BY rowid", args).fetchall()

    def attempt(self, attempt_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute("SELECT * FROM attempts WHERE id = ?",
                                                    (attempt_id,)).fetchone()
        return row
