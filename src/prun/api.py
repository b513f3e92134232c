"""The library a coordinator written in Python calls (``import prun``): load a plan, check
it, run it and wait for it, read a run's status, reconcile and integrate its changes, and
dispatch one unit outside a plan. The commands (``prun.cli``) and the MCP server
(``prun.mcp``) are layers over these functions.

Each function opens the ledger of the repository holding ``repo`` (default: the current
directory; ``$PRUN_LEDGER`` when set), returns a typed record, and raises a
``prun.errors.PrunError`` (its ``exit_code`` is the command's) for what it refuses.

    plan = prun.load_plan("plan.yaml")
    started = prun.run_plan(plan)                  # frozen; a supervisor drives it
    woke = prun.wait(started.run_id)               # until something needs attention
    report = prun.reconcile(started.run_id)        # each packet's verdict
    result = prun.integrate(started.run_id)        # applied and checked, never committed

docs/api.md is this module's page.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ._util.gitcmd import toplevel
from ._util.worktree import WORKTREE, uncommitted
from .attempt.dispatch import Request, run_sync
from .attempt.outcome import Outcome
from .attempt.subdispatch import refusal
from .cluster.config import resolve
from .errors import ExitCode, NotIndependent, UsageError
from .git import accept
from .git.culprit import CULPRITS_DIR
from .git.integrate import CHECK_TIMEOUT_DEFAULT, Integration, UnitResult, add_worktree
from .git.integrate import integrate as integrate_changes
from .git.journal import Journal
from .git.reconcile import REJECTED
from .git.reconcile import reconcile as judge
from .git.verdict import AcceptCheck, Candidacy, Report, UnitInput, Verdict
from .ledger import Ledger, RunStatus, default_path
from .plan import Budget, Plan, load_plan, routing, template
from .plan.independence import check as check_independence
from .plan.pair_report import Report as CheckReport
from .run.admission import admission
from .run.budget import standings_of
from .run.detached import spawn_supervisor, supervisor_alive
from .run.estimate import Estimate
from .run.estimate import estimate as estimate_plan
from .run.freeze import deadline_of, freeze, preflight
from .run.limits import unenforced
from .run.paths import RunPaths
from .settings import current
from .views.model import RunView, Spend, find_run, view

PathLike = str | os.PathLike[str]
FAIL_STATUSES = frozenset({"failed", "timeout", "cancelled", "blocked"})
# what a wait's finding is, and the exit code it stands for (README, "Exit codes")
WAKE_CODES: Mapping[str, ExitCode] = {
    "stopped": ExitCode.STOPPED, "failed": ExitCode.UNIT_FAILED, "stalled": ExitCode.STALLED,
    "parked": ExitCode.PARKED, "supervisor-gone": ExitCode.SUPERVISOR_GONE,
    "succeeded": ExitCode.UNIT_SUCCEEDED, "handoff": ExitCode.HANDOFF}


# -- records ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Started:
    """A run frozen in the ledger: its id, packet count, parallelism, base commit and
    deadline (ISO time), and its folder (results, logs)."""

    run_id: str
    packets: int
    parallel: int
    base: str | None
    deadline: str | None
    run_dir: str
    ledger: str
    overlap: tuple[str, ...] = ()
    """The independence test's failures an ``allow_overlap`` let through (FAIL lines)."""
    unseen: int = 0
    """Uncommitted changes in the working tree that code units do not start from (their base
    is a commit, not ``worktree``)."""
    warning: str | None = None
    """Why the plan's projection exceeds a pool's headroom or the budget (``estimate``)."""


