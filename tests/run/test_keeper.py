"""The worker keeper: starts a run's workers, reaps them, logs each exit code, outlives the
supervisor. Driven the way the supervisor drives it: spawns from threads, replies in a loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from runkit import poll

from prun.keeper import Keeper
from prun.process import end_group, same_process_alive


def _spawn(keeper: Keeper, tmp: Path, name: str, code: str, **kw):
    return keeper.spawn([sys.executable, "-c", textwrap.dedent(code)], cwd=str(tmp),
                        env=dict(os.environ, **kw.pop("env", {})),
                        stdout_path=str(tmp / f"{name}.out"), stderr_path=str(tmp / f"{name}.err"),
                        stdin_path=kw.pop("stdin", None), name=name, log=str(tmp / ".exit-codes"))


def _log(tmp: Path) -> dict[str, int]:
    path = tmp / ".exit-codes"
    return {n: int(c) for n, c in (ln.split() for ln in path.read_text().splitlines())} \
        if path.exists() else {}


def drive(body):
    """Run ``body(keeper, loop)`` (a coroutine function) with a started keeper; close after."""
    async def main():
        loop = asyncio.get_running_loop()
        keeper = Keeper(dict(os.environ))
        keeper.start(loop)
        try:
            return await body(keeper, loop)
        finally:
            keeper.close()
    return asyncio.run(main())


def test_codes_reach_the_supervisor_and_the_log(tmp_path):
    async def body(keeper, loop):
        ok, bad = await asyncio.gather(
            asyncio.to_thread(_spawn, keeper, tmp_path, "ok", "print('out', end='')"),
            asyncio.to_thread(_spawn, keeper, tmp_path, "bad",
                              "import os, sys; print(os.getcwd(), file=sys.stderr); "
                              "raise SystemExit(3)"))
        await ok.await_exit()
        await bad.await_exit()
        return ok.reap(), bad.reap(), ok.create_time
    ok, bad, started = drive(body)
    assert (ok, bad) == (0, 3)
    assert started and started > 0
    assert _log(tmp_path) == {"ok": 0, "bad": 3}
    assert (tmp_path / "ok.out").read_text() == "out"
    assert (tmp_path / "bad.err").read_text().strip() == str(tmp_path)  # the requested cwd


def test_environment_changes_and_stdin_reach_the_worker(tmp_path):
    (tmp_path / "in").write_text("from stdin")
    os.environ["PRUN_TEST_GONE"] = "1"
    try:
        async def body(keeper, loop):
            env = dict(os.environ, PRUN_TEST_SET="yes")
            del env["PRUN_TEST_GONE"]
            w = await asyncio.to_thread(
                keeper.spawn, [sys.executable, "-c",
                               "import os, sys; print(os.environ.get('PRUN_TEST_SET'), "
                               "os.environ.get('PRUN_TEST_GONE'), sys.stdin.read())"],
                cwd=str(tmp_path), env=env, stdout_path=str(tmp_path / "o"),
                stderr_path=str(tmp_path / "e"), stdin_path=str(tmp_path / "in"), name="w",
                log=str(tmp_path / ".exit-codes"))
            await w.await_exit()
            return w.reap()
        assert drive(body) == 0
    finally:
        del os.environ["PRUN_TEST_GONE"]
    assert (tmp_path / "o").read_text().strip() == "yes None from stdin"


def test_worker_gets_default_signal_handling_and_signal_deaths_are_128_plus_n(tmp_path):
    # the keeper ignores SIGINT and SIGHUP; its workers must not inherit that
    async def body(keeper, loop):
        w = await asyncio.to_thread(_spawn, keeper, tmp_path, "int",
                                    "import os, signal; os.kill(os.getpid(), signal.SIGINT)\n"
                                    "import time; time.sleep(30)")
        await w.await_exit()
        return w.reap()
    assert drive(body) == 128 + signal.SIGINT
    assert _log(tmp_path) == {"int": 128 + signal.SIGINT}


def test_end_group_through_the_keeper_ends_the_worker_and_its_descendants(tmp_path):
    code = """
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
        time.sleep(60)
    """

    async def body(keeper, loop):
        w = await asyncio.to_thread(_spawn, keeper, tmp_path, "tree", code)
        child = int(await asyncio.to_thread(
            poll, lambda: (tmp_path / "tree.out").read_text().strip() or None))
        await asyncio.to_thread(end_group, w, 5)
        await w.await_exit()
        return w.reap(), child
    code_, child = drive(body)
    assert code_ == 128 + signal.SIGTERM
    poll(lambda: not same_process_alive(child, None))


def test_leader_that_exits_has_its_group_swept(tmp_path):
    code = """
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
    """

    async def body(keeper, loop):
        w = await asyncio.to_thread(_spawn, keeper, tmp_path, "left", code)
        await w.await_exit()
        return int((tmp_path / "left.out").read_text())
    child = drive(body)
    poll(lambda: not same_process_alive(child, None))


def test_spawn_failures_raise_oserror_with_the_reason(tmp_path):
    async def body(keeper, loop):
        errors = []
        for argv, cwd in (([str(tmp_path / "missing")], str(tmp_path)),
                          ([sys.executable, "-c", "pass"], str(tmp_path / "no-such-dir"))):
            with pytest.raises(OSError) as e:
                await asyncio.to_thread(
                    keeper.spawn, argv, cwd=cwd, env=dict(os.environ),
                    stdout_path=str(tmp_path / "o"), stderr_path=str(tmp_path / "e"),
                    stdin_path=None, name="x", log=str(tmp_path / ".exit-codes"))
            errors.append(e.value)
        # the keeper still works after failures
        w = await asyncio.to_thread(_spawn, keeper, tmp_path, "after", "pass")
        await w.await_exit()
        return errors, w.reap()
    errors, after = drive(body)
    assert all(isinstance(e, FileNotFoundError) for e in errors)
    assert after == 0


def test_keeper_outlives_its_supervisor_and_logs_codes_meanwhile(tmp_path):
    """The supervisor (here a child process) is killed with SIGKILL: the worker it started
    ends later and its exit code is still logged; then the keeper exits."""
    gate = tmp_path / "gate"
    script = textwrap.dedent(f"""
        import asyncio, os, sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_keeper import _spawn
        from prun.keeper import Keeper
        from pathlib import Path

        async def main():
            k = Keeper(dict(os.environ))
            k.start(asyncio.get_running_loop())
            await asyncio.to_thread(_spawn, k, Path({str(tmp_path)!r}), "late",
                "import pathlib, time\\n"
                "while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.02)\\n"
                "raise SystemExit(7)")
            print(k.proc.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
    """)
    sup = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    keeper_pid = int(sup.stdout.readline())
    sup.kill()
    sup.wait()
    assert same_process_alive(keeper_pid, None)
    gate.touch()
    poll(lambda: _log(tmp_path).get("late") == 7)
    poll(lambda: not same_process_alive(keeper_pid, None))   # no workers left: it is gone


def test_a_dead_keeper_leaves_its_workers_watched_and_a_new_keeper_starts(tmp_path, capfd):
    gate = tmp_path / "gate"

    async def body(keeper, loop):
        w = await asyncio.to_thread(
            _spawn, keeper, tmp_path, "orphan",
            f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists(): "
            "time.sleep(0.02)")
        first = keeper.proc.pid
        os.kill(first, signal.SIGKILL)
        await asyncio.to_thread(poll, lambda: keeper.ident["pid"] != first or None)
        gate.touch()
        await w.await_exit()
        after = await asyncio.to_thread(_spawn, keeper, tmp_path, "after", "pass")
        await after.await_exit()
        return w.reap(), w.orphan, after.reap()
    lost, orphan, after = drive(body)
    assert (lost, orphan, after) == (None, True, 0)
    assert "worker keeper" in capfd.readouterr().err


def test_a_bad_request_is_answered_and_the_keeper_keeps_serving(tmp_path):
    async def body(keeper, loop):
        with keeper._lock:           # a request missing its fields, as a bug would send
            keeper._next += 1
            rid = keeper._next
            pending = keeper._pending[rid] = concurrent.futures.Future()
            keeper._send({"op": "spawn", "id": rid})
        with pytest.raises(OSError, match="bad request"):
            await asyncio.wrap_future(pending)
        w = await asyncio.to_thread(_spawn, keeper, tmp_path, "after", "pass")
        await w.await_exit()
        return w.reap()
    assert drive(body) == 0
