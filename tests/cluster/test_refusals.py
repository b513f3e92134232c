"""What is refused before anything is made: a bad or unreachable cluster address, Dask missing;
`prun cluster local` binds loopback only unless told otherwise; importing prun and its local
commands never imports Dask."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from clusterkit import need_dask, write_plan

from helpers import prun


def plan_in(repo):
    return write_plan(repo / "plan.json", [
        {"id": "one", "executor": "command", "prompt": "one", "command": ["true"]}])


def test_a_bad_address_is_one_line_and_exit_2(repo):
    r = prun("run", str(plan_in(repo)), "--cluster", "http://example:1", timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "not a Dask scheduler address" in r.stderr
    assert not (repo / ".prun" / "runs").exists()


def test_a_bad_prun_cluster_variable_is_refused(repo):
    r = prun("run", str(plan_in(repo)), env={"PRUN_CLUSTER": "tcp://nohost"}, timeout=60)
    assert r.returncode == 2 and "PRUN_CLUSTER" in r.stderr


def test_an_unreachable_scheduler_is_refused_before_any_state(repo):
    need_dask()
    import socket

    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = prun("run", str(plan_in(repo)), "--cluster", f"tcp://127.0.0.1:{port}",
             env={"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}, timeout=90)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "cannot reach the Dask scheduler" in r.stderr
    assert not (repo / ".prun" / "runs").exists()


def test_without_dask_a_cluster_run_says_how_to_install_it(repo, tmp_path):
    shim = tmp_path / "shim" / "distributed"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('not installed here')\n")
    r = prun("run", str(plan_in(repo)), "--cluster", "tcp://127.0.0.1:8786",
             env={"PYTHONPATH": str(shim.parent)}, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "prun-agents[dask]" in r.stderr
    assert not (repo / ".prun" / "runs").exists()


def test_importing_prun_and_its_local_commands_imports_no_dask():
    code = ("import sys, prun, prun.cli, prun.run.supervisor, prun.run.drive, prun.cli.run, "
            "prun.cli.cluster, prun.cluster, prun.cluster.config, prun.cluster.local; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('distributed', 'dask')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1"])
def test_cluster_local_refuses_a_non_loopback_host(host):
    r = prun("cluster", "local", "--host", host, timeout=60)
    assert r.returncode == 2
    assert "no authentication" in r.stderr and "--allow-all-interfaces" in r.stderr


def test_cluster_local_binds_loopback_and_ends_what_it_started(tmp_path):
    need_dask()
    proc = subprocess.Popen([sys.executable, "-m", "prun", "cluster", "local", "--workers", "2",
                             "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "XDG_STATE_HOME": str(tmp_path)})
    try:
        line = proc.stdout.readline()
        assert line.startswith("CLUSTER tcp://127.0.0.1:"), line + proc.stderr.read()
        assert "workers=2" in line
        assert len(psutil.Process(proc.pid).children()) == 3   # a scheduler, two nannies
        kids = psutil.Process(proc.pid).children(recursive=True)   # and the nannies' workers
        listening = [c.laddr for k in kids for c in k.net_connections("inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and {a.ip for a in listening} == {"127.0.0.1"}
        for k in kids:   # each can be stopped by its own SIGTERM: no signal mask passed down
            blocked = int(_status_field(k.pid, "SigBlk"), 16)
            assert not blocked & (1 << (signal.SIGTERM - 1) | 1 << (signal.SIGINT - 1)), k
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        deadline = time.monotonic() + 30
        while any(k.is_running() and k.status() != psutil.STATUS_ZOMBIE for k in kids):
            assert time.monotonic() < deadline, "a cluster process outlived the command"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:   # ends what it started
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _status_field(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/status") as f:
        return next(line.split()[1] for line in f if line.startswith(name + ":"))