@dataclass(frozen=True)
class WakeEvent:
    """One event a wait found: its cursor ``seq``, what it means (``failed``, ``stalled``,
    ``parked``, ``handoff``, ``stopped``, ``succeeded``, ``run-done``), and the ledger's
    packet, status, cause and data (``handoff``, ``receipt_cmd``, ``resets_at``)."""

    seq: int
    what: str
    packet_id: str | None
    status: str | None
    cause: str | None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Wake:
    """What a wait returned with: the events found after the cursor, the cursor to pass as
    ``since`` next, the run as it is now, and the exit code ``prun wait`` gives for it."""

    run_id: str
    events: tuple[WakeEvent, ...]
    cursor: int
    run: RunView
    exit_code: ExitCode
    supervisor_gone: bool = False
    timed_out: bool = False


# -- plans -----------------------------------------------------------------------------------

def check(plan: Plan | PathLike, *, repo: PathLike | None = None,
          use_git: bool = True) -> CheckReport:
    """The independence test (``prun check``): may the plan's packets run at the same time?
    ``report.ok``, ``report.failures`` and ``report.lines()`` say; ``repo`` is where bases
    are resolved (default: the plan's repository)."""
    p = _plan(plan)
    template.refuse(pl for pk in p.packets for pl in pk.placeholders)
    routing.check(p.packets, os.environ)
    return check_independence(p, repo=repo, use_git=use_git)


# -- runs ------------------------------------------------------------------------------------

def freeze_run(plan: Plan | PathLike, *, parallel: int | str | None = None,
               deadline: str | None = None, allow_overlap: bool = False,
               cluster: str | None = None, repo: PathLike | None = None,
               memfree: str | None = None, load: str | None = None,
               allow_unenforced: bool = False,
               budget: Budget | None = None) -> Started:
    """Check ``plan`` and freeze it as a run in the ledger (nothing runs yet: ``run_plan``
    also starts its supervisor). Refused with ``NotIndependent`` (exit 1) when it fails the
    independence test and ``allow_overlap`` is not given, with ``UsageError`` (exit 2) for a
    bad plan, deadline, base, port or cluster: in every refusal nothing is made, not even
    the ledger. ``cluster`` is a Dask scheduler's address (default: the plan's, else
    ``$PRUN_CLUSTER``). ``parallel`` may be ``"auto"``; ``memfree`` (a size) and ``load`` (a
    number or a percentage of the cores) hold units back while the machine has no room
    (``prun.run.admission``); ``allow_unenforced`` lets through a ``resources.cpus`` nothing
    here can hold (recorded: an ``unenforced-allowed`` event)."""
    if (refused := refusal()) is not None:   # inside a unit that may not start agents
        raise refused
    p = _budgeted(_plan(plan), budget)
    template.refuse(pl for pk in p.packets for pl in pk.placeholders)
    routing.check(p.packets, os.environ)
    deadline_of(p, deadline)   # refused before the ledger is made
    report = check_independence(p)
    if not report.ok and not allow_overlap:
        raise NotIndependent(tuple(report.lines()))
    preflight(p)               # bases and ports, before the ledger is opened
    room = admission(memfree, load, auto=(parallel or p.parallel) == "auto")
    loose = unenforced(p.packets, allow_unenforced)
    conf = resolve(cluster, p.cluster, p.worker_lost, current().cluster)
    if conf is not None:       # reached, or refused, before anything is made
        from .cluster.connect import probe

        probe(conf.address)
    with _ledger(repo, create=True) as ledger:
        warning = estimate_plan(p, ledger, os.environ).warning()
        r = freeze(p, ledger, parallel=parallel, deadline=deadline, cluster=conf,
                   admission=room)
        if loose:
            ledger.record_event("unenforced-allowed", run_id=r["id"],
                                cause="prun run --allow-unenforced: resources.cpus not held",
                                data={"packets": loose})
        overlap = tuple(f.line() for f in report.failures)
        if overlap:
            ledger.record_event("overlap-allowed", run_id=r["id"],
                                cause="prun run --allow-overlap",
                                data={"failures": list(overlap)})
        run_dir, n = r.get("run_dir"), r.get("parallel")
        assert run_dir and n, "freeze makes every run's folder and sets its parallelism"
        return Started(r["id"], len(p.packets), n, r["base"], r["deadline"],
                       str(run_dir), str(ledger.path), overlap, _unseen(p), warning)


