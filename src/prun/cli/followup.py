"""A follow-up turn for a packet: a linked attempt that carries its latest one on.

    prun followup PACKET [--prompt-file F] [--with-check] [--run RUN] [--wait SECONDS]

The seed's "keep the Agy pool busy with follow-up turns": the new attempt resumes the
packet's conversation (`--continue-from` its latest attempt's state dir) where the executor
can, in the same workspace (a code unit keeps every edit; Gemini resumes only from the folder
it ran in), with a fresh result path, recorded in the ledger like any other attempt. Where
the conversation cannot be resumed (a command or session unit, no conversation id, or the CLI
refuses the resume), it gets the packet's brief again with the earlier result and the
follow-up request. The run goes on; a finished run is re-opened (a supervisor is started).
A follow-up asked for while the packet runs starts when that attempt ends. `prun reconcile`
then judges the packet's latest attempt. `--with-check` (a culprit `prun integrate` named) puts
the output of the check run that showed it failing (`<run dir>/culprits/<packet>.log`) in the
request, after the prompt file's text; the prompt file is then optional.

    FOLLOWUP <packet> run=<run-id> predecessor=<attempt> attempt=<new attempt> resume=yes|no

exit codes: 0 the follow-up attempt exists; 1 it did not within --wait seconds (the request
stands); 2 bad usage (no such run or packet, the packet never ran, empty prompt file, no
prompt file and no --with-check, --with-check for a packet no check showed failing).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .._util.fsutil import tail_bytes
from .._util.quoting import quote
from .._util.regular import read_regular
from ..errors import UsageError
from ..git.culprit import log_path
from ..ledger import Ledger
from ..run.detached import spawn_supervisor, wait_for, wake_supervisor
from ..run.paths import RunPaths
from ..views.model import open_run
from . import options

if TYPE_CHECKING:
    import sqlite3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("packet", metavar="PACKET", type=options.packet_id, help="the packet id")
    p.add_argument("--prompt-file", metavar="F", type=options.path,
                   help="the follow-up request (Markdown text)")
    p.add_argument("--with-check", action="store_true",
                   help="add the output of the check run that showed this culprit failing "
                   "(prun integrate)")
    p.add_argument("--run", dest="run_id", metavar="RUN", type=options.run_id,
                   help="a run id or prefix (default: the latest run of this repository)")
    p.add_argument("--wait", type=options.seconds, default=60.0,
                   help="seconds to wait for the follow-up attempt to start (default 60)")


def run(args: argparse.Namespace) -> int:
    if not args.prompt_file and not args.with_check:
        raise UsageError("say what to follow up", hint="give --prompt-file F, or --with-check "
                         "for a culprit prun integrate named")
    text = _read_prompt(args.prompt_file) if args.prompt_file else ""
    with Ledger.open(create=False) as ledger:
        view = open_run(ledger, args.run_id)
        if view.packet(args.packet) is None:
            raise UsageError(f"no packet {args.packet!r} in run {view.id}",
                             hint="packets: " + ", ".join(p.id for p in view.packets))
        if args.with_check:
            text = _with_check(text, view.run.get("run_dir"), args.packet)
        before = ledger.attempts(view.id, args.packet)
        if not before:
            raise UsageError(f"packet {args.packet!r} has not run yet: nothing to follow up",
                             hint="wait for its first attempt (`prun wait`), or edit its packet")
        old = before[-1]["id"]
        ledger.add_request(view.id, "followup", args.packet, cause="prun followup",
                           data=text)
        run = ledger.run(view.id)
        assert run is not None  # the run just opened; runs are never deleted
        if not wake_supervisor(run):
            spawn_supervisor(view.id, ledger.path, RunPaths(Path(run["run_dir"])).log)

        def successor() -> sqlite3.Row | None:
            rows = ledger.attempts(view.id, args.packet)
            return next((r for r in rows[len(before):] if r["predecessor"]), None)

        new = wait_for(successor, args.wait)
        resume = "yes" if new and new["continue_from"] else "no"
        print(f"FOLLOWUP {quote(args.packet)} run={view.id} predecessor={quote(old)} "
              f"attempt={new['id'] if new else 'pending'}"
              + (f" resume={resume}" if new else ""))
        return 0 if new else 1


PROMPT_MAX_BYTES = 8 * 1024 * 1024   # as a dispatched unit's prompt (docs/dispatch.md)


def _with_check(text: str, run_dir: str | None, packet: str) -> str:
    """The request with the failing check output of culprit ``packet`` after it."""
    log = log_path(run_dir, packet) if run_dir else None
    if log is None or not os.path.isfile(log):
        raise UsageError(f"no check run showed {packet!r} failing in this run",
                         hint="prun integrate names the culprits of a failed check (CULPRIT)")
    output = tail_bytes(log, PROMPT_MAX_BYTES // 2).decode("utf-8", "replace")
    return ((text.rstrip() + "\n\n" if text.strip() else
             f"Your change makes the project's check fail (prun integrate named {packet} "
             "its culprit). Fix it so the check passes.\n\n")
            + "## The check that failed\n\n"
            f"Its output ({log}):\n\n```\n{output.rstrip()}\n```\n")


def _read_prompt(path: str) -> str:
    """The follow-up request: a regular file of at most PROMPT_MAX_BYTES, UTF-8 text."""
    data = read_regular(path, PROMPT_MAX_BYTES, "prompt file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"cannot read prompt file {path}: {e}", hint="give a UTF-8 text file")
    if not text.strip():
        raise UsageError(f"prompt file is empty: {path}", hint="write the follow-up request there")
    return text
