"""The worker keeper: starts a run's workers, reaps them, logs each exit code, outlives the
supervisor. Driven the way the supervisor drives it: spawns awaited in its event loop, which
reads the replies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prun._util.process import end_group, same_process_alive
from prun.run.keeper import Keeper
from runkit import poll


async def _spawn(keeper: Keeper, tmp: Path, name: str, code: str, **kw):
    return await keeper.spawn_async(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=str(tmp),
        env=dict(os.environ, **kw.pop("env", {})), stdout_path=str(tmp / f"{name}.out"),
        stderr_path=str(tmp / f"{name}.err"), stdin_path=kw.pop("stdin", None), name=name,
        log=str(tmp / ".exit-codes"))


def _log(tmp: Path) -> dict[str, int]:
    """The exit codes the log records (its ``spawned`` lines aside)."""
    path = tmp / ".exit-codes"
    lines = path.read_text().splitlines() if path.exists() else []
    return {n: int(c) for n, c in (ln.split() for ln in lines if " spawned " not in ln)}


def test_the_keeper_logs_each_start_and_refuses_a_second_launch_of_an_attempt(tmp_path):
    args = dict(cwd=str(tmp_path), env={**os.environ, "PRUN_ATTEMPT_ID": "r:a:1"},
                stdout_path=str(tmp_path / "out"), stderr_path=str(tmp_path / "err"),
                stdin_path=None, name="a-state", log=str(tmp_path / ".exit-codes"))

    async def body(keeper, loop):
        w = await keeper.spawn_async([sys.executable, "-c", "pass"], **args)
        assert f"a-state spawned {w.pid} " in (tmp_path / ".exit-codes").read_text()
        with pytest.raises(OSError, match="launched already"):
            await keeper.spawn_async([sys.executable, "-c", "pass"], **args)
        await w.await_exit()

    drive(body)


def test_a_spawn_awaited_in_the_event_loop_blocks_no_thread(tmp_path):
    """Spawns awaited together in the loop: each gets its own answer; a failed one raises."""
    args = dict(cwd=str(tmp_path), env=dict(os.environ), stdout_path=str(tmp_path / "out"),
                stderr_path=str(tmp_path / "err"), stdin_path=None, name="b-state",
                log=str(tmp_path / ".exit-codes"))

    async def body(keeper, loop):
        workers = await asyncio.gather(*(
            keeper.spawn_async([sys.executable, "-c", f"print({i})"],
                               **dict(args, name=f"s{i}")) for i in range(3)))
        assert len({w.pid for w in workers}) == 3
        for w in workers:
            await w.await_exit()
        assert [w.reap() for w in workers] == [0, 0, 0]
        with pytest.raises(OSError, match="No such file"):
            await keeper.spawn_async([str(tmp_path / "missing")], **args)

    drive(body)
    assert set(_log(tmp_path)) == {"s0", "s1", "s2"}


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
            _spawn(keeper, tmp_path, "ok", "print('out', end='')"),
            _spawn(keeper, tmp_path, "bad",
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
            w = await keeper.spawn_async([sys.executable, "-c",
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
        w = await _spawn(keeper, tmp_path, "int",
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
        w = await _spawn(keeper, tmp_path, "tree", code)
        child = int(await asyncio.to_thread(
            poll, lambda: (tmp_path / "tree.out").read_text().strip() or None))
        await asyncio.to_thread(end_group, w, 5)
        await w.await_exit()
        return w.reap(), child
    code_, child = drive(body)
    assert code_ == 128 + signal.SIGTERM
    poll(lambda: not same_process_alive(child, None, unproven=True))


def test_leader_that_exits_has_its_group_swept(tmp_path):
    code = """
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(child.pid, flush=True)
    """

    async def body(keeper, loop):
        w = await _spawn(keeper, tmp_path, "left", code)
        await w.await_exit()
        return int((tmp_path / "left.out").read_text())
    child = drive(body)
    poll(lambda: not same_process_alive(child, None, unproven=True))


def test_spawn_failures_raise_oserror_with_the_reason(tmp_path):
    async def body(keeper, loop):
        errors = []
        for argv, cwd in (([str(tmp_path / "missing")], str(tmp_path)),
                          ([sys.executable, "-c", "pass"], str(tmp_path / "no-such-dir"))):
            with pytest.raises(OSError) as e:
                await keeper.spawn_async(argv, cwd=cwd, env=dict(os.environ),
                    stdout_path=str(tmp_path / "o"), stderr_path=str(tmp_path / "e"),
                    stdin_path=None, name="x", log=str(tmp_path / ".exit-codes"))
            errors.append(e.value)
        # the keeper still works after failures
        w = await _spawn(keeper, tmp_path, "after", "pass")
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
        sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1])!r}]
        from test_keeper import _spawn
        from prun.run.keeper import Keeper
        from pathlib import Path

        async def main():
            k = Keeper(dict(os.environ))
            k.start(asyncio.get_running_loop())
            await _spawn(k, Path({str(tmp_path)!r}), "late",
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
    assert same_process_alive(keeper_pid, None, unproven=True)
    gate.touch()
    poll(lambda: _log(tmp_path).get("late") == 7)
    poll(lambda: not same_process_alive(keeper_pid, None, unproven=True))   # no workers left: it is gone


def test_a_dead_keeper_leaves_its_workers_watched_and_a_new_keeper_starts(tmp_path, capfd):
    gate = tmp_path / "gate"

    async def body(keeper, loop):
        w = await _spawn(keeper, tmp_path, "orphan",
            f"import pathlib, time\nwhile not pathlib.Path({str(gate)!r}).exists(): "
            "time.sleep(0.02)")
        first = keeper.proc.pid
        os.kill(first, signal.SIGKILL)
        await asyncio.to_thread(poll, lambda: keeper.ident["pid"] != first or None)
        gate.touch()
        await w.await_exit()
        after = await _spawn(keeper, tmp_path, "after", "pass")
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
            pending = keeper._pending[rid] = loop.create_future()
            keeper._send({"op": "spawn", "id": rid})
        with pytest.raises(OSError, match="bad request"):
            await pending
        w = await _spawn(keeper, tmp_path, "after", "pass")
        await w.await_exit()
        return w.reap()
    assert drive(body) == 0


# Escapes: processes that left a worker's group, reparented to the keeper (its subreaper) -----

needs_subreaper = pytest.mark.skipif(sys.platform != "linux",
                                     reason="a subreaper is Linux's PR_SET_CHILD_SUBREAPER")


def daemon_code(ignore_term: bool = False) -> str:
    """A daemon that appends to a file every 20 ms until it is killed (or, should a test fail,
    for two minutes)."""
    return ("import signal, sys, time\n"
            + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_term else "")
            + "f, end = open(sys.argv[1], 'a'), time.monotonic() + 120\n"
            "while time.monotonic() < end:\n    f.write('x'); f.flush(); time.sleep(0.02)\n")


def worker_code(tick: Path, how: str, ignore_term: bool = False, gate: Path | None = None) -> str:
    """A worker that starts a daemon outside its group (``how``), prints the daemon's pid once
    it writes, and exits (after ``gate`` exists, when given)."""
    daemon = daemon_code(ignore_term)
    return textwrap.dedent(f"""
        import os, pathlib, subprocess, sys, time
        tick = pathlib.Path({str(tick)!r})
        if {how!r} == "setsid":
            pid = subprocess.Popen(["setsid", sys.executable, "-c", {daemon!r}, str(tick)]).pid
        elif {how!r} == "setpgid":             # a group of its own, no environment at all
            pid = subprocess.Popen([sys.executable, "-c", {daemon!r}, str(tick)], env={{}},
                                   process_group=0).pid
        else:                                  # fork, setsid, fork; no environment at all
            r, w = os.pipe()
            if os.fork() == 0:
                os.setsid()
                pid = os.fork()
                if pid == 0:
                    os.execve(sys.executable, [sys.executable, "-c", {daemon!r}, str(tick)], {{}})
                os.write(w, str(pid).encode())
                os._exit(0)
            os.close(w)
            pid = int(os.read(r, 100))
        while not (tick.exists() and tick.stat().st_size):
            time.sleep(0.01)
        print(pid, flush=True)
        gate = {str(gate) if gate else None!r}
        while gate and not os.path.exists(gate):
            time.sleep(0.01)
    """)


def gone(pid: int) -> bool:
    return not same_process_alive(pid, None, unproven=True)


@needs_subreaper
@pytest.mark.parametrize("ignore_term", [False, True], ids=["ends-on-sigterm", "ignores-sigterm"])
def test_a_setsid_daemon_is_ended_when_its_worker_exits_and_reported(tmp_path, ignore_term):
    tick = tmp_path / "tick"

    async def body(keeper, loop):
        w = await _spawn(keeper, tmp_path, "w",
                                    worker_code(tick, "setsid", ignore_term),
                                    env={"PRUN_ATTEMPT_ID": "attempt-1"})
        await w.await_exit()
        daemon = int((tmp_path / "w.out").read_text())
        return w.reap(), w.escaped, daemon, gone(daemon), tick.stat().st_size
    code, escaped, daemon, gone_at_exit, size = drive(body)
    assert code == 0
    assert gone_at_exit             # the exit line came only after the daemon was reaped
    assert [e["pid"] for e in escaped] == [daemon]
    assert escaped[0]["cmdline"][:2] == [sys.executable, "-c"]
    assert tick.stat().st_size == size         # nothing writes any more
    assert _log(tmp_path) == {"w": 0}


@needs_subreaper
def test_a_double_forked_daemon_is_ended_once_no_worker_it_may_come_from_runs(tmp_path):
    """No environment, a session of its own: it is tied to the workers running when it appeared,
    and ended when the last of them has ended, never while one may still need it."""
    tick, gate = tmp_path / "tick", tmp_path / "gate"

    async def body(keeper, loop):
        other = await _spawn(keeper, tmp_path, "other",
                                        worker_code(tmp_path / "other-tick", "setsid",
                                                    gate=gate))
        await asyncio.to_thread(poll, lambda: (tmp_path / "other.out").read_text())
        w = await _spawn(keeper, tmp_path, "w", worker_code(tick, "fork"))
        await w.await_exit()
        daemon = int((tmp_path / "w.out").read_text())
        alive_after_first = not gone(daemon)
        gate.touch()
        await other.await_exit()
        return w.escaped, other.escaped, daemon, alive_after_first, gone(daemon)
    first, second, daemon, alive_after_first, gone_after_last = drive(body)
    assert alive_after_first and first == []
    assert gone_after_last
    assert daemon in [e["pid"] for e in second]


@needs_subreaper
def test_a_daemon_that_left_only_the_group_is_tied_to_its_worker_by_its_session(tmp_path):
    tick, gate = tmp_path / "tick", tmp_path / "gate"

    async def body(keeper, loop):
        other = await _spawn(keeper, tmp_path, "other",
                                        f"import os, time\nwhile not os.path.exists("
                                        f"{str(gate)!r}): time.sleep(0.01)")
        w = await _spawn(keeper, tmp_path, "w", worker_code(tick, "setpgid"))
        await w.await_exit()
        daemon = int((tmp_path / "w.out").read_text())
        result = w.escaped, daemon, gone(daemon)
        gate.touch()
        await other.await_exit()
        return result
    escaped, daemon, gone_at_exit = drive(body)
    assert [e["pid"] for e in escaped] == [daemon] and gone_at_exit


@needs_subreaper
def test_an_escape_below_an_escape_is_tied_to_the_same_worker(tmp_path):
    tick = tmp_path / "tick"
    inner = textwrap.dedent(f"""
        import os, subprocess, sys, time
        p = subprocess.Popen(["setsid", sys.executable, "-c", {daemon_code()!r},
                              {str(tmp_path / "inner-tick")!r}], env={{}})
        open({str(tmp_path / "inner.pid")!r}, "w").write(str(p.pid))
        f, end = open(sys.argv[1], "a"), time.monotonic() + 120
        while time.monotonic() < end:
            f.write("x"); f.flush(); time.sleep(0.02)
    """)
    code = textwrap.dedent(f"""
        import pathlib, subprocess, sys, time
        subprocess.Popen(["setsid", sys.executable, "-c", {inner!r}, {str(tick)!r}])
        ticks = [pathlib.Path({str(tick)!r}), pathlib.Path({str(tmp_path / "inner-tick")!r})]
        while not all(t.exists() for t in ticks):
            time.sleep(0.01)
    """)

    gate = tmp_path / "gate"

    async def body(keeper, loop):
        # another worker runs meanwhile: the inner daemon is tied by what the keeper saw
        # below the outer one, not to whichever workers were running
        other = await _spawn(keeper, tmp_path, "other",
                                        f"import os, time\nwhile not os.path.exists("
                                        f"{str(gate)!r}): time.sleep(0.01)")
        w = await _spawn(keeper, tmp_path, "w", code,
                                    env={"PRUN_ATTEMPT_ID": "attempt-2"})
        await w.await_exit()
        inner_pid = int((tmp_path / "inner.pid").read_text())
        result = w.escaped, inner_pid, gone(inner_pid), other.exited()
        gate.touch()
        await other.await_exit()
        return result
    escaped, inner_pid, inner_gone, other_done = drive(body)
    assert not other_done
    assert len(escaped) == 2 and escaped[1]["pid"] == inner_pid
    assert inner_gone and all(gone(e["pid"]) for e in escaped)


@needs_subreaper
def test_a_process_the_keeper_did_not_start_is_never_signalled(tmp_path):
    """An outsider with the worker's very attempt id, in a session of its own."""
    tick = tmp_path / "tick"
    outsider = subprocess.Popen([sys.executable, "-c", daemon_code(), str(tmp_path / "outside")],
                                env={**os.environ, "PRUN_ATTEMPT_ID": "attempt-3"},
                                start_new_session=True)
    try:
        async def body(keeper, loop):
            w = await _spawn(keeper, tmp_path, "w",
                                        worker_code(tick, "setsid"),
                                        env={"PRUN_ATTEMPT_ID": "attempt-3"})
            await w.await_exit()
            return w.escaped
        escaped = drive(body)
        assert len(escaped) == 1 and outsider.pid not in [e["pid"] for e in escaped]
        assert outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait()