def _budgeted(p: Plan, budget: Budget | None) -> Plan:
    """``p`` with the command line's budget over its own ``budget:``."""
    if budget is None:
        return p
    return replace(p, budget=(p.budget or Budget()).given(budget.usd, budget.tokens,
                                                          budget.hard))


def estimate(plan: Plan | PathLike, *, budget: Budget | None = None,
             repo: PathLike | None = None) -> Estimate:
    """What ``plan`` would spend (``prun estimate``): per executor and model, the projection
    from the ledger's history, each quota pool's headroom and reset, and whether it passes
    the budget (``budget``: the command line's, over the plan's)."""
    p = _budgeted(_plan(plan), budget)
    with _ledger(repo) as ledger:
        return estimate_plan(p, ledger, os.environ)


def _unseen(p: Plan) -> int:
    """How many uncommitted changes the plan's code units will not see (the plan's own files
    are not counted: a unit is not told of them): 0 when none starts from a commit, or the plan
    is in no repository."""
    root = toplevel(p.root)
    blind = any(x.writes_code and p.base_of(x) != WORKTREE for x in p.packets)
    own = [f for f in (p.path, *(x.source for x in p.packets)) if f]
    return uncommitted(root, besides=own) if root and blind else 0


def run_plan(plan: Plan | PathLike, *, parallel: int | str | None = None,
             deadline: str | None = None, allow_overlap: bool = False,
             cluster: str | None = None, repo: PathLike | None = None,
             memfree: str | None = None, load: str | None = None,
             allow_unenforced: bool = False,
             budget: Budget | None = None) -> Started:
    """Freeze ``plan`` as a run (see ``freeze_run``) and drive it in the background (``prun
    run --detach``): returns once its supervisor holds the run. Follow it with ``wait``."""
    started = freeze_run(plan, parallel=parallel, deadline=deadline,
                         allow_overlap=allow_overlap, cluster=cluster, repo=repo,
                         memfree=memfree, load=load, allow_unenforced=allow_unenforced,
                         budget=budget)
    spawn_supervisor(started.run_id, started.ledger, RunPaths(Path(started.run_dir)).log)
    return started


def status(run: str | None = None, *, repo: PathLike | None = None) -> RunView:
    """A run as the ledger has it now (``prun status``): its row, packets, attempts, each
    unit's status (``units``), counts, spend, and whether its supervisor lives. ``run`` is
    an id or unique prefix; left out, the latest run of the repository."""
    with _ledger(repo) as ledger:
        return view(ledger, find_run(ledger, run, _cwd(repo))["id"])


def status_document(run: str | None = None, *, repo: PathLike | None = None
                    ) -> tuple[RunView, dict[str, Any]]:
    """A run's view and the document ``prun status --json`` prints: the run, whether its
    supervisor lives, the counts, its units (each with its ``tokens`` and ``cost_usd``),
    their attempts, each executor's totals (``cost``), and ``next``: the command a running run
    whose supervisor is gone needs (``prun resume RUN``), else None."""
    with _ledger(repo) as ledger:
        v = view(ledger, find_run(ledger, run, _cwd(repo))["id"])
        gone = v.run["status"] == "running" and not v.supervisor_alive
        doc = {"run": v.run, "supervisor_alive": v.supervisor_alive,
               "next": f"prun resume {v.id}" if gone else None, "counts": v.counts(),
               "units": [asdict(u) for u in v.units],
               "attempts": [dict(a) for a in ledger.attempts(v.id)],
               "cost": {s.executor: cost_json(s) for s in v.spend()},
               "budget": [s.to_json() | {"executor": s.executor}
                          for s in standings_of(v.run, ledger, os.environ)]}
    return v, doc


