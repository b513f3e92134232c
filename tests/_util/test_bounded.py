"""bounded.run: a bounded command's input and output, its limit, its timeout, and ending it from
another thread."""

from __future__ import annotations

import os
import sys
import threading
import time

from prun._util import bounded


def test_input_and_output_round_trip():
    data = os.urandom(1 << 20)  # more than a pipe holds: written while it is read
    done = bounded.run([sys.executable, "-c", "import sys; sys.stdout.buffer.write("
                        "sys.stdin.buffer.read()); sys.stderr.write('done')"],
                       timeout=60, input=data)
    assert (done.returncode, done.stdout, done.stderr) == (0, data, b"done")
    assert not done.timed_out and not done.over_limit


def test_exit_code_and_death_by_signal():
    assert bounded.run(["sh", "-c", "exit 3"], timeout=30).returncode == 3
    assert bounded.run(["sh", "-c", "kill -9 $$"], timeout=30).returncode == 128 + 9


def test_output_past_the_limit_ends_the_group():
    started = time.monotonic()
    done = bounded.run(["yes"], timeout=60, limit=100_000, grace=0.0)
    assert done.over_limit and not done.timed_out and done.returncode is None
    assert len(done.stdout) > 100_000
    assert time.monotonic() - started < 30


def test_timeout_ends_the_group():
    started = time.monotonic()
    done = bounded.run(["sh", "-c", "sleep 60 & wait"], timeout=0.5, grace=0.0)
    assert done.timed_out and done.returncode is None
    assert time.monotonic() - started < 30


def test_running_set_ends_a_command_another_thread_waits_for():
    running = bounded.Running()
    finished: list[bounded.Finished] = []
    waiter = threading.Thread(target=lambda: finished.append(
        bounded.run(["sleep", "60"], timeout=120, running=running)))
    waiter.start()
    deadline = time.monotonic() + 30
    while not running and time.monotonic() < deadline:
        time.sleep(0.01)
    running.kill_all()
    waiter.join(30)
    assert finished and finished[0].returncode == 128 + 9
    assert len(running) == 0
