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
import threading
import time
from collections.abc import Mapping, Sequence

from .._util import bounded
from .snapshot import GroupState, iso, normalise_time, parse_time

MAX_OUTPUT = 256 * 1024


def run_all(probes: Mapping[str, Sequence[str]], timeout_s: float,
            env: Mapping[str, str]) -> list[GroupState]:
    """Run the probes side by side; one reading per group, in about ``timeout_s`` at most.

    If this thread is interrupted (the dispatcher's cancel signal), every probe still running
    is killed with its process group before the exception goes on.
    """
    readings: dict[str, GroupState] = {}
    running = bounded.Running()
    threads = []
    for group, argv in probes.items():
        def work(group: str = group, argv: Sequence[str] = argv) -> None:
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


def run_probe(group: str, argv: Sequence[str], timeout_s: float,
              env: Mapping[str, str], running: bounded.Running | None = None) -> GroupState:
    """Run one probe (``bounded.run``: its own process group, stdin closed, at most
    ``MAX_OUTPUT`` bytes of each stream) and turn what it printed into a reading. Never
    raises."""
    try:
        done = bounded.run(list(argv), timeout=timeout_s,
                           env={**env, "PRUN_QUOTA_GROUP": group}, limit=MAX_OUTPUT,
                           grace=0.0, running=running)
    except OSError as e:
        return _failed(group, f"probe could not start: {e.strerror or e}")
    except Exception as e:  # a probe must never break the caller
        return _failed(group, f"probe could not run: {e}")
    if done.timed_out:
        return _failed(group, f"probe timed out after {timeout_s:g}s (its process group was "
                       "killed)")
    if done.over_limit:
        return _failed(group, f"probe printed more than {MAX_OUTPUT} bytes")
    if done.returncode != 0:
        return _failed(group, f"probe exited {done.returncode}" + _first_line(done.stderr))
    try:
        left, resets_at, source = parse_output(group, done.stdout)
    except ValueError as e:
        return _failed(group, f"probe output: {e}")
    return GroupState(group, left, resets_at, iso(), source)


def _failed(group: str, failure: str) -> GroupState:
    return GroupState(group, read_at=iso(), source="probe", error=failure[:500])


def parse_output(group: str, out: bytes) -> tuple[float, str | None, str]:
    """(left, resets_at, source) from a probe's stdout; ValueError when it breaks the contract."""
    obj = _json_object(out.decode("utf-8", "replace").strip())
    named = obj.get("group")
    if named is not None and named != group:
        raise ValueError(f"reports group {named!r}, configured for {group!r}")
    if obj.get("error"):
        raise ValueError("reported error: " + _clip(str(obj["error"])))
    left = _left(obj)
    resets_at = _resets_at(obj)
    source = obj.get("source")
    source = f"probe:{_clip(source, 80)}" if isinstance(source, str) and source.strip() else "probe"
    return left, resets_at, source


def _json_object(text: str) -> dict[str, object]:
    """The JSON object the probe printed: all of its output, or else its last line."""
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
    return obj


def _left(obj: dict[str, object]) -> float:
    """The fraction left: ``left``, or ``remaining`` over ``limit``."""
    if obj.get("left") is not None:
        left = _number(obj, "left")
        if not 0 <= left <= 1:
            raise ValueError(f"left={left} is outside 0..1")
        return left
    if "remaining" not in obj and "limit" not in obj:
        raise ValueError("no left (or remaining and limit)")
    remaining, limit = _number(obj, "remaining"), _number(obj, "limit")
    if limit <= 0 or remaining < 0:
        raise ValueError(f"remaining={remaining} limit={limit} do not make a fraction")
    return min(1.0, remaining / limit)


def _resets_at(obj: dict[str, object]) -> str | None:
    """When the group resets: ``resets_at`` (an ISO time), or ``resets_in`` seconds from now."""
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
    else:
        return None
    parse_time(resets_at)
    return resets_at


def _number(obj: dict[str, object], key: str) -> float:
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
