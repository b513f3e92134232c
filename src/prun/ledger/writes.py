"""The ledger's writes: one ``BEGIN IMMEDIATE`` transaction per write.

Every write is a list of statements ``(sql, params, message if no row changed)``.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import NoReturn, TypeAlias

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
    """A ledger connection's writes: one short ``BEGIN IMMEDIATE`` transaction each."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path
        self._depth = 0

    def _write(self, *stmts: Stmt) -> None:
        """Run (sql, params, message if no row changed) statements in one transaction."""
        with self.transaction() as c:
            for sql, params, missing in stmts:
                if c.execute(sql, params).rowcount == 0 and missing:
                    raise StateError(missing)

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
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            _reraise(e, self.path)
        self._depth = 1
        try:
            yield self.conn
            self._depth = 0
            self.conn.execute("COMMIT")
        except BaseException as e:
            self._depth = 0
            if self.conn.in_transaction:   # a COMMIT that failed (a full disk) leaves it open
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            if isinstance(e, sqlite3.OperationalError):
                _reraise(e, self.path)
            raise


# SQLite's primary result codes that say the ledger's file cannot be written now
_UNWRITABLE = {13: "database or disk is full", 10: "disk I/O error",
               8: "the ledger is read-only here"}


def _reraise(e: sqlite3.OperationalError, path: Path) -> NoReturn:
    """A failed write as prun says it: a full disk, an I/O error or a read-only ledger is a
    ``StateError`` (one line; what was queued stays queued and is written again); anything
    else stays the SQLite error it was."""
    why = _UNWRITABLE.get(getattr(e, "sqlite_errorcode", 0) & 0xFF)
    if why is None:
        raise e
    raise StateError(f"the ledger {path} cannot be written: {why}",
                     hint="free space on its disk; a run's state dirs keep what happened "
                     "meanwhile: `prun resume RUN` records it") from e


def _plain(value: object) -> object:
    """A value as SQLite stores it: a status enum as its text."""
    return str(value) if isinstance(value, StrEnum) else value
