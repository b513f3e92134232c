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

Writes run in ``BEGIN IMMEDIATE`` transactions on a WAL database with a busy timeout, so many
processes can write at once and none loses a row. Migrations are an append-only list applied
when the ledger opens (``PRAGMA user_version`` counts those applied).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

from ..errors import StateError
from .migrations import MIGRATIONS, _statements
from .statuses import PacketStatus, RunStatus, Status

BUSY_TIMEOUT_MS = 60_000


_ATTEMPT_FIELDS = ("run_id", "packet_id", "seq", "executor", "requested_model", "model",
                   "routing_reason", "mode", "workspace", "base", "state_dir", "result_path",
                   "receipt", "predecessor", "continue_from", "status", "reason", "exit_code",
                   "error", "resets_at", "quarantine", "dispatched_at", "finished_at", "brief",
                   "sandboxed")
_ATTEMPT_SET = frozenset(_ATTEMPT_FIELDS)


_second: tuple[int, str] = (-1, "")  # the last whole second and its text, replaced whole


def now_iso(ts: float | None = None) -> str:
    """``2026-11-30T20:05:06.123Z``. The whole second is formatted once (a run stamps
    thousands of rows a second)."""
    global _second
    t = time.time() if ts is None else ts
    sec, text = _second
    if sec != int(t):
        sec = int(t)
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        _second = (sec, text)
    return f"{text}.{int(t % 1 * 1000):03d}Z"


def repo_root(start: str | os.PathLike | None = None) -> Path | None:
    """The enclosing git work tree (``gitcmd.toplevel``) as a Path, or None."""
    from .._util.gitcmd import toplevel

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


def default_path(start: str | os.PathLike | None = None) -> Path:
    from ..settings import current

    s = current()
    if s.ledger:
        return Path(s.ledger)
    root = repo_root(start)
    if root is not None:
        return prun_dir(root) / "ledger.sqlite"
    return Path(s.user_state) / "ledger.sqlite"


