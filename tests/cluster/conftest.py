"""A real Dask cluster on loopback for cluster-run tests, started with Dask's own commands
(``dask scheduler``, ``dask worker``) and its defaults: every worker has its nanny, and the
scheduler runs a task again when its worker dies (``allowed-failures`` 3). Only the addresses
are set (all bound to 127.0.0.1). Each worker has a state folder of its own
(``XDG_STATE_HOME``: its markers, bases and port registry), as a worker on another machine
would. Waited for through a client, ended at the end. Tests that need Dask skip where it is
not installed, and fail instead on CI (CI=true)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clusterkit import need_dask

from helpers import FAKES, make_fake_cli, working_repo

START_S = 60.0
DASK = [sys.executable, "-m", "dask"]   # the `dask` command of this environment


class TestCluster:
    """A scheduler and workers on 127.0.0.1; every address bound there."""

    def __init__(self, folder: Path, threads: int = 4):
        self.folder = folder
        self.threads = threads
        folder.mkdir(parents=True, exist_ok=True)
        fake = make_fake_cli(folder / "bin", "claude", FAKES / "fake_claude.py")
        self.env = {**os.environ, "PRUN_KILL_GRACE_SECONDS": "1",
                    "PRUN_CLAUDE_BIN": str(fake), "IS_SANDBOX": "1",
                    "FAKE_CLAUDE_SCENARIO": "bash",
                    "FAKE_CLAUDE_BASH": "echo from-claude > claude.txt",
                    "FAKE_CLAUDE_HOME": str(folder / "claude-home")}
        for var in ("PRUN_STATE_ROOT", "PRUN_LEDGER", "PRUN_WORKSPACE_ROOT", "PRUN_CLUSTER"):
            self.env.pop(var, None)
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.address = ""

    def _start(self, argv: list[str], name: str, env: dict | None = None) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")
        try:
            return subprocess.Popen(argv, env={**self.env, **(env or {})}, stdout=log,
                                    stderr=log, start_new_session=True)
        finally:
            log.close()

    def start(self, workers: int) -> TestCluster:
        sfile = self.folder / "scheduler.json"
        self.scheduler = self._start(
            [*DASK, "scheduler", "--host", "127.0.0.1",
             "--port", "0", "--dashboard-address", "127.0.0.1:0",
             "--scheduler-file", str(sfile)], "scheduler")
        deadline = time.monotonic() + START_S
        while not self.address:
            assert time.monotonic() < deadline, "the scheduler did not start"
            assert self.scheduler.poll() is None, (self.folder / "scheduler.log").read_text()
            try:
                self.address = json.loads(sfile.read_text())["address"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.02)
        for _ in range(workers):
            self.add_worker()
        return self

    def state(self, n: int) -> Path:
        """The state folder of worker ``n`` (from 1)."""
        return self.folder / f"worker-state-{n}"

    def add_worker(self) -> subprocess.Popen:
        """One more worker (``dask worker``, with its nanny); returns the nanny's process."""
        from distributed import Client

        n = len(self.workers) + 1
        w = self._start([*DASK, "worker", self.address, "--host", "127.0.0.1",
                         "--dashboard-address", "127.0.0.1:0", "--nthreads", str(self.threads),
                         "--name", f"w{n}"], f"worker-{n}",
                        env={"XDG_STATE_HOME": str(self.state(n))})
        self.workers.append(w)
        alive = sum(1 for p in self.workers if p.poll() is None)
        with Client(self.address, timeout=START_S, set_as_default=False) as c:
            c.wait_for_workers(alive, timeout=START_S)
        return w

    def kill_worker(self, w: subprocess.Popen) -> None:
        """kill -9 of the worker process and of its nanny together (their process group;
        the units the worker started are in sessions of their own)."""
        import psutil

        procs = [psutil.Process(w.pid), *psutil.Process(w.pid).children()]
        os.killpg(w.pid, signal.SIGKILL)
        w.wait(10)
        _, alive = psutil.wait_procs(procs, timeout=10)
        assert not alive, alive

    def stop(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in [*self.workers, self.scheduler]:
            if p is None:
                continue
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One scheduler and two workers for the tests of a module."""
    need_dask()
    c = TestCluster(tmp_path_factory.mktemp("cluster")).start(2)
    yield c
    c.stop()


@pytest.fixture
def own_cluster(tmp_path):
    """A scheduler of this test's own, with no worker yet (``add_worker``)."""
    need_dask()
    c = TestCluster(tmp_path / "own-cluster", threads=2).start(0)
    yield c
    c.stop()


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return working_repo(tmp_path, monkeypatch, {"README": "a repository for cluster runs\n",
                                                 "data.bin": bytes(range(256))})
