"""A run's frozen record and its current state, read from the ledger and the state dirs.

``freeze`` turns a plan into a run: expected packet ids and count, the base revision as a
commit id, the terminal deadline as a time, the cancel action and its owner, the parallelism,
each packet's routed executor, and a run dir ``.prun/runs/<run-id>/`` holding the prompts,
state dirs, results, quarantine and logs. ``view`` reads a run back for status and wait.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import StateError, UsageError
from ..ledger import Ledger, PacketStatus, Status, now_iso, prun_dir, repo_root
from ..plan import DataBoundary, Packet, Plan

DEFAULT_PARALLEL = 8


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def prompts(self) -> Path:
        return self.root / "prompts"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def quarantine(self) -> Path:
        return self.root / "quarantine"

    @property
    def log(self) -> Path:
        return self.root / "supervisor.log"

    @property
    def hooks_log(self) -> Path:
        return self.root / "hooks.log"

    def make(self) -> None:
        for d in (self.prompts, self.state, self.results, self.quarantine):
            d.mkdir(parents=True, exist_ok=True)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + os.urandom(2).hex()


def deadline_at(text: str | None, now: float | None = None) -> float | None:
    """A plan's deadline (a duration from now, or an ISO time) as epoch seconds."""
    if text is None or str(text).strip() == "":
        return None
    from .._util.timeparse import parse_duration

    now = time.time() if now is None else now
    try:
        return now + parse_duration(text, what="deadline")
    except UsageError:
        pass
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"bad deadline {text!r}",
                         hint="give a duration (90m, 2h) or an ISO time (2026-12-01T18:00:00Z)")
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


_PACKET_FIELDS = tuple(f.name for f in dataclasses.fields(Packet))
_DATA_FIELDS = tuple(f.name for f in dataclasses.fields(DataBoundary))


def packet_spec(p: Packet) -> dict:
    """The packet as plain data for the ledger (tuples stay tuples: JSON writes them as lists;
    a shallow walk, as ``dataclasses.asdict`` deep-copies every value)."""
    d = {name: getattr(p, name) for name in _PACKET_FIELDS if name != "lines"}
    if isinstance(d.get("data"), DataBoundary):
        d["data"] = {name: getattr(d["data"], name) for name in _DATA_FIELDS}
    return d


def packet_from_spec(d: Mapping) -> Packet:
    fields = {k: v for k, v in d.items() if k in _PACKET_FIELDS}
    for k in ("owns", "generates", "reads", "state", "after", "requires"):
        if k in fields and fields[k] is not None:
            fields[k] = tuple(fields[k])
    if isinstance(fields.get("command"), list):
        fields["command"] = tuple(fields["command"])
    if isinstance(fields.get("data"), dict):
        fields["data"] = DataBoundary(**{k: tuple(v) if isinstance(v, list) else v
                                         for k, v in fields["data"].items()})
    return Packet(**fields)


def freeze(plan: Plan, ledger: Ledger, *, parallel: int | None = None,
           deadline: str | None = None, env: Mapping[str, str] | None = None) -> dict:
    """Record the run in the ledger (one transaction) and make its run dir. Returns the run."""
    from .._util import gitcmd
    from . import prepare as unitprep

    env = os.environ if env is None else env
    root = repo_root(plan.root)
    base = None
    if root is not None:
        try:
            base = gitcmd.rev(root, plan.base or "HEAD")
        except gitcmd.GitError as e:
            if plan.base or any(p.writes_code for p in plan.packets):
                raise UsageError(f"cannot resolve the base revision {plan.base or 'HEAD'!r} "
                                 f"in {root}: {e.message}",
                                 hint="commit something first, or name an existing base")
    elif any(p.writes_code for p in plan.packets):
        raise UsageError("the plan has code units but is not inside a git repository",
                         hint="run plans with code units from a git repository")
    run_id = new_run_id()
    paths = RunPaths(prun_dir(root or Path.cwd()) / "runs" / run_id)
    when = deadline_at(deadline if deadline is not None else plan.deadline)
    n_parallel = parallel or plan.parallel or DEFAULT_PARALLEL
    if n_parallel < 1:
        raise UsageError(f"parallel must be at least 1 (got {n_parallel})")
    packets = []
    routes = unitprep.route_all(plan.packets, env)  # may refuse a unit: nothing made yet
    sandboxes = _sandboxes(plan, env, routes)        # may refuse sandbox: on: nothing made yet
    paths.make()
    for p in plan.packets:
        r = routes[p.id]
        pbase = base
        if root is not None and plan.base_of(p) and plan.base_of(p) != (plan.base or "HEAD"):
            pbase = gitcmd.rev(root, plan.base_of(p))
        spec = packet_spec(p)
        spec.update({"routed_executor": r.executor, "routing_reason": r.reason,
                     "base_commit": pbase, "sandbox": sandboxes[p.id]})
        packets.append({"id": p.id, "kind": p.kind, "executor": r.executor, "model": p.model,
                        "mode": p.effective_mode, "base": pbase, "after": list(p.after),
                        "timeout_s": p.timeout_s, **{"spec": spec}})
    run = {"id": run_id, "repo_root": str(root) if root else None, "plan_path": plan.path,
           "base": base, "deadline": now_iso(when) if when else None,
           "cancel_action": plan.cancel_action or "cancel",
           "cancel_owner": plan.cancel_owner or env.get("USER") or "the coordinator",
           "parallel": n_parallel, "run_dir": str(paths.root),
           "check_command": plan.check, "on_event": plan.on_event, "setup": plan.setup}
    ledger.record_run(run, packets)
    return run


