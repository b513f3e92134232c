"""Pause one unit: save its diff as a patch, stop it, record it for a revised attempt.

    prun pause PACKET [--run RUN] [--json]

For the seed's "a writer discovers a shared file or dependency outside its packet". The
packet's deciding attempt in RUN (default: the latest run of this repository) is stopped:
only the process group of the worker its ledger receipt names (pid and start time, written by
the supervisor; else its keeper's log), and only while that pid is still the process prun
started. Nothing the unit wrote in its state dir (unit.json) is taken for its identity.
Its clone's change against the base is saved as <state dir>/paused.patch (binary, untracked
files included), with paused.json beside it; the ledger gets a `pause` event and a cancel
request for the run's supervisor. A revised packet then runs as a new attempt linked to this
one (`prun reassign PACKET`).

    PAUSED <packet> attempt=<id> stopped=stopped|gone|not-started files=<n> patch=<path>

exit codes: 0 paused; 1 the unit's process could not be stopped safely; 2 bad usage (no
such run or packet, or the packet has no attempt).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._util.process import same_process_alive
from .._util.quoting import quote, word
from ..attempt import identity
from ..attempt.statedir import OUTCOME, StateDir
from ..cluster.reach import remote_of
from ..cluster.reach import stop as stop_there
from ..errors import StateError, UsageError
from ..git.pause import pause
from ..ledger import Ledger, Status
from ..run.detached import wake_supervisor
from ..settings import current
from ..views.model import open_run
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("packet_id", metavar="PACKET", type=options.packet_id, help="the packet to pause")
    p.add_argument("--run", dest="run_id", metavar="RUN", type=options.run_id, help="a run id or prefix "
                   "(default: the latest run of this repository)")
    p.add_argument("--json", action="store_true", help="the result as JSON")


def run(args: argparse.Namespace) -> int:
    with Ledger.open(create=False) as ledger:
        view = open_run(ledger, args.run_id)
        if view.packet(args.packet_id) is None:
            raise UsageError(f"no packet {args.packet_id!r} in run {view.id}",
                             hint="`prun ledger RUN` lists its packets")
        attempt = view.deciding(args.packet_id)
        if attempt is None or not attempt.get("state_dir"):
            raise UsageError(f"packet {args.packet_id!r} has no attempt to pause",
                             hint="a packet that never ran needs no pause; revise it instead")
        live = attempt["status"] in {s.value for s in Status if s.live}
        base = attempt.get("base") or view.bases.get(args.packet_id) or view.run.get("base")

        def ask_supervisor() -> bool:
            ledger.add_request(view.id, "cancel", target=attempt["id"],
                               cause=f"paused: prun pause {args.packet_id}")
            return wake_supervisor(view.run)

        worker = identity.worker(StateDir(attempt["state_dir"]), attempt.get("receipt"))
        result = pause(attempt["state_dir"], attempt.get("workspace"), base, worker=worker,
                       ask_supervisor=ask_supervisor if live else None,
                       stop=_remote_stop(attempt, live, ask_supervisor))
        ledger.record_event("pause", run_id=view.id, packet_id=args.packet_id,
                            attempt_id=attempt["id"], status=attempt["status"],
                            cause="prun pause", data={"patch": result.patch,
                                                      "files": result.files,
                                                      "stopped": result.stopped})
        supervisor = same_process_alive(view.run.get("supervisor_pid"),
                                        view.run.get("supervisor_started"))
        if live and not supervisor:
            ledger.update_attempt(attempt["id"], "paused (no supervisor running)",
                                  status=Status.CANCELLED, reason="paused")
    if args.json:
        print(json.dumps({"packet": args.packet_id, "attempt": attempt["id"],
                          **result.as_dict()}, indent=2, sort_keys=True))
    else:
        print(f"PAUSED {quote(args.packet_id)} {word('attempt', attempt['id'])} "
              f"stopped={result.stopped} files={len(result.files)} "
              f"{word('patch', result.patch or 'none')}")
    return 0


def _remote_stop(attempt: Mapping[str, Any], live: bool,
                 ask_supervisor: Callable[[], bool]) -> Callable[[], str] | None:
    """How to stop the unit of a cluster run (None for one that ran here): through its live
    supervisor, which lands its diff in the clone; else, or when the supervisor has not
    judged it within the bound, through the cluster's scheduler, whose worker ends the
    unit's group (SIGTERM, the grace, SIGKILL) and sends its diff back, landed here."""
    state_dir = attempt["state_dir"]
    if remote_of(state_dir) is None:
        return None
    if not live:
        return lambda: "gone"

    def stop() -> str:
        grace = current().kill_grace_s
        if ask_supervisor() and _judged(state_dir, 2 * grace + 5):
            return "stopped"
        found = stop_there(state_dir, attempt["id"], grace, workspace=attempt["workspace"])
        if found.found and not found.gone:
            raise StateError(f"the unit's process group on the worker {found.worker} did "
                             "not end", hint="stop it there by hand; its diff is not saved")
        if found.applied:
            import sys

            print(f"prun: warning: the unit's diff did not apply to its clone ({found.applied});"
                  f" it is kept in {state_dir}", file=sys.stderr)
        return "stopped" if found.found else "gone"

    return stop


def _judged(state_dir: str, within: float) -> bool:
    """Whether the attempt's ``outcome.json`` appears within ``within`` seconds (its
    supervisor has stopped it, landed its diff and judged it)."""
    end = time.monotonic() + within
    while not os.path.exists(os.path.join(state_dir, OUTCOME)):
        if time.monotonic() >= end:
            return False
        time.sleep(0.05)
    return True
