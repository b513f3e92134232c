"""A Dask cluster for cluster runs (docs/cluster.md).

`prun cluster local --workers N` starts a Dask scheduler and N workers on this machine, bound
to 127.0.0.1 (`--host`; any other address is refused without `--allow-all-interfaces`, since
Dask has no authentication unless TLS is set up), prints one line once every worker has
joined, and stays until Ctrl-C or SIGTERM, then ends what it started:

    CLUSTER tcp://127.0.0.1:<port> workers=<n> logs=<folder>

Run a plan on it with `prun run PLAN --cluster tcp://127.0.0.1:<port>`.

exit codes (README, "Exit codes"): 0 stopped by Ctrl-C or SIGTERM; 1 one of its processes
died; 2 bad usage, Dask missing (prun-agents[dask]) or it could not start.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from .. import settings
from .._util.quoting import printable, quote, word
from ..cluster.connect import require
from ..cluster.local import LocalCluster, check_host
from . import options

WORKERS_MAX = 64   # --workers
THREADS_MAX = 64   # --threads


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    local = sub.add_parser("local", help="start a scheduler and workers on this machine",
                           description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    local.add_argument("--workers", "-n", type=options.int_in(1, WORKERS_MAX, "workers"),
                       default=2, help=f"worker processes (default 2, at most {WORKERS_MAX})")
    local.add_argument("--threads", type=options.int_in(1, THREADS_MAX, "threads"), default=4,
                       help=f"units at once per worker (default 4, at most {THREADS_MAX})")
    local.add_argument("--host", default="127.0.0.1", type=options.name("host"),
                       help="the address every process binds to (default 127.0.0.1)")
    local.add_argument("--port", type=options.port, default=0,
                       help="the scheduler's port (default: a free one)")
    local.add_argument("--allow-all-interfaces", action="store_true",
                       help="allow a --host that is not loopback (anyone who reaches it can "
                            "run commands here)")


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port < 65536:
        from ..errors import UsageError

        raise UsageError(f"--port {args.port} is not a port",
                         hint="give 0 (a free port) or a port from 1 to 65535")
    check_host(args.host, args.allow_all_interfaces)
    require()
    s = settings.current()
    folder = os.path.join(s.user_state, "cluster-local", str(os.getpid()))
    cluster = LocalCluster(folder, args.host, args.port, args.workers, args.threads)
    # Handlers, not a blocked mask: a blocked mask would pass to the scheduler and workers
    # (a handler does not), and they could then not be stopped by their own SIGTERM.
    got: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: got.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        address = cluster.start()
        print(f"CLUSTER {quote(address)} workers={args.workers} {word('logs', folder)}",
              flush=True)
        while not got:
            gone = cluster.gone()
            if gone:
                print(f"prun: the cluster's {gone} exited (see {printable(folder)})",
                      file=sys.stderr)
                return 1
            time.sleep(0.5)     # a signal is seen within half a second
        return 0
    finally:
        cluster.stop(s.kill_grace_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
