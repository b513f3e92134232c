"""Probes: the commands that read a quota group's meter (configured in ``[quota.probes]``).

The contract (docs/quota.md): a probe runs with stdin closed, ``PRUN_QUOTA_GROUP=<group>`` in
its environment, in its own process group, and prints one JSON object on stdout:

    {"left": 0.42, "resets_at": "2026-11-30T21:00:00Z", "source": "what it read"}

``left`` is the fraction left (0..1), or give ``remaining`` and ``limit`` (counts); the reset is
``resets_at`` (ISO 8601) or ``resets_in`` (seconds from now); ``{"error": "..."}`` says it could
not read the meter. Exit 0. Anything else (non-zero exit, no JSON object, wrong types, a value
out of range, silence past the timeout, more than ``MAX_OUTPUT`` bytes) is a failed reading:
the group becomes unknown with the error recorded, never empty. A probe past its timeout is
killed with its whole process group.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence

from .._util.process import Worker
from .snapshot import GroupState, iso, normalise_time, parse_time

MAX_OUTPUT = 256 * 1024


def run_all(probes: Mapping[str, Sequence[str]], timeout_s: float,
            env: Mapping[str, str]) -> list[GroupState]:
    """Run the probes side by side; one reading per group, in about ``timeout_s`` at most.

    If this thread is interrupted (the dispatcher's cancel signal), every probe still running
    is killed with its process group before the exception goes on.
    """
    readings: dict[str, GroupState] = {}
    running = _Running()
    threads = []
    for group, argv in probes.items():
        def work(group=group, argv=argv) -> None:
            readings[group] = run_probe(group, argv, timeout_s, env, running)

        t = threading.Thread(target=work, name=f"prun-probe-{group}", daemon=True)
        t.start()
        threads.append(t)
    try:
        for t in threads:
            t.join(timeout_s + 10)  # run_probe bounds itself; this only guards against a bug
    except BaseException:
        running.kill_all()
        raise
    return [readings.get(g) or GroupState(g, read_at=iso(), source="probe",
                                          error="probe did not finish") for g in probes]


class _Running:
    """The probes' process groups not yet ended, so an interrupted caller can end them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.workers: dict[int, Worker] = {}

    def add(self, worker: Worker) -> None:
        with self.lock:
            self.workers[worker.pid] = worker

    def end(self, worker: Worker) -> None:
        """Kill the group (still unreaped, so its id is not reused) and forget it."""
        with self.lock:
            self.workers.pop(worker.pid, None)
            worker.signal(signal.SIGKILL)

    def kill_all(self) -> None:
        with self.lock:
            for worker in self.workers.values():
                worker.signal(signal.SIGKILL)


def run_probe(group: str, argv: Sequence[str], timeout_s: float,
              env: Mapping[str, str], running: _Running | None = None) -> GroupState:
    """Run one probe and turn what it printed into a reading. Never raises."""
    child_env = dict(env)
    child_env["PRUN_QUOTA_GROUP"] = group
    try:
        out, err, code, failure = _run(list(argv), timeout_s, child_env, running or _Running())
    except Exception as e:  # a probe must never break the caller
        out, err, code, failure = b"", b"", None, f"probe could not run: {e}"
    read_at = iso()
    if failure is None and code != 0:
        failure = f"probe exited {code}" + _first_line(err)
    if failure is None:
        try:
            left, resets_at, source = parse_output(group, out)
        except ValueError as e:
            failure = f"probe output: {e}"
    if failure is not None:
        return GroupState(group, read_at=read_at, source="probe", error=failure[:500])
    return GroupState(group, left, resets_at, read_at, source)


def parse_output(group: str, out: bytes) -> tuple[float, str | None, str]:
    """(left, resets_at, source) from a probe's stdout; ValueError when it breaks the contract."""
    text = out.decode("utf-8", "replace").strip()
    if not text:
        raise ValueError("printed nothing")
    try:
        obj = json.loads(text)
    except ValueError:
        last = text.splitlines()[-1].strip()
        try:
            obj = json.loads(last)
        except ValueError:
            raise ValueError("not a JSON object: " + _clip(last))
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object: " + _clip(text))
    named = obj.get("group")
    if named is not None and named != group:
        raise ValueError(f"reports group {named!r}, configured for {group!r}")
    if obj.get("error"):
        raise ValueError("reported error: " + _clip(str(obj["error"])))
    left = obj.get("left")
    if left is None and ("remaining" in obj or "limit" in obj):
        remaining, limit = _number(obj, "remaining"), _number(obj, "limit")
        if limit <= 0 or remaining < 0:
            raise ValueError(f"remaining={remaining} limit={limit} do not make a fraction")
        left = min(1.0, remaining / limit)
    elif left is None:
        raise ValueError("no left (or remaining and limit)")
    else:
        left = _number(obj, "left")
        if not 0 <= left <= 1:
            raise ValueError(f"left={left} is outside 0..1")
    resets_at = None
    if obj.get("resets_at") is not None:
        raw = obj["resets_at"]
        resets_at = normalise_time(raw) if isinstance(raw, str) else None
        if resets_at is None:
            raise ValueError(f"resets_at={raw!r} is not an ISO 8601 time")
    elif obj.get("resets_in") is not None:
        seconds = _number(obj, "resets_in")
        if seconds < 0:
            raise ValueError(f"resets_in={seconds} is negative")
        resets_at = iso(time.time() + seconds)
    if resets_at is not None:
        parse_time(resets_at)
    source = obj.get("source")
    source = f"probe:{_clip(source, 80)}" if isinstance(source, str) and source.strip() else "probe"
    return float(left), resets_at, source


def _number(obj: dict, key: str) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{key}={value!r} is not a number")
    return float(value)


def _clip(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _first_line(err: bytes) -> str:
    lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    return f": {_clip(lines[-1])}" if lines else ""


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    except OSError:
        return None


def _run(argv: list[str], timeout_s: float, env: dict[str, str],
         running: _Running) -> tuple[bytes, bytes, int | None, str | None]:
    """Run ``argv`` in a new process group; read at most MAX_OUTPUT bytes of each stream.

    Returns (stdout, stderr, exit code, failure). Past ``timeout_s`` (or the output cap) the
    group is killed and the failure says why; every wait here is bounded.
    """
    import selectors

    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True,
                                close_fds=True)
    except OSError as e:
        return b"", b"", None, f"probe could not start: {e.strerror or e}"
    # The leader is waited on without being reaped, so its group id cannot be reused while
    # the group is signalled; the group was created for this probe alone and is always ended.
    worker = Worker(proc, _pidfd(proc.pid))
    running.add(worker)
    deadline = time.monotonic() + timeout_s
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    failure = None
    code = None
    try:
        with selectors.DefaultSelector() as sel:
            for pipe in bufs:
                sel.register(pipe, selectors.EVENT_READ)
            while sel.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    failure = f"probe timed out after {timeout_s:g}s (its process group was killed)"
                    break
                for key, _ in sel.select(remaining):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    bufs[key.fileobj] += chunk
                    if len(bufs[key.fileobj]) > MAX_OUTPUT:
                        failure = f"probe printed more than {MAX_OUTPUT} bytes"
                if failure:
                    break
        if failure is None and not worker.wait_exit(max(0.0, deadline - time.monotonic())):
            failure = f"probe timed out after {timeout_s:g}s (its process group was killed)"
    finally:
        running.end(worker)
        if worker.wait_exit(5.0):
            code = worker.reap()
        else:
            worker.close()
        for pipe in bufs:
            pipe.close()
    return bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), code, failure