def cost_json(s: Spend) -> dict[str, object]:
    """One executor's totals as ``prun status --json`` carries them (names as in
    ``outcome.json``)."""
    return {"attempts": s.attempts,
            "tokens": {"in": s.tokens_in, "out": s.tokens_out, "cached": s.tokens_cached},
            "cost_usd": s.cost_usd, "unknown": s.unknown}


def wait(run: str | None = None, *, since: int = 0, timeout: float | None = None,
         any_done: bool = False, repo: PathLike | None = None,
         poll: float = 1.0) -> Wake:
    """Block until the run has something to act on (``prun wait``): a unit failed, stalled,
    was parked or handed off, the run stopped or ended, or its supervisor is gone; with
    ``any_done`` also a unit that succeeded. ``timeout`` seconds with nothing to report
    return ``timed_out`` (exit code TIMEOUT). Pass ``Wake.cursor`` as ``since`` next."""
    start = time.monotonic()
    delay = 0.05
    with _ledger(repo) as ledger:
        run_id = find_run(ledger, run, _cwd(repo))["id"]
        cursor = since
        while True:
            found: list[WakeEvent] = []
            for ev in ledger.events(run_id, since=cursor):
                cursor = ev["seq"]
                if ev["kind"] == "run" and ev["status"] == "running":
                    # re-opened (a follow-up, a resume): its earlier end is no longer news
                    found = [f for f in found if f.what != "run-done"]
                what = _classify(ev["kind"], ev["status"], any_done)
                if what:
                    found.append(WakeEvent(ev["seq"], what, ev["packet_id"], ev["status"],
                                           ev["cause"],
                                           json.loads(ev["data"]) if ev["data"] else {}))
            # read after the events: a run that ended meanwhile shows its end event next time
            row = ledger.run(run_id)
            assert row is not None  # the run just found; runs are never deleted
            gone = row["status"] == "running" and not supervisor_alive(row)
            if found or gone:
                v = view(ledger, run_id)
                return Wake(run_id, tuple(found), cursor, v,
                            _wake_code(found, gone, str(v.run["status"])), supervisor_gone=gone)
            if timeout is not None and time.monotonic() - start >= timeout:
                return Wake(run_id, (), cursor, view(ledger, run_id), ExitCode.TIMEOUT,
                            timed_out=True)
            time.sleep(delay)
            delay = min(delay * 1.5, poll)


def foreseen_rejections(run: str | None = None, *, repo: PathLike | None = None
                        ) -> list[Verdict]:
    """The code packets ``prun reconcile`` would reject as the run stands now (a scope leak,
    a missing section, an acceptance check that failed in the run...), judged as it judges
    them, with the checks the run recorded (none is run here) and the candidates' choice
    (a losing candidate is not chosen, not rejected), without recording anything: what a run
    whose units all succeeded says at its end. Only code packets: a run of many read-only
    units ends without reading every result again."""
    with _ledger(repo) as ledger:
        v = view(ledger, find_run(ledger, run, _cwd(repo))["id"])
        code = [u for u in v.unit_inputs() if u.packet.writes_code]
        report = judge(code, run_id=v.id, tree=v.repo_root)
        accept.apply(report, v.accept_checks())
        _choose(ledger, v, report)
    return [x for x in report.verdicts if x.verdict == REJECTED]


def run_exit_code(status: str) -> ExitCode:
    """The exit code of a run that ended with ``status`` (0 succeeded, 3 stopped, 124 its
    deadline passed, else 1)."""
    return {RunStatus.SUCCEEDED: ExitCode.OK, RunStatus.STOPPED: ExitCode.STOPPED,
            RunStatus.TIMEOUT: ExitCode.TIMEOUT}.get(RunStatus(status), ExitCode.FAILED)


# -- after a run -----------------------------------------------------------------------------

