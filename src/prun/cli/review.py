"""Review a run on a local web page, and record the person's decisions for `prun integrate`.

    prun review [RUN] [--port N] [--open] [--as NAME]
    prun review [RUN] --decide PACKET accept|reject|include [--note TEXT] [--as NAME] [--json]
    prun review [RUN] --json

The page (needs prun-agents[review]) shows every packet of the run: executor and model,
status, verdict in reconcile's words (ACCEPTED, REJECTED, REVIEW) and reasons, its result
rendered as Markdown, its change file by file with each diff, the required sections found or
missing, its cost, and the combined check's log; it follows the run while it goes on. It
listens on 127.0.0.1 only (a free port unless --port) behind a random token, and prints one
line, then serves until Ctrl-C or SIGTERM:

    REVIEW http://127.0.0.1:<port>/?token=<token>

Each packet has Accept, Reject and Include buttons with an optional note. A decision is
recorded in the ledger (who: --as, else the user's name; when; why) on the packet's deciding
attempt, and `prun integrate` honours the latest one: include and accept apply the change as
--include does, reject leaves it out as a rejected verdict is. --decide records one from the
command line:

    DECIDED <packet> decision=<d> attempt=<id|none> who=<name> at=<time>

--json (without --decide) prints what the page shows, once, and serves nothing.

exit codes (README, "Exit codes"): 0 served until stopped, or the decision was recorded;
2 bad usage, no such run or packet, the review extra missing, the port taken.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from importlib.util import find_spec

from ..errors import ExitCode, UsageError
from ..ledger import Ledger
from ..views.model import find_run
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_id", nargs="?", metavar="RUN", type=options.run_id,
                   help="a run id or prefix (default: latest)")
    p.add_argument("--port", type=options.port, default=0, metavar="N",
                   help="listen on this port of 127.0.0.1 (default: a free one)")
    p.add_argument("--open", action="store_true",
                   help="open the page in a browser (given an address good once)")
    p.add_argument("--as", dest="who", metavar="NAME", type=options.name("name"),
                   help="who decides (default: the user's name)")
    p.add_argument("--decide", nargs=2, metavar=("PACKET", "DECISION"),
                   type=options.name("packet id and a decision"),
                   help="record a decision (accept, reject or include) and exit")
    p.add_argument("--note", metavar="TEXT", help="why (with --decide)")
    p.add_argument("--json", action="store_true",
                   help="with --decide: the decision as JSON; else what the page shows")


def run(args: argparse.Namespace) -> int:
    if args.note is not None and not args.decide:
        raise UsageError("--note goes with --decide", hint="prun review RUN --decide PACKET "
                         "reject --note TEXT, or write the note on the page")
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port} is not a port", hint="give 1-65535, or 0")
    with Ledger.open(create=False) as ledger:
        run_id = str(find_run(ledger, args.run_id)["id"])
        if args.decide:
            from ..review.decide import decide

            done = decide(ledger, run_id, args.decide[0], args.decide[1], note=args.note,
                          who=args.who)
            print(json.dumps(done.as_dict(), sort_keys=True) if args.json else done.line())
            return ExitCode.OK
        if args.json:
            from ..review.model import build

            print(json.dumps(build(ledger, run_id).as_dict(), indent=2, sort_keys=True))
            return ExitCode.OK
        path = str(ledger.path)
    return _serve(path, run_id, args)


def _serve(ledger_path: str, run_id: str, args: argparse.Namespace) -> int:
    missing = [m for m in ("aiohttp", "markdown_it", "pygments") if find_spec(m) is None]
    if missing:
        raise UsageError(f"prun review needs {', '.join(missing)}, which is not installed",
                         hint="pip install 'prun-agents[review]'")
    from ..review.server import Review, serve

    def say(line: str) -> None:
        print(line, flush=True)

    asyncio.run(serve(Review(ledger_path, run_id, args.who), port=args.port,
                      open_browser=args.open, say=say))
    return ExitCode.OK
