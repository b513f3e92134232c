"""``spawn(die_with_parent=True)``: the worker is killed when the process that started it
dies, armed by ``setpriv --pdeathsig`` before its exec (the spawn stays a vfork) or, where
that cannot be used, by a ``preexec_fn``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

from helpers import poll
from prun._util import process

PARENT = textwrap.dedent("""
    import os, sys, time
    from prun._util import process
    if sys.argv[1] == "preexec":
        process._armed_by_exec = lambda: None
    w = process.spawn([sys.executable, "-c", "import time; time.sleep(600)"], cwd=".",
                      env=dict(os.environ), stdout_path=os.devnull, stderr_path=os.devnull,
                      die_with_parent=True)
    print(w.pid, flush=True)
    time.sleep(600)
""")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("how", ["setpriv", "preexec"])
def test_the_worker_dies_with_the_process_that_started_it(how, tmp_path):
    if how == "setpriv" and process._armed_by_exec() is None:
        pytest.skip("no setpriv with --pdeathsig here (util-linux 2.33+)")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, how], cwd=tmp_path,
                              stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        assert psutil.Process(worker).ppid() == parent.pid
        real = os.path.realpath(sys.executable)
        poll(lambda: os.path.realpath(psutil.Process(worker).exe()) == real)  # exec'd
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(30)
        poll(lambda: _gone(worker))
    finally:
        parent.kill()
        parent.wait(30)


def test_setpriv_arms_the_signal_where_it_is_installed():
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) on PATH")
    armed = process._armed_by_exec()
    assert armed is not None and armed[1:] == ["--pdeathsig", "KILL", "--"]
