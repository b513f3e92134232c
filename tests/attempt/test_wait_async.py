"""The supervisor's wait (``waiting.wait_async``), in process: it ends at the worker's exit,
at a stop or at its deadline, and leaves no task of its own behind."""

from __future__ import annotations

import asyncio
import shlex
import sys
import time

import pytest

from prun.attempt.dispatch import (
    Dispatch,
    LocalLauncher,
    Request,
    admit,
    begin,
    prepare,
    wait_async,
)
from prun.attempt.dispatch import launch as start


@pytest.fixture
def launched(tmp_path):
    def launch(code: str) -> Dispatch:
        prompt = tmp_path / "prompt.md"
        prompt.write_text("wait for me\n")
        req = Request("command", str(prompt), str(tmp_path / f"result-{time.monotonic_ns()}.md"),
                      "w1", command=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
                      sandbox="off", timeout_s=60)
        d = Dispatch(prepare(req), LocalLauncher())
        begin(d)
        admit(d)
        assert start(d), d.launch_error
        return d
    return launch


def _wait(d: Dispatch, **kw) -> tuple[int | None, str | None, set]:
    async def main():
        got = await wait_async(d, **kw)
        return (*got, asyncio.all_tasks() - {asyncio.current_task()})
    return asyncio.run(main())


def test_it_ends_at_the_workers_exit(launched):
    d = launched("import sys; sys.exit(3)")
    code, why, left = _wait(d, stop=None)
    assert (code, why, left) == (3, None, set())


def test_it_ends_the_group_at_a_stop_and_says_why(launched):
    d = launched("import time; time.sleep(60)")
    ended = []

    async def main():
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, stop.set)
        got = await wait_async(d, stop, on_end=ended.append)
        return (*got, asyncio.all_tasks() - {asyncio.current_task()})

    started = time.monotonic()
    code, why, left = asyncio.run(main())
    assert why == "cancelled" and ended == ["cancelled"] and left == set()
    assert code == 128 + 15 and time.monotonic() - started < 30


def test_it_ends_the_group_at_the_hard_deadline(launched):
    d = launched("import time; time.sleep(60)")
    code, why, left = _wait(d, hard_deadline=time.time() + 0.3)
    assert why == "timeout" and code == 128 + 15 and left == set()


def test_a_deadline_already_past_ends_the_group_at_once(launched):
    d = launched("import time; time.sleep(60)")
    code, why, left = _wait(d, hard_deadline=time.time() - 1)
    assert why == "timeout" and code is not None and left == set()