def reconcile(run: str | None = None, *, rescoped: Mapping[str, str] | None = None,
              repo: PathLike | None = None) -> Report:
    """Judge every packet of a run before anything is integrated (``prun reconcile``):
    ``report.verdicts`` (accepted, rejected, needs-review, with reasons), ``report.complete``.
    ``rescoped`` maps a packet whose change of scope the person approved to why. Recorded in
    the ledger (a ``reconcile`` event). ``reconcile_exit_code(report)`` is the command's."""
    rescoped = dict(rescoped or {})
    with _ledger(repo) as ledger:
        v = view(ledger, find_run(ledger, run, _cwd(repo))["id"])
        unknown = set(rescoped) - {p.id for p in v.packets}
        if unknown:
            raise UsageError(f"no such packet in run {v.id}: {', '.join(sorted(unknown))}",
                             hint="name packets by their ids")
        units = v.unit_inputs(rescoped)
        report = judge(units, run_id=v.id, tree=v.repo_root)
        _accept_checks(ledger, v, units, report)
        won = _choose(ledger, v, report)
        ledger.record_event("reconcile", run_id=v.id, cause="prun reconcile",
                            data={"accepted": report.count("accepted"),
                                  "candidates": {pid: {"candidate": c.number, "of": c.of,
                                                       "why": c.why}
                                                 for pid, c in won.items()} or None,
                                  "rejected": report.count("rejected"),
                                  "needs-review": report.count("needs-review"),
                                  "complete": report.complete,
                                  "rescoped": rescoped or None})
    return report


def _accept_checks(ledger: Ledger, v: RunView, units: list[UnitInput], report: Report) -> None:
    """Each packet's acceptance check on its deciding attempt, into ``report``: the one the
    ledger recorded, else run now (``prun.git.accept``, up to the run's ``parallel`` at once)
    and recorded with the attempt."""
    known = v.accept_checks()
    run_dir = v.run.get("run_dir")
    if run_dir:
        def record(attempt_id: str, c: AcceptCheck) -> None:
            accept.record(ledger, attempt_id, c)

        known = accept.run_checks(units, report, known=known,
                                  seqs={a["id"]: a["seq"] for rows in v.attempts.values()
                                        for a in rows},
                                  run_dir=run_dir, repo_root=v.repo_root,
                                  setup=v.run.get("setup"),
                                  parallel=int(v.run.get("parallel") or 1), record=record)
    accept.apply(report, known)


def _choose(ledger: Ledger, v: RunView, report: Report) -> dict[str, Candidacy]:
    """The winner of each packet with candidates (``RunView.choose``), the person's picks
    read from the ledger."""
    return v.choose(report, ledger.current_decisions(
        v.id, {x.packet_id: x.attempt_id for x in report.verdicts}).values())


def rescoped_map(values: Iterable[str]) -> dict[str, str]:
    """``--rescoped`` values (``PACKET`` or ``PACKET=WHY``) as ``reconcile`` takes them."""
    out = {}
    for v in values:
        pid, _, why = v.partition("=")
        out[pid.strip()] = why.strip() or "approved"
    return out


def reconcile_exit_code(report: Report) -> ExitCode:
    """0 every packet accepted (or re-scoped); 1 something rejected; 10 something needs
    review or has not finished."""
    if any(v.verdict == REJECTED and not v.rescoped for v in report.verdicts):
        return ExitCode.FAILED
    return ExitCode.OK if report.complete else ExitCode.NEEDS_REVIEW