def _sandboxes(plan: Plan, env: Mapping[str, str], routes) -> dict[str, str]:
    """Each packet's sandbox setting (its own, else the plan's, else ``$PRUN_SANDBOX``, else
    auto). ``on`` where no sandbox can be made refuses the run before anything is frozen."""
    from ..attempt.sandbox import parse_setting, unavailable
    from ..settings import load

    default = parse_setting(plan.sandbox) if plan.sandbox else load(env).sandbox
    out = {p.id: p.sandbox or default for p in plan.packets}
    wanted = [p for p in plan.packets
              if out[p.id] == "on" and routes[p.id].executor != "session"]
    if wanted and (why := unavailable()) is not None:
        p = wanted[0]
        raise UsageError(f"{p.where('sandbox')}: packet {p.id} asks for sandbox: on, but no "
                         f"sandbox can be made here: {why}",
                         hint="install bubblewrap (Debian: bubblewrap), or use sandbox: auto")
    return out


def resolve_run(ledger: Ledger, run_arg: str | None):
    """The run named (id or unique prefix), or the latest run of this repository."""
    if run_arg:
        row = ledger.find_run(run_arg)
        if row is None:
            raise StateError(f"no run {run_arg} in the ledger {ledger.path}",
                             hint="run `prun ledger` for the list of runs")
        return row
    row = ledger.latest_run(repo_root()) or ledger.latest_run()
    if row is None:
        raise StateError(f"no runs in the ledger {ledger.path}",
                         hint="start one with `prun run PLAN`")
    return row


def supervisor_alive(run) -> bool:
    from .._util.process import same_process_alive

    return same_process_alive(run["supervisor_pid"], run["supervisor_started"])


# Reading a run back -------------------------------------------------------------------------

@dataclass
class UnitView:
    packet_id: str
    status: str
    executor: str | None
    model: str | None
    attempt_id: str | None
    attempt_status: str | None
    attempts: int
    started: float | None
    finished: float | None
    last_activity: float | None
    result_path: str | None
    reason: str | None
    resets_at: str | None
    note: str | None = None        # the cause of its last status change (why it waits)

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.finished or now) - self.started


@dataclass
class RunView:
    run: dict
    units: list[UnitView]
    supervisor_alive: bool

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for u in self.units:
            out[u.status] = out.get(u.status, 0) + 1
        return out


def view(ledger: Ledger, run_id: str) -> RunView:
    run = dict(ledger.run(run_id))
    last: dict[str, dict] = {}
    n: dict[str, int] = {}
    for a in ledger.attempts(run_id):
        last[a["packet_id"]] = dict(a)
        n[a["packet_id"]] = n.get(a["packet_id"], 0) + 1
    notes = ledger.packet_notes(run_id)
    units = []
    for p in ledger.packets(run_id):
        a = last.get(p["id"])
        activity = None
        if a and a["state_dir"] and Status(a["status"]).live:
            try:
                activity = os.stat(os.path.join(a["state_dir"], "tail")).st_mtime
            except OSError:
                activity = None
        units.append(UnitView(
            packet_id=p["id"], status=p["status"],
            executor=(a["executor"] if a else p["executor"]),
            model=(a["model"] if a else p["model"]), attempt_id=a["id"] if a else None,
            attempt_status=a["status"] if a else None, attempts=n.get(p["id"], 0),
            started=_epoch(a["dispatched_at"]) if a else None,
            finished=_epoch(a["finished_at"]) if a else None, last_activity=activity,
            result_path=a["result_path"] if a else None, reason=a["reason"] if a else None,
            resets_at=a["resets_at"] if a else None, note=notes.get(p["id"])))
    return RunView(run, units, supervisor_alive(run))


def _epoch(iso: str | None) -> float | None:
    if not iso:
        return None
    import datetime as dt

    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


TERMINAL_PACKET = {s.value for s in PacketStatus if s.terminal}


def spawn_supervisor(run_id: str, ledger_path: str | os.PathLike, log: str | os.PathLike) -> int:
    """Start a detached supervisor for ``run_id`` (its own session; output to ``log``)."""
    import subprocess
    import sys

    from .._util.process import start

    env = dict(os.environ)
    env["PRUN_LEDGER"] = str(ledger_path)
    with open(log, "ab") as out:
        proc = start([sys.executable, "-m", "prun.run.supervisor", run_id],
                     stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)

    def registered():
        if proc.poll() is not None:
            return "exited"
        with Ledger.open(ledger_path) as led:
            return led.run(run_id)["supervisor_pid"] == proc.pid

    # Return only once the supervisor holds the run, so a `prun wait` right after sees it.
    if wait_for(registered, SUPERVISOR_START_S) != True:  # noqa: E712
        raise StateError(f"the supervisor of run {run_id} did not start",
                         hint=f"see {log}; then `prun resume {run_id}`")
    return proc.pid


SUPERVISOR_START_S = 30.0


def wake_supervisor(run) -> bool:
    """Tell a live supervisor to read its requests (SIGUSR1). False when none runs."""
    import signal

    if not supervisor_alive(run):
        return False
    try:
        os.kill(run["supervisor_pid"], signal.SIGUSR1)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def wait_for(check, limit: float, interval: float = 0.05):
    """Poll ``check()`` until it returns something truthy or ``limit`` seconds pass."""
    end = time.monotonic() + limit
    while True:
        got = check()
        if got or time.monotonic() >= end:
            return got
        time.sleep(interval)
        interval = min(interval * 1.5, 0.5)
