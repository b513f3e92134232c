"""Publishing a unit's result: atomically, at its result path, never over another file.

The worker's own result (copied from its outbox in a run) wins; else the final response (a
command's whole stdout, copied); else a FALLBACK text saying why, with what the state dir
captured. The final response lands beside a worker-written result as
``<result>.response.<ext>``.
"""

from __future__ import annotations

import os

from . import statedir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..executors.records import StreamResult
    from .dispatch import Dispatch

MIN_RESPONSE_BYTES = 20
TAIL_LINES = 60


def sibling_path(result_file: str) -> str:
    """``notes.md`` -> ``notes.response.md``; ``notes`` -> ``notes.response``; never clobbers."""
    folder, name = os.path.split(result_file)
    stem, dot, ext = name.rpartition(".")
    base = f"{stem}.response.{ext}" if dot and stem else f"{name}.response"
    candidate = os.path.join(folder, base)
    n = 1
    while os.path.lexists(candidate):
        n += 1
        b = f"{stem}.response-{n}.{ext}" if dot and stem else f"{name}.response-{n}"
        candidate = os.path.join(folder, b)
    return candidate


def publish(d: Dispatch, verdict: str, error: str | None, exit_code: int | None,
            stream: StreamResult, response: str | None) -> tuple[str, str | None, str, str | None]:
    """Publish the unit's result at its result path, atomically and never over another
    file: the worker's own result (copied from its outbox in a run), else the final
    response (a command's whole stdout, copied), else a FALLBACK saying why. A published
    result is a copy: nothing the worker left behind can still write it.
    Returns (published: worker|response|fallback, the response's sibling, verdict, error)."""
    from .._util.fsutil import atomic_write, file_size, publish_copy, publish_new

    dest, durable = d.p.result_file, d.durable
    if file_size(d.write_path) > 0:     # the worker wrote its own result
        if d.write_path != dest:
            publish_copy(d.write_path, dest, durable=durable)
        return "worker", beside(d, response), verdict, error
    whole = stream.response_file if stream.response is None else None
    size = len((response or "").strip().encode())
    if verdict == "ok" and size < MIN_RESPONSE_BYTES:
        verdict = "short-response"
        error = f"final response is {size} bytes (fewer than {MIN_RESPONSE_BYTES})"
    kind = "response" if verdict == "ok" else "fallback"
    if file_size(dest) > 0:                # the worker wrote it at the last moment
        return "worker", beside(d, response), verdict, error
    if verdict == "ok" and whole:
        done = publish_copy(whole, dest, durable=durable)
    else:
        text = response if verdict == "ok" else fallback_text(d, verdict, error,
                                                                    exit_code, stream)
        if os.path.lexists(dest):            # the worker left an empty file: replace it
            atomic_write(dest, text or "", durable=durable)
            done = True
        else:
            done = publish_new(dest, text or "", durable=durable)
    if not done:                           # the worker wrote it at the last moment
        return "worker", beside(d, response), verdict, error
    return kind, None, verdict, error

def beside(d: Dispatch, response: str | None) -> str | None:
    """Keep the worker's own result; the final response goes beside it."""
    from .._util.fsutil import publish_new

    if not (response and response.strip()):
        return None
    path = sibling_path(d.p.result_file)
    publish_new(path, response, durable=d.durable)
    return path


def fallback_text(d: Dispatch, reason: str, error: str | None, exit_code: int | None,
                  stream: StreamResult) -> str:
    from .._util.fsutil import tail_bytes

    sd, p = d.state, d.p
    head = (f"FALLBACK reason={reason} unit={p.request.unit_id} executor={p.executor.name} "
            f"exit={'none' if exit_code is None else exit_code}")
    parts = [head, "", "The unit did not produce a usable result; this file was written by "
             "the dispatcher with what it captured.", "", "## Backend error", "",
             (error or "(none reported)").strip()]
    if stream.text.strip():
        parts += ["", "## Salvaged response text", "", stream.text[-16000:].strip()]
    for title, name in (("Stream tail", statedir.TAIL), ("Stderr tail", statedir.STDERR)):
        raw = tail_bytes(sd.file(name), 24000).decode("utf-8", "replace")
        lines = raw.splitlines()[-TAIL_LINES:]
        parts += ["", f"## {title} (last {len(lines)} lines of {sd.file(name)})", "",
                  "\n".join(lines) if lines else "(empty)"]
    return "\n".join(parts) + "\n"