def integrate(run: str | None = None, *, include: Iterable[str] = (),
              worktree: PathLike | None = None, check: bool = True,
              check_timeout: float = CHECK_TIMEOUT_DEFAULT, allow_dirty: bool = False,
              keep_culprits: bool = False, repo: PathLike | None = None,
              on_unit: Callable[[UnitResult], None] | None = None,
              on_notes: Callable[[list[str]], None] | None = None) -> Integration:
    """Apply a run's accepted changes to the working tree (or a new ``worktree``) and run
    the plan's combined check on the exact result (``prun integrate``); never stages or
    commits. Rejected and needs-review changes go in only when named in ``include`` or
    accepted by a recorded decision. When the check fails, the units that make it fail are
    found and taken out again (their failing check output in ``<run dir>/culprits/``), and
    the check runs again; ``keep_culprits`` leaves every change in. ``on_unit`` hears each
    unit as it is done.
    ``integrate_exit_code(result)`` is the command's exit code."""
    include = list(include)
    with _ledger(repo) as ledger:
        v = view(ledger, find_run(ledger, run, _cwd(repo))["id"])
        root = v.repo_root or toplevel(_cwd(repo))
        if not root:
            raise UsageError("the run records no repository and this is not one",
                             hint="run prun integrate inside the repository")
        if worktree is not None:
            check_worktree_path(root, os.fspath(worktree))
        units = v.unit_inputs()
        report = judge(units, run_id=v.id, with_patch=True, tree=root)
        _accept_checks(ledger, v, units, report)
        decided = ledger.current_decisions(v.id, {x.packet_id: x.attempt_id
                                                  for x in report.verdicts})
        v.choose(report, decided.values())    # the person's picks among candidates too
        decisions = {pid: row["decision"] for pid, row in decided.items()}
        unknown = sorted(set(include) - {p.id for p in v.packets})
        if unknown:
            raise UsageError(f"no packet {', '.join(unknown)} in run {v.id}",
                             hint=f"--include names packets of the run; `prun status {v.id} "
                             "--all` lists them")
        target = root
        if worktree is not None:
            target = add_worktree(root, os.fspath(worktree), v.run.get("base") or "HEAD")
        patch_dir = journal = culprit_dir = None
        if v.run.get("run_dir"):
            patch_dir = os.path.join(v.run["run_dir"], "integrate")
            journal = Journal(os.path.join(patch_dir, "journal.jsonl"))
            culprit_dir = os.path.join(v.run["run_dir"], CULPRITS_DIR)
        command = v.run.get("check_command") if check else None
        result = integrate_changes(report, v.packets, target, include=include,
                                   decisions=decisions, check=command,
                                   check_timeout=check_timeout, patch_dir=patch_dir,
                                   allow_dirty=allow_dirty, journal=journal,
                                   culprits=not keep_culprits, culprit_dir=culprit_dir,
                                   parallel=min(os.cpu_count() or 1,
                                                v.run.get("parallel") or os.cpu_count() or 1),
                                   on_notes=on_notes, on_unit=on_unit)
        ledger.record_event("integrate", run_id=v.id, cause="prun integrate",
                            data={"target": target, "applied": result.applied,
                                  "conflicts": result.conflicts,
                                  "failed": result.failed or None,
                                  "include": include or None,
                                  "decisions": decisions or None,
                                  "check": None if result.check is None else result.check.ok,
                                  "check_log": result.check.log if result.check else None,
                                  "culprits": ([c.as_dict() for c in result.bisection.culprits]
                                               if result.bisection else None),
                                  "held": result.held or None,
                                  "recheck": (result.recheck.ok if result.recheck else None)})
    return result


def integrate_exit_code(result: Integration) -> ExitCode:
    """0 every change applied and the check passed (or none); 11 a change conflicted;
    1 a patch could not be written or the check failed."""
    if result.conflicts:
        return ExitCode.CONFLICT
    if result.failed or (result.check is not None and not result.check.ok):
        return ExitCode.FAILED
    return ExitCode.OK


