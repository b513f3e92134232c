"""Ask a cross-vendor panel: the same question, under the same JSON Schema, to Claude, Gemini
and Antigravity units; then a cross-check of their answers, field by field.

    prun panel QUESTION_FILE --schema VERDICT.schema.json [--claude N] [--gemini M] [--agy K]
    prun panel QUESTION_FILE --schema S --detach     in the background: prints RUN <run-id>
    prun panel --run RUN             the cross-check of a panel run (after --detach, or resume)

With no count given the panel is one Claude and one Gemini unit. Each panelist is a read-only
unit on its own executor (never routed elsewhere), reading the code through the run's snapshot,
and answers with one JSON document: the last ```json block of its result, else the whole
result. An answer the schema does not pass gets one follow-up naming the errors (a linked
attempt resuming the conversation), then counts as invalid. It is a run like any other
(`prun status`, `prun ledger`). Lines (docs/panel.md):

    RUN <run-id> panelists=<n> parallel=<p> base=<commit|none> deadline=<time|none>
    UNIT <panelist> <event> ...                  (what needs attention, as prun run prints)
    ANSWER <panelist> invalid attempt=<id> errors=<n> followup=yes
    PANEL run=<id> status=<s> panelists=<n> valid=<n> invalid=<n> ... verdict=<v>
    PANELIST <id> executor=<x> model=<m> valid=yes|no attempts=<n> answer=<path> ...
    FIELD <field> agree|disagree|split-within|missing ...
    EVIDENCE <run dir>/panel

`--json` prints one JSON document instead (panelists, fields with their groups, counts).
`--detach` prints only `RUN <run-id>`; follow with `prun wait RUN`, then `prun panel --run RUN`.

exit codes (README, "Exit codes"): 0 every answer valid and every field agreed; 10 needs
review: a field not agreed or an answer invalid (at least one valid answer); 1 no valid
answer, or the run was cancelled; 2 bad usage (a missing or empty question, a schema that is
not JSON or not a JSON Schema, no panelists), nothing made; 3 the run stopped (a panelist
could not be dispatched); 124 the deadline passed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..ledger import Ledger
from ..panel import build, contract, drive
from . import options

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..panel.build import Panel
    from ..panel.report import Report
    from ..run.events import Event


PANELISTS_MAX = 16  # of each family
_count = options.int_in(0, PANELISTS_MAX, "panelists")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("question", metavar="QUESTION_FILE", nargs="?", type=options.path,
                   help="the question (Markdown text), the same for every panelist")
    p.add_argument("--schema", metavar="SCHEMA", type=options.path,
                   help="the JSON Schema every answer must pass (a .schema.json file)")
    p.add_argument("--claude", type=_count, metavar="N", help="Claude panelists")
    p.add_argument("--gemini", type=_count, metavar="M", help="Gemini CLI panelists")
    p.add_argument("--agy", type=_count, metavar="K", help="Antigravity panelists "
                   "(default without any count: --claude 1 --gemini 1)")
    p.add_argument("--timeout", metavar="DURATION", type=options.duration,
                   help="each panelist's timeout (45m, 600)")
    p.add_argument("--deadline", type=options.when,
                   help="the run's terminal deadline: a duration (90m) or ISO time")
    p.add_argument("--parallel", "-j", type=options.positive_int,
                   help="panelists at once (default: all of them)")
    p.add_argument("--detach", action="store_true",
                   help="run the panel in the background; print the run id and return "
                   "(then `prun wait RUN` and `prun panel --run RUN`)")
    p.add_argument("--run", dest="run_id", metavar="RUN", type=options.run_id,
                   help="print the cross-check of an earlier panel run instead")
    p.add_argument("--json", action="store_true", help="one JSON document instead of lines")
    p.add_argument("--verbose", "-v", action="store_true", help="a line for every unit event")


def run(args: argparse.Namespace) -> int:
    if args.run_id:
        if args.question or args.schema:
            raise UsageError("--run prints an earlier panel: give no question or schema",
                             hint="drop QUESTION_FILE and --schema, or --run")
        with Ledger.open(create=False) as ledger:
            row = ledger.find_run(args.run_id)
            if row is None:
                raise UsageError(f"no run {args.run_id!r} in the ledger",
                                 hint="see `prun ledger` for the runs")
            return _show(drive.finish(ledger, row["id"], record=False), args.json)
    panel = _panel(args)
    with Ledger.open() as ledger:
        r = drive.start(panel, ledger)
        if args.detach:
            from ..run.detached import spawn_supervisor
            from ..run.paths import RunPaths

            spawn_supervisor(r["id"], ledger.path, RunPaths(drive.evidence_dir(r).parent).log,
                             module="prun.panel.detached")
            print(json.dumps({"run": r["id"]}) if args.json else f"RUN {r['id']}")
            return 0
        say = _say(args.json)
        say(f"RUN {r['id']} panelists={panel.total} parallel={r['parallel']} "
            f"base={r['base'] or 'none'} deadline={r['deadline'] or 'none'}")
        from ..run.events import LineRenderer

        renderer = LineRenderer(sys.stdout, verbose=args.verbose)
        try:
            drive.supervise(ledger, r["id"], _quiet if args.json else renderer.handle,
                            drive.FollowUps(r["id"], panel.contract.schema, say))
        finally:
            renderer.close()
        return _show(drive.finish(ledger, r["id"]), args.json)


def _panel(args: argparse.Namespace) -> Panel:
    if not args.question or not args.schema:
        raise UsageError("a panel needs a question file and --schema",
                         hint="prun panel QUESTION_FILE --schema VERDICT.schema.json")
    counts = build.counts(args.claude, args.gemini, args.agy)  # none at all: refused here
    timeout_s = None
    if args.timeout is not None:
        from .._util.timeparse import parse_duration

        timeout_s = parse_duration(args.timeout, what="--timeout")
        if timeout_s <= 0:
            raise UsageError(f"--timeout must be more than 0 s (got {args.timeout!r})",
                             hint="give seconds or a duration such as 45m")
    return build.Panel(contract=contract.load(args.question, args.schema), counts=counts,
                       timeout_s=timeout_s, parallel=args.parallel, deadline=args.deadline)


def _say(quiet: bool) -> Callable[[str], None]:
    def say(line: str) -> None:
        if not quiet:
            print(line, flush=True)
    return say


def _quiet(event: Event) -> None:
    """--json: the events are not printed (the document says it all)."""


def _show(report: Report, as_json: bool) -> int:
    if as_json:
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        for line in report.lines():
            print(line)
    return report.exit_code()