class Ledger:
    """A connection to the ledger. Open with ``Ledger.open()``; close when done."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        self.conn = conn
        self.path = path
        self._depth = 0
        self._deferred: list | None = None
        self._owners: dict[str, tuple] = {}  # attempt id -> (run id, packet id), to skip a read

    # opening -----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike | None = None) -> Ledger:
        p = Path(path) if path else default_path()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(p, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
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
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # batching: a busy writer (the run supervisor) queues its writes and applies them in one
    # short transaction per flush, so other writers are never shut out for long.
    def defer_writes(self) -> None:
        """Queue every write until ``flush()`` (call it often; a crash loses the queue)."""
        if self._deferred is None:
            self._deferred = []

    def flush(self, upto: int | None = None) -> int:
        """Apply queued writes (the first ``upto`` of them) in one transaction; returns how
        many. If the transaction fails the queue is kept (and the error raised)."""
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
        return len(queued)

    def _write(self, *stmts: tuple[str, tuple, str | None]) -> None:
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

    # writers -----------------------------------------------------------------------------
    def record_run(self, run: dict, packets: list[dict], cause: str = "run frozen") -> None:
        """Freeze a run and its packet set (one transaction)."""
        at = now_iso()
        run_row = (
            "INSERT INTO runs (id, repo_root, plan_path, base, packet_ids, packet_count,"
            " deadline, cancel_action, cancel_owner, parallel, run_dir, check_command,"
            " on_event, setup, status, supervisor_pid, supervisor_started, created_at)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run["id"], run.get("repo_root"), run.get("plan_path"), run.get("base"),
             json.dumps([p["id"] for p in packets]), len(packets), run.get("deadline"),
             run.get("cancel_action"), run.get("cancel_owner"), run.get("parallel"),
             run.get("run_dir"), run.get("check_command"), run.get("on_event"),
             run.get("setup"), run.get("status", RunStatus.RUNNING), run.get("supervisor_pid"),
             run.get("supervisor_started"), at), None)
        packet_rows = [
            ("INSERT INTO packets (run_id, id, kind, executor, model, mode, base, after,"
             " timeout_s, spec, status) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
             (run["id"], p["id"], p.get("kind"), p.get("executor"), p.get("model"),
              p.get("mode"), p.get("base"), json.dumps(list(p.get("after") or ())),
              p.get("timeout_s"), json.dumps(p.get("spec", p), default=str),
              PacketStatus.PENDING), None)
            for p in packets]
        self._write(run_row, *packet_rows,
                    self._event("run-frozen", run_id=run["id"], status=RunStatus.RUNNING,
                                cause=cause, data={"packets": len(packets)}, at=at))

    def set_run(self, run_id: str, cause: str, **fields) -> None:
        """Update a run's columns (status, supervisor_pid, finished_at ...) with an event."""
        if fields:
            self._write(*self._run_update(run_id, cause, fields))

    def _update_run(self, run_id: str, cause: str, fields: dict) -> None:
        """``set_run`` inside the caller's transaction, even while writes are deferred."""
        with self.transaction() as c:
            for sql, params, _ in self._run_update(run_id, cause, fields):
                c.execute(sql, params)

    def _run_update(self, run_id: str, cause: str, fields: dict) -> list[tuple]:
        cols = ", ".join(f"{k} = ?" for k in fields)
        stmts = [(f"UPDATE runs SET {cols} WHERE id = ?",
                  (*(_plain(v) for v in fields.values()), run_id), None)]
        if "status" in fields:
            stmts.append(self._event("run", run_id=run_id, status=fields["status"], cause=cause))
        return stmts

    def set_packet_status(self, run_id: str, packet_id: str, status: str, cause: str,
                          data: dict | None = None) -> None:
        self._write(("UPDATE packets SET status = ? WHERE run_id = ? AND id = ?",
                     (str(status), run_id, packet_id), None),
                    self._event("packet", run_id=run_id, packet_id=packet_id, status=status,
                                cause=cause, data=data))

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

    def record_event(self, kind: str, **kwargs) -> int | None:
        """Append one event; returns its sequence number (None while writes are deferred)."""
        stmt = self._event(kind, **kwargs)
        if self._deferred is not None:
            self._deferred.append(stmt)
            return None
        with self.transaction() as c:
            return c.execute(stmt[0], stmt[1]).lastrowid

    @staticmethod
    def _event(kind: str, *, run_id: str | None = None, packet_id: str | None = None,
               attempt_id: str | None = None, status: str | None = None, cause: str = "",
               data: dict | None = None, at: str | None = None) -> tuple[str, tuple, None]:
        return ("INSERT INTO events (at, run_id, packet_id, attempt_id, kind, status, cause,"
                " data) VALUES (?,?,?,?,?,?,?,?)",
                (at or now_iso(), run_id, packet_id, attempt_id, kind,
                 str(status) if status is not None else None, cause,
                 json.dumps(data, default=str) if data else None), None)

    def add_request(self, run_id: str, kind: str, target: str | None = None,
                    executor: str | None = None, cause: str = "",
                    data: str | None = None) -> int:
        """A control request for the run's supervisor (cancel, reassign, followup);
        ``data`` carries its payload (a follow-up's prompt)."""
        with self.transaction() as c:
            cur = c.execute("INSERT INTO requests (run_id, kind, target, executor, cause,"
                            " created_at, data) VALUES (?,?,?,?,?,?,?)",
                            (run_id, kind, target, executor, cause, now_iso(), data))
            self.record_event("request", run_id=run_id, cause=f"{kind} {target or 'run'}"
                              + (f" ({cause})" if cause else ""))
            return cur.lastrowid

    def claim_run(self, run_id: str, pid: int, started: float | None, alive) -> None:
        """Make ``pid`` the run's supervisor, unless ``alive(run_row)`` says another one
        still holds it (StateError). One transaction, so two supervisors never share a run."""
        with self.transaction() as c:
            row = c.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row["supervisor_pid"] not in (None, pid) and alive(row):
                raise StateError(f"run {run_id} already has a supervisor "
                                 f"(pid {row['supervisor_pid']})",
                                 hint=f"follow it with `prun wait {run_id}`")
            self._update_run(run_id, "supervisor started", {
                "status": RunStatus.RUNNING, "supervisor_pid": pid,
                "supervisor_started": started, "finished_at": None})

    def close_run(self, run_id: str, status: str) -> bool:
        """Record the run's end and release it, unless a request arrived meanwhile (then
        False: the supervisor goes on). One transaction with the request check."""
        with self.transaction() as c:
            if c.execute("SELECT 1 FROM requests WHERE run_id = ? AND handled_at IS NULL"
                         " LIMIT 1", (run_id,)).fetchone():
                return False
            self._update_run(run_id, "run finished", {
                "status": status, "finished_at": now_iso(), "supervisor_pid": None})
            return True

    def take_requests(self, run_id: str) -> list[sqlite3.Row]:
        """The run's unhandled requests, marked handled (one transaction)."""
        if self._deferred is not None and not self.conn.execute(
                "SELECT 1 FROM requests WHERE run_id = ? AND handled_at IS NULL LIMIT 1",
                (run_id,)).fetchone():
            return []
        with self.transaction() as c:
            rows = c.execute("SELECT * FROM requests WHERE run_id = ? AND handled_at IS NULL"
                             " ORDER BY id", (run_id,)).fetchall()
            if rows:
                c.execute("UPDATE requests SET handled_at = ? WHERE run_id = ? AND"
                          " handled_at IS NULL AND id <= ?", (now_iso(), run_id, rows[-1]["id"]))
            return rows

    # readers -----------------------------------------------------------------------------
    def run(self, run_id: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()

    def find_run(self, prefix: str) -> sqlite3.Row | None:
        """A run by id or unique id prefix."""
        row = self.run(prefix)
        if row is not None:
            return row
        rows = self.conn.execute("SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\'",
                                 (_like_prefix(prefix),)).fetchall()
        return rows[0] if len(rows) == 1 else None

    def latest_run(self, repo_root: str | os.PathLike | None = None) -> sqlite3.Row | None:
        if repo_root is None:
            return self.conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC"
                                     " LIMIT 1").fetchone()
        return self.conn.execute("SELECT * FROM runs WHERE repo_root = ? ORDER BY created_at"
                                 " DESC, rowid DESC LIMIT 1", (str(repo_root),)).fetchone()

    def runs(self, limit: int = 20) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC"
                                 " LIMIT ?", (limit,)).fetchall()

    def packets(self, run_id: str) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM packets WHERE run_id = ? ORDER BY rowid",
                                 (run_id,)).fetchall()

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

    def events(self, run_id: str | None = None, since: int = 0,
               limit: int | None = None) -> list[sqlite3.Row]:
        sql = "SELECT * FROM events WHERE seq > ?"
        args: list = [since]
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

    def last_event_seq(self, run_id: str | None = None) -> int:
        if run_id is None:
            row = self.conn.execute("SELECT max(seq) FROM events").fetchone()
        else:
            row = self.conn.execute("SELECT max(seq) FROM events WHERE run_id = ?",
                                    (run_id,)).fetchone()
        return row[0] or 0


def _retry_locked(fn, limit: float = BUSY_TIMEOUT_MS / 1000) -> None:
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


def _plain(value):
    return str(value) if isinstance(value, StrEnum) else value


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def as_dict(row: sqlite3.Row | None) -> dict | None:
    return dict(row) if row is not None else None