def check_worktree_path(repo_root: str, path: str) -> None:
    """Refuse (exit 2) an integration worktree at ``path`` inside any ``.git`` folder, or
    inside the repository's own work tree (symbolic links resolved, also of the parts of
    ``path`` that do not exist yet)."""
    where = Path(os.path.realpath(os.path.abspath(path)))
    root = Path(os.path.realpath(repo_root))
    git_dirs = [Path(os.path.realpath(d)) for d in _git_dirs(str(root))]
    if any(part.lower() == ".git" for part in where.parts) or \
            any(where == d or d in where.parents for d in git_dirs):
        raise UsageError(f"--worktree {path} is inside a .git folder",
                         hint="give a new folder outside the repository, such as ../integration")
    if where == root or root in where.parents:
        raise UsageError(f"--worktree {path} is inside the repository's work tree {root}",
                         hint="give a new folder outside the repository, such as ../integration")


# -- one unit --------------------------------------------------------------------------------

def dispatch(request: Request, *, on_state_dir: Callable[[str], None] | None = None
             ) -> Outcome:
    """Run one unit on one executor in this process and publish its result atomically
    (``prun dispatch``): ``on_state_dir`` hears the state dir as soon as it exists. Returns
    how it ended (``outcome.exit_code``: 0 succeeded, 1 failed, 75 quota, 124 timeout; a
    session unit's hand-off in ``outcome.lines``); a request refused before any state dir
    was made raises ``UsageError``. Call it from the main thread: while the unit runs,
    SIGTERM, SIGINT and SIGHUP cancel it (its process group is ended and the outcome still
    published); the caller's handlers are put back after."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT,
                                                     signal.SIGHUP)}
    try:
        return run_sync(request, on_state_dir=on_state_dir)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


# -- underneath ------------------------------------------------------------------------------

def _plan(plan: Plan | PathLike) -> Plan:
    return plan if isinstance(plan, Plan) else load_plan(plan)


def _cwd(repo: PathLike | None) -> str | None:
    return os.fspath(repo) if repo is not None else None


def _ledger(repo: PathLike | None, *, create: bool = False) -> Ledger:
    """The ledger of the repository holding ``repo`` (default: the current directory)."""
    if repo is None:
        return Ledger.open(create=create)
    return Ledger.open(default_path(repo, create=create), create=create)


def _classify(kind: str, status: str | None, any_done: bool) -> str | None:
    if kind in ("stalled", "stopped", "parked", "handoff"):
        return kind
    if kind == "accept-failed":   # a unit's check did not pass in the run (prun.run.verify)
        return "failed"
    if kind == "packet" and status in FAIL_STATUSES:
        return "failed"
    if kind == "packet" and status == "succeeded" and any_done:
        return "succeeded"
    if kind == "run" and status not in (None, "running"):
        return "run-done"
    return None


def _wake_code(found: list[WakeEvent], gone: bool, status: str) -> ExitCode:
    if gone:  # whatever else the cursor finds, nothing moves until `prun resume`
        return WAKE_CODES["supervisor-gone"]
    kinds = [e.what for e in found]
    if "run-done" in kinds:
        return {"succeeded": ExitCode.OK, "stopped": ExitCode.STOPPED}.get(status,
                                                                          ExitCode.FAILED)
    for k in ("stopped", "failed", "handoff", "stalled", "parked", "succeeded"):
        if k in kinds:
            return WAKE_CODES[k]
    return ExitCode.FAILED


def _git_dirs(root: str) -> list[str]:
    """The repository's git folders: ``.git``, and the folder a ``.git`` file (a worktree's,
    a submodule's) points at with its ``gitdir:`` line, and that folder's common dir."""
    dot = os.path.join(root, ".git")
    found = [dot]
    try:
        with open(dot, encoding="utf-8", errors="replace") as f:
            first = f.read(4096).splitlines()[:1]
    except OSError:
        return found
    if first and first[0].startswith("gitdir:"):
        gitdir = os.path.join(root, first[0][len("gitdir:"):].strip())
        found.append(gitdir)
        try:
            with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
                found.append(os.path.join(gitdir, f.read(4096).strip()))
        except OSError:
            pass
    return found
