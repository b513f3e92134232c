"""The event source: folder changes and process exits wake a waiter; modes and their env."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from prun._util.process import create_time
from prun.errors import UsageError
from prun.watch.notify import Watch, poll_interval, resolve_mode


@pytest.mark.parametrize("mode", ["native", "poll"])
def test_a_file_created_after_the_watch_wakes_the_waiter(tmp_path, mode):
    with Watch(mode, interval=0.05) as w:
        assert w.add_dir(str(tmp_path)) == mode
        (tmp_path / "result.md").write_text("done\n")
        seen: set[str] = set()
        for _ in range(200):  # bounded: each wait returns on an event or after 0.1 s
            seen |= w.wait(0.1).paths
            if str(tmp_path / "result.md") in seen:
                break
        assert str(tmp_path / "result.md") in seen


def test_appending_to_a_file_wakes_nobody(tmp_path):
    """Per-write events are not asked for: a chatty tail costs the waiter nothing."""
    tail = tmp_path / "tail"
    tail.write_text("")
    with Watch("native") as w:
        w.add_dir(str(tmp_path))
        with open(tail, "a") as f:  # held open, as a worker's stdout is
            for _ in range(50):
                f.write("x" * 100 + "\n")
                f.flush()
            (tmp_path / "marker").write_text("m")  # a later event, to know the queue drained
            seen: set[str] = set()
            for _ in range(200):
                seen |= w.wait(0.1).paths
                if str(tmp_path / "marker") in seen:
                    break
        assert str(tmp_path / "marker") in seen
        assert str(tail) not in seen


def test_a_process_exit_wakes_the_waiter():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        with Watch("native") as w:
            how = w.add_process(child.pid, create_time(child.pid))
            if how == "unsupported":
                pytest.skip("no pidfd on this platform")
            assert how == "watching"
            child.stdin.close()
            changes = w.wait(30)
            assert child.pid in changes.exited
    finally:
        child.kill()
        child.wait()


def test_a_reused_pid_counts_as_gone():
    with Watch("native") as w:
        how = w.add_process(os.getpid(), 1.0)  # this pid, but not started in 1970
        assert how in ("gone", "unsupported")


def test_modes_from_option_and_environment():
    assert resolve_mode(False, {}) == "native"
    assert resolve_mode(False, {"PRUN_WATCH": "poll"}) == "poll"
    assert resolve_mode(False, {"PRUN_WATCH": " Inotify "}) == "native"
    assert resolve_mode(True, {"PRUN_WATCH": "native"}) == "poll"
    with pytest.raises(UsageError):
        resolve_mode(False, {"PRUN_WATCH": "fast"})
    assert poll_interval({"PRUN_WATCH_POLL_INTERVAL": "250ms"}) == 0.25
    with pytest.raises(UsageError):
        poll_interval({"PRUN_WATCH_POLL_INTERVAL": "soon"})