@needs_subreaper
def test_the_keeper_serves_others_while_an_escape_has_its_grace(tmp_path, monkeypatch):
    monkeypatch.setenv("PRUN_KILL_GRACE_SECONDS", "60")   # the keeper reads it when it starts
    tick = tmp_path / "tick"

    async def body(keeper, loop):
        w = await _spawn(keeper, tmp_path, "w",
                                    worker_code(tick, "setsid", ignore_term=True),
                                    env={"PRUN_ATTEMPT_ID": "attempt-4"})
        daemon = int(await asyncio.to_thread(
            poll, lambda: (tmp_path / "w.out").read_text().strip()))
        await asyncio.to_thread(poll, lambda: w.escaped)     # reported, SIGTERM ignored
        later = await _spawn(keeper, tmp_path, "later", "pass")
        await later.await_exit()
        held = not w.exited()
        os.kill(daemon, signal.SIGKILL)                      # cut the grace short
        await w.await_exit()
        return later.reap(), held, w.reap()
    assert drive(body) == (0, True, 0)


# A standalone dispatcher: the same from its own process ----------------------------------------

@needs_subreaper
def test_a_standalone_dispatcher_ends_what_escaped_its_worker(tmp_path):
    tick = tmp_path / "tick"
    script = textwrap.dedent(f"""
        import json, os, subprocess, sys
        from prun._util.process import become_subreaper, end_escaped, spawn
        assert become_subreaper()
        own = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        w = spawn([sys.executable, "-c", {worker_code(tick, "fork")!r}], cwd={str(tmp_path)!r},
                  env=dict(os.environ), stdout_path={str(tmp_path / "w.out")!r},
                  stderr_path={str(tmp_path / "w.err")!r})
        w.wait_exit(60)
        w.sweep()
        code = w.reap()
        print(json.dumps({{"code": code, "escaped": end_escaped(w, 5), "own": own.poll()}}))
        own.kill()
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    daemon = int((tmp_path / "w.out").read_text())
    assert got["code"] == 0 and got["own"] is None     # its own child in its session: untouched
    assert [e["pid"] for e in got["escaped"]] == [daemon]
    assert gone(daemon)


def test_become_subreaper_says_whether_it_worked():
    p = subprocess.run([sys.executable, "-c", "from prun._util.process import become_subreaper; "
                        "print(become_subreaper())"], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == str(sys.platform == "linux")


def test_the_keeper_writes_the_opening_files_first_and_the_record_once_the_worker_runs(
        tmp_path):
    """A spawn's ``files`` and ``copies`` exist before its worker starts (it reads the copy
    on stdin), and its ``record`` is written with the worker in it before the supervisor
    hears of the start."""
    sd = tmp_path / "sd"
    sd.mkdir()
    brief = tmp_path / "brief.md"
    brief.write_text("the prompt\n")
    files = [(str(sd / "model"), "command\n")]
    record = (str(sd / "unit.json"), {"unit_id": "u", "argv": ["x"]})

    async def body(keeper, loop):
        w = await keeper.spawn_async(
            [sys.executable, "-c", "import sys; print(sys.stdin.read(), end='')"],
            cwd=str(tmp_path), env=dict(os.environ), stdout_path=str(sd / "tail"),
            stderr_path=str(sd / "stderr"), stdin_path=str(sd / "prompt"), name="sd",
            log=str(tmp_path / ".exit-codes"), files=files,
            copies=[(str(brief), str(sd / "prompt"))], record=record)
        unit = json.loads((sd / "unit.json").read_text())   # written before the answer
        await w.await_exit()
        return w, unit

    w, unit = drive(body)
    assert w.reap() == 0
    assert (sd / "tail").read_text() == "the prompt\n"
    assert not os.path.samefile(sd / "prompt", brief)   # a copy: damage to one spares the other
    assert (sd / "model").read_text() == "command\n"
    assert unit["unit_id"] == "u" and unit["argv"] == ["x"]
    worker = unit["worker"]
    assert worker["pid"] == worker["pgid"] == w.pid
    assert worker["create_time"] == w.create_time and worker["started_at"].endswith("Z")
    assert worker["keeper"]["pid"] != os.getpid() and worker["keeper"]["create_time"]


def test_a_spawn_that_fails_has_its_record_written_without_a_worker(tmp_path):
    sd = tmp_path / "sd"
    sd.mkdir()
    args = dict(cwd=str(tmp_path), env=dict(os.environ), stdout_path=str(sd / "tail"),
                stderr_path=str(sd / "stderr"), stdin_path=None, name="sd",
                log=str(tmp_path / ".exit-codes"))

    async def body(keeper, loop):
        with pytest.raises(OSError, match="No such file"):
            await keeper.spawn_async([str(tmp_path / "missing")], **args,
                                     files=[(str(sd / "model"), "m\n")],
                                     record=(str(sd / "unit.json"), {"unit_id": "u"}))
        # a file that cannot be written: nothing is started, the reason names it
        with pytest.raises(OSError, match="gone"):
            await keeper.spawn_async([sys.executable, "-c", "pass"], **args,
                                     files=[(str(tmp_path / "gone" / "model"), "m\n")],
                                     record=None)

    drive(body)
    assert json.loads((sd / "unit.json").read_text()) == {"unit_id": "u"}
    assert (sd / "model").read_text() == "m\n"
    assert " spawned " not in ((tmp_path / ".exit-codes").read_text()
                               if (tmp_path / ".exit-codes").exists() else "")
