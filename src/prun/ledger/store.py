"""The ledger: one SQLite database of runs, packets, attempts and every state change.

Where: ``$PRUN_LEDGER`` if set, else ``.prun/ledger.sqlite`` at the repository root (the
folder holds a ``.gitignore`` of ``*``), else (outside a repository) the user's state folder.

Tables (plain enough for any SQLite tool; see docs/ledger.md):

    runs      one frozen fan-out: packet ids and count, base commit, deadline, cancel action
              and owner, parallelism, run dir, supervisor pid, status
    packets   the frozen packet set of a run: id, kind, executor, model, mode, after, status
    attempts  one dispatch of one packet (or of a standalone ``prun dispatch``): executor,
              requested and actual model, routing reason, mode, workspace, base, state dir,
              result path, receipt, predecessor, status
    events    append-only: every state change with its time and cause
    requests  control requests (cancel, reassign, followup) a running supervisor picks up
    decisions the person's accept, reject or include of a packet's attempt (prun review)

Writes run in ``BEGIN IMMEDIATE`` transactions on a WAL database with a busy timeout, so many
processes can write at once and none loses a row. Migrations are an append-only list applied
when the ledger opens (``PRAGMA user_version`` counts those applied).

This module finds and opens the ledger; the ``Ledger`` gathers the writers and readers of
``runs.py`` (runs, packets, requests), ``attempts.py``, ``decisions.py`` and ``events.py`` (the
event log), on the transactions and the write queue of ``writes.py``.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from .._util.gitcmd import toplevel
from ..errors import StateError
from ..settings import current
from .attempts import AttemptLog
from .decisions import DecisionLog
from .migrations import MIGRATIONS, _statements
from .runs import RunLog
from .writes import now_iso

__all__ = ["BUSY_TIMEOUT_MS", "Ledger", "default_path", "now_iso", "prun_dir", "repo_root"]

BUSY_TIMEOUT_MS = 60_000


def repo_root(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The enclosing git work tree (``gitcmd.toplevel``) as a Path, or None."""
    root = toplevel(start)
    return Path(root) if root else None


def prun_dir(root: Path) -> Path:
    """``<root>/.prun``, created with a ``.gitignore`` of ``*`` so git never sees it."""
    d = root / ".prun"
    d.mkdir(parents=True, exist_ok=True)
    ignore = d / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return d


def default_path(start: str | os.PathLike[str] | None = None, *, create: bool = True) -> Path:
    """``$PRUN_LEDGER``, else ``.prun/ledger.sqlite`` at the repository's root (``.prun``
    made when ``create``), else the user's state folder."""
    s = current()
    if s.ledger:
        return Path(s.ledger)
    root = repo_root(start)
    if root is not None:
        return (prun_dir(root) if create else root / ".prun") / "ledger.sqlite"
    return Path(s.user_state) / "ledger.sqlite"


class Ledger(RunLog, AttemptLog, DecisionLog):
    """A connection to the ledger. Open with ``Ledger.open()``; close when done."""

    # opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, create: bool = True) -> Ledger:
        """The ledger at ``path`` (else ``default_path()``). Without ``create`` (the commands
        that only read) nothing is made: where there is no ledger yet, an empty one in memory
        stands for it, so such a command says what it would say of an empty ledger."""
        p = Path(path) if path else default_path(create=create)
        try:
            where: str | Path = p
            if create:
                p.parent.mkdir(parents=True, exist_ok=True)
            elif not p.exists():
                where = ":memory:"
            conn = sqlite3.connect(where, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            ledger = cls(conn, p)
            _retry_locked(ledger._setup)
        except sqlite3.Error as e:
            raise StateError(f"cannot open the ledger {p}: {e}",
                             hint="check the path and its permissions, or set PRUN_LEDGER")
        return ledger

    def _setup(self) -> None:
        if self.conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self._migrate()

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > len(MIGRATIONS):
            raise StateError(f"the ledger {self.path} has schema {version}, newer than this prun "
                             f"({len(MIGRATIONS)})", hint="upgrade prun")
        if version == len(MIGRATIONS):
            return
        with self.transaction():
            version = self.conn.execute("PRAGMA user_version").fetchone()[0]
            for i in range(version, len(MIGRATIONS)):
                for stmt in _statements(MIGRATIONS[i]):
                    self.conn.execute(stmt)
                self.conn.execute(f"PRAGMA user_version={i + 1}")

    @property
    def schema_version(self) -> int:
        version: int = self.conn.execute("PRAGMA user_version").fetchone()[0]
        return version

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _retry_locked(fn: Callable[[], None], limit: float = BUSY_TIMEOUT_MS / 1000) -> None:
    """Run ``fn``, retrying while another process holds a lock SQLite's busy handler does
    not wait for (switching a new database to WAL while others open it)."""
    end = time.monotonic() + limit
    delay = 0.01
    while True:
        try:
            return fn()
        except sqlite3.OperationalError as e:
            code = getattr(e, "sqlite_errorcode", 0) & 0xFF
            if code not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or \
                    time.monotonic() > end:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)
