"""Running one ``prun`` child for a tool: bounded, its stdout read line by line as it comes,
and its process group ended if the bound passes or the call is cancelled.

A child runs in a session of its own, so the group ended is exactly the one started here
(a detached supervisor it starts is in a session of its own too, and is never touched).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc

POSIX = os.name == "posix"
KILL_GRACE_S = 2.0
OUTPUT_MAX = 64 * 1024 * 1024   # bytes of stdout a child may print before it is ended
ERR_KEEP = 64 * 1024            # bytes of stderr kept: its end
# after the child has exited, how long its pipes may stay open (held by something it left)
EOF_GRACE_S = 2.0

LineFn = Callable[[str], Awaitable[None]]
BeatFn = Callable[[float], Awaitable[None]]


@dataclass
class Finished:
    """How a child ended: its exit code (None: still running, or ended by the bound)."""

    exit_code: int | None
    lines: list[str]
    stderr: str
    timed_out: bool = False
    stopped: bool = False  # ``stop`` was set before the child ended (it was ended then)
    over_limit: bool = False  # it printed more than OUTPUT_MAX and was ended


def prun_argv(*args: str) -> list[str]:
    """The argv of a prun command run by this interpreter."""
    return [sys.executable, "-m", "prun", *args]


def capture_argv(request: str) -> list[str]:
    """The argv of ``prun.cli.capture`` for a JSON request."""
    return [sys.executable, "-m", "prun.cli.capture", request]


def detached_argv(stderr_file: str, argv: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` through ``prun.mcp.detach``: in a session of its own, so it
    outlives the child that relays its stdout."""
    return [sys.executable, "-m", "prun.mcp.detach", stderr_file, "--", *argv]


def _env(extra: Mapping[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"  # lines reach the tool as they are printed
    env.update(extra or {})
    return env


async def _end(proc: anyio.abc.Process) -> None:
    """End the child's process group: SIGTERM, then SIGKILL after the grace. Only while the
    child has not been reaped, so its group id cannot have been reused."""
    if proc.returncode is not None:
        return
    with anyio.CancelScope(shield=True):
        try:
            if POSIX:
                os.killpg(proc.pid, signal.SIGTERM)
            else:
                proc.terminate()
        except ProcessLookupError:
            pass
        with anyio.move_on_after(KILL_GRACE_S):
            await proc.wait()
        if proc.returncode is None:
            try:
                if POSIX:
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            except ProcessLookupError:
                pass
            await proc.wait()


class _Overflow(Exception):
    """The child printed more than its limit."""


async def _read_lines(stream: AsyncIterable[bytes], lines: list[str],
                      on_line: LineFn | None, limit: int = OUTPUT_MAX) -> None:
    """Each line of ``stream`` into ``lines`` (and to ``on_line``) as it comes; past
    ``limit`` bytes in all, ``_Overflow``."""
    buf = bytearray()
    total = 0
    async for chunk in stream:
        total += len(chunk)
        if total > limit:
            raise _Overflow
        start = len(buf)
        buf += chunk
        if b"\n" not in chunk:
            continue
        done = buf.rindex(b"\n", start)
        for raw in bytes(buf[:done]).split(b"\n"):
            text = raw.decode("utf-8", "replace").rstrip("\r")
            lines.append(text)
            if on_line is not None:
                await on_line(text)
        del buf[:done + 1]
    if buf:
        text = bytes(buf).decode("utf-8", "replace")
        lines.append(text)
        if on_line is not None:
            await on_line(text)


async def run(argv: Sequence[str], *, cwd: str, bound: float, on_line: LineFn | None = None,
              on_beat: BeatFn | None = None, beat_every: float = 10.0,
              env: Mapping[str, str] | None = None,
              stop: anyio.Event | None = None, output_max: int = OUTPUT_MAX) -> Finished:
    """Run ``argv`` in ``cwd`` for at most ``bound`` seconds; past it, when ``stop`` is set,
    when it prints more than ``output_max`` bytes, or when the call is cancelled, the child's
    process group is ended.

    ``on_line`` hears each stdout line as it comes; ``on_beat`` the seconds elapsed, every
    ``beat_every`` seconds while the child runs.
    """
    proc = await anyio.open_process(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=_env(env), start_new_session=POSIX)
    lines: list[str] = []
    err = bytearray()
    over = False
    start = time.monotonic()
    code: int | None = None

    async def read_out() -> None:
        assert proc.stdout is not None
        await _read_lines(proc.stdout, lines, on_line, output_max)

    async def read_err() -> None:
        if proc.stderr is None:
            return
        async for chunk in proc.stderr:
            err.extend(chunk)
            del err[:-ERR_KEEP]

    async def beat() -> None:
        assert on_beat is not None
        while True:
            await anyio.sleep(beat_every)
            await on_beat(time.monotonic() - start)

    try:
        async with anyio.create_task_group() as outer:
            if on_beat is not None:
                outer.start_soon(beat)
            with anyio.move_on_after(bound) as scope:
                async with anyio.create_task_group() as inner:
                    read_done = anyio.Event()

                    async def readers() -> None:
                        nonlocal over
                        try:
                            async with anyio.create_task_group() as io:
                                io.start_soon(read_out)
                                io.start_soon(read_err)
                        except* _Overflow:
                            over = True
                            inner.cancel_scope.cancel()
                        read_done.set()

                    inner.start_soon(readers)
                    if stop is not None:
                        async def stopper() -> None:
                            assert stop is not None
                            await stop.wait()
                            inner.cancel_scope.cancel()

                        inner.start_soon(stopper)
                    code = await proc.wait()
                    with anyio.move_on_after(EOF_GRACE_S):
                        await read_done.wait()
                    inner.cancel_scope.cancel()
            outer.cancel_scope.cancel()
        timed_out = scope.cancelled_caught and not over
        stopped = not timed_out and not over and stop is not None and stop.is_set() \
            and proc.returncode is None
        ended = timed_out or stopped or over
        return Finished(None if ended else code, lines, bytes(err).decode("utf-8", "replace"),
                        timed_out=timed_out, stopped=stopped, over_limit=over)
    finally:
        await _end(proc)
        with anyio.CancelScope(shield=True):
            await proc.aclose()
