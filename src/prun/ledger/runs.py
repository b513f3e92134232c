"""Runs, their frozen packet sets, and the control requests a run's supervisor picks up
(``runs``, ``packets``, ``requests``)."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Required, TypedDict

from ..errors import StateError
from .events import EventLog
from .statuses import PacketStatus, RunStatus
from .writes import Stmt, _plain, now_iso


class RunRecord(TypedDict, total=False):
    """A run as ``record_run`` freezes it: the ``runs`` columns it fills (only ``id`` is
    required; ``status`` defaults to running)."""

    id: Required[str]
    repo_root: str | None
    plan_path: str | None
    base: str | None
    deadline: str | None               # an ISO time
    cancel_action: str | None
    cancel_owner: str | None
    parallel: int | None
    run_dir: str | None
    check_command: str | None
    on_event: str | None
    setup: str | None
    admission: Mapping[str, object] | None   # what a unit needs of the machine to start
    workspace: str | None              # the plan's workspace: section as JSON (plan.Prime)
    budget: str | None                 # JSON (prun.plan.Budget.to_json)
    status: str
    supervisor_pid: int | None
    supervisor_started: float | None


class PacketRecord(TypedDict, total=False):
    """A packet of a run as ``record_run`` freezes it (the ``packets`` columns)."""

    id: Required[str]
    kind: str | None
    executor: str | None
    model: str | None
    mode: str | None
    base: str | None
    after: Sequence[str] | None        # packet ids this one comes after
    timeout_s: float | None
    spec: Mapping[str, object]         # the whole frozen packet (default: the record itself)


class RunLog(EventLog):
    """Writing and reading runs, packets and requests."""

    # writers -----------------------------------------------------------------------------
    def record_run(self, run: RunRecord, packets: Sequence[PacketRecord],
                   cause: str = "run frozen") -> None:
        """Freeze a run and its packet set (one transaction)."""
        at = now_iso()
        run_row = (
            "INSERT INTO runs (id, repo_root, plan_path, base, packet_ids, packet_count,"
            " deadline, cancel_action, cancel_owner, parallel, run_dir, check_command,"
            " on_event, setup, workspace, budget, status, supervisor_pid, supervisor_started,"
            " created_at, admission) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run["id"], run.get("repo_root"), run.get("plan_path"), run.get("base"),
             json.dumps([p["id"] for p in packets]), len(packets), run.get("deadline"),
             run.get("cancel_action"), run.get("cancel_owner"), run.get("parallel"),
             run.get("run_dir"), run.get("check_command"), run.get("on_event"),
             run.get("setup"), run.get("workspace"), run.get("budget"),
             run.get("status", RunStatus.RUNNING),
             run.get("supervisor_pid"), run.get("supervisor_started"), at,
             json.dumps(run["admission"]) if run.get("admission") else None), None)
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

    def _update_run(self, run_id: str, cause: str, fields: Mapping[str, object]) -> None:
        """Update a run's columns (status, supervisor_pid, finished_at ...) with an event, inside
        the caller's transaction."""
        with self.transaction() as c:
            for sql, params, _ in self._run_update(run_id, cause, fields):
                c.execute(sql, params)

    def _run_update(self, run_id: str, cause: str, fields: Mapping[str, object]) -> list[Stmt]:
        cols = ", ".join(f"{k} = ?" for k in fields)
        stmts: list[Stmt] = [(f"UPDATE runs SET {cols} WHERE id = ?",
                              (*(_plain(v) for v in fields.values()), run_id), None)]
        if "status" in fields:
            status = fields["status"]
            stmts.append(self._event("run", run_id=run_id, cause=cause,
                                     status=None if status is None else str(status)))
        return stmts

    def set_packet_status(self, run_id: str, packet_id: str, status: str, cause: str,
                          data: Mapping[str, object] | None = None) -> None:
        self._write(("UPDATE packets SET status = ? WHERE run_id = ? AND id = ?",
                     (str(status), run_id, packet_id), None),
                    self._event("packet", run_id=run_id, packet_id=packet_id, status=status,
                                cause=cause, data=data))

    def spend_lost_retry(self, run_id: str, packet_id: str, attempt_id: str,
                         cause: str) -> None:
        """Count a successor given to ``packet_id`` after the cluster worker running
        ``attempt_id`` died, with its ``worker-lost`` event (one write)."""
        self._write(("UPDATE packets SET lost_retries = lost_retries + 1"
                     " WHERE run_id = ? AND id = ?", (run_id, packet_id),
                     f"no packet {packet_id} in run {run_id}"),
                    self._event("worker-lost", run_id=run_id, packet_id=packet_id,
                                attempt_id=attempt_id, status="worker-lost", cause=cause))

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
            assert cur.lastrowid is not None  # an INSERT sets it
            return cur.lastrowid

    def claim_run(self, run_id: str, pid: int, started: float | None,
                  alive: Callable[[sqlite3.Row], bool]) -> None:
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
        with self.transaction() as c:
            rows = c.execute("SELECT * FROM requests WHERE run_id = ? AND handled_at IS NULL"
                             " ORDER BY id", (run_id,)).fetchall()
            if rows:
                c.execute("UPDATE requests SET handled_at = ? WHERE run_id = ? AND"
                          " handled_at IS NULL AND id <= ?", (now_iso(), run_id, rows[-1]["id"]))
            return rows

    # readers -----------------------------------------------------------------------------
    def run(self, run_id: str) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute("SELECT * FROM runs WHERE id = ?",
                                                    (run_id,)).fetchone()
        return row

    def find_run(self, prefix: str) -> sqlite3.Row | None:
        """A run by id or unique id prefix (an empty or blank prefix names none: it would
        match every run)."""
        if not prefix.strip():
            return None
        row = self.run(prefix)
        if row is not None:
            return row
        rows = self.conn.execute("SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\'",
                                 (_like_prefix(prefix),)).fetchall()
        return rows[0] if len(rows) == 1 else None

    def latest_run(self, repo_root: str | os.PathLike[str] | None = None) -> sqlite3.Row | None:
        if repo_root is None:
            cur = self.conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC"
                                    " LIMIT 1")
        else:
            cur = self.conn.execute("SELECT * FROM runs WHERE repo_root = ? ORDER BY created_at"
                                    " DESC, rowid DESC LIMIT 1", (str(repo_root),))
        row: sqlite3.Row | None = cur.fetchone()
        return row

    def runs(self, limit: int = 20) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM runs ORDER BY created_at DESC, rowid DESC"
                                 " LIMIT ?", (limit,)).fetchall()

    def packets(self, run_id: str) -> list[sqlite3.Row]:
        return self.conn.execute("SELECT * FROM packets WHERE run_id = ? ORDER BY rowid",
                                 (run_id,)).fetchall()


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
