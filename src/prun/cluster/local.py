"""``prun cluster local``: a Dask scheduler and N workers on this machine, for trying a
cluster run. Every address is bound to the host given (loopback by default): Dask has no
authentication unless TLS is set up, and its CLI listens on every interface unless told
otherwise (its dashboard included), so each process gets ``--host`` and a dashboard address
on that host. Everything else is left at Dask's defaults, as on a cluster someone else runs:
each worker has its nanny (a worker that dies is started again), and the scheduler runs a
task again when its worker died, which prun's claim makes harmless (``claim``)."""

from __future__ import annotations

import ipaddress
import os
import sys
import time
from typing import TYPE_CHECKING

from .._util.fsutil import read_json
from .._util.process import end_group, spawn
from ..errors import UsageError
from .connect import connect_client

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._util.process import Worker

START_S = 60.0        # for the scheduler and workers to come up
WORKER_THREADS = 4    # units at once per worker


def check_host(host: str, allow_any: bool) -> None:
    """Refuse a host that is not a loopback address unless ``allow_any``."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_any:
        raise UsageError(f"--host {host} would let anyone who reaches this machine run "
                         "commands on it: Dask has no authentication unless TLS is set up",
                         hint="use a loopback address (the default 127.0.0.1), or pass "
                              "--allow-all-interfaces on a network you trust")


def scheduler_argv(host: str, port: int, scheduler_file: str) -> list[str]:
    return [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", host,
            "--port", str(port), "--dashboard-address", f"{host}:0",
            "--scheduler-file", scheduler_file]


def worker_argv(address: str, host: str, name: str, threads: int) -> list[str]:
    return [sys.executable, "-m", "distributed.cli.dask_worker", address, "--host", host,
            "--dashboard-address", f"{host}:0", "--nthreads", str(threads), "--name", name]


class LocalCluster:
    """The scheduler and workers this command started (through the process helper)."""

    def __init__(self, folder: str, host: str, port: int, workers: int,
                 threads: int = WORKER_THREADS, env: dict[str, str] | None = None):
        self.folder, self.host, self.port = folder, host, port
        self.n, self.threads = workers, threads
        self.env = dict(os.environ if env is None else env)
        self.procs: list[Worker] = []   # the process helper's Workers
        self.address = ""

    def start(self) -> str:
        """Start them and wait until every worker has joined; returns the address."""
        os.makedirs(self.folder, exist_ok=True)
        sfile = os.path.join(self.folder, "scheduler.json")
        if os.path.exists(sfile):
            os.unlink(sfile)
        self.procs.append(self._spawn(spawn, scheduler_argv(self.host, self.port, sfile),
                                      "scheduler"))
        self.address = self._address(sfile)
        for i in range(self.n):
            self.procs.append(self._spawn(spawn, worker_argv(
                self.address, self.host, f"prun-worker-{i + 1}", self.threads), f"worker-{i + 1}"))
        client = connect_client(self.address, timeout=START_S)
        try:
            client.wait_for_workers(self.n, timeout=START_S)
        finally:
            client.close()
        return self.address

    def _spawn(self, spawn: Callable[..., Worker], argv: list[str], name: str) -> Worker:
        log = os.path.join(self.folder, f"{name}.log")
        return spawn(argv, cwd=self.folder, env=self.env, stdout_path=log, stderr_path=log)

    def _address(self, sfile: str) -> str:
        """The scheduler's address, from the file it writes once it listens."""
        deadline = time.monotonic() + START_S
        delay = 0.01
        while time.monotonic() < deadline:
            data = read_json(sfile)
            if isinstance(data, dict) and data.get("address"):
                return str(data["address"])
            if self.procs[0].exited():
                raise UsageError("the Dask scheduler exited at its start",
                                 hint=f"see {os.path.join(self.folder, 'scheduler.log')}")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        raise UsageError(f"the Dask scheduler did not start in {START_S:.0f} s",
                         hint=f"see {os.path.join(self.folder, 'scheduler.log')}")

    def gone(self) -> str | None:
        """The name of a process that exited, if one did."""
        names = ["scheduler", *(f"worker {i + 1}" for i in range(self.n))]
        return next((n for n, p in zip(names, self.procs, strict=False) if p.exited()), None)

    def stop(self, grace: float) -> None:
        """End every process it started, workers first (SIGTERM, grace, SIGKILL)."""
        for p in reversed(self.procs):
            end_group(p, grace)
            p.reap()
        self.procs.clear()
