"""The ledger's writes: one ``BEGIN IMMEDIATE`` transaction per write, or, while a busy writer
(the run supervisor) defers them, a queue applied in one short transaction per flush.

Every write is a list of statements ``(sql, params, message if no row changed)``.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TypeAlias

from ..errors import StateError

Params: TypeAlias = tuple[object, ...]
Stmt: TypeAlias = tuple[str, Params, str | None]
"""One statement of a write: its SQL, its parameters, and the message when it changes no row
(None: that is fine)."""


def now_iso(ts: float | None = None) -> str:
    """``2026-11-30T20:05:06.123Z``: ``ts`` (default: now) in UTC, to the millisecond."""
    t = time.time() if ts is None else ts
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1000):03d}Z"


class WriteQueue:
    """A ledger connection's writes: transactions, and the queue while writes are deferred."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path
        self._depth = 0
        self._deferred: list[Stmt] | None = None
        self.applied = 0     # queued writes applied so far (``applied + pending``: ever queued)

    # batching: a busy writer (the run supervisor) queues its writes and applies them in one
    # short transaction per flush, so other writers are never shut out for long.
    def defer_writes(self) -> None:
        """Queue every write until ``flush()`` (call it often; a crash loses the queue)."""
        if self._deferred is None:
            self._deferred = []

    def flush(self, upto: int | None = None) -> int:
        """Apply queued writes (the first ``upto`` of them) in one transaction; returns how
        many. If the transaction fails the queue is kept (and the error raised)."""
        queued: list[Stmt] | None
        if upto is None or self._deferred is None:
            queued, rest = self._deferred, []
        else:
            queued, rest = self._deferred[:upto], self._deferred[upto:]
        self._deferred = None
        if not queued:
            self._deferred = rest if queued is not None else None
            return 0
        try:
            with self.transaction() as c:
                for sql, params, missing in queued:
                    try:
                        if c.execute(sql, params).rowcount == 0 and missing:
                            print(f"prun: warning: ledger write skipped: {missing}",
                                  file=sys.stderr)
                    except sqlite3.IntegrityError as e:
                        print(f"prun: warning: ledger write skipped: {e}", file=sys.stderr)
        except BaseException:
            self._deferred = queued + rest  # rolled back: keep the queue for the next flush
            raise
        self._deferred = rest
        self.applied += len(queued)
        return len(queued)

    def _write(self, *stmts: Stmt) -> None:
        """Run (sql, params, message if no row changed) statements in one transaction, or
        queue them, ready to run, while writes are deferred."""
        if self._deferred is not None:
            self._deferred.extend(stmts)
            return
        with self.transaction() as c:
            for sql, params, missing in stmts:
                if c.execute(sql, params).rowcount == 0 and missing:
                    raise StateError(missing)

    @property
    def pending(self) -> int:
        """How many writes are queued."""
        return len(self._deferred or ())

    def stop_deferring(self) -> None:
        self.flush()
        self._deferred = None

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (nested calls join the outer one)."""
        if self._depth:
            self._depth += 1
            try:
                yield self.conn
            finally:
                self._depth -= 1
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self.conn
        except BaseException:
            self._depth = 0
            self.conn.execute("ROLLBACK")
            raise
        self._depth = 0
        self.conn.execute("COMMIT")


def _plain(value: object) -> object:
    """A value as SQLite stores it: a status enum as its text."""
    return str(value) if isinstance(value, StrEnum) else value
