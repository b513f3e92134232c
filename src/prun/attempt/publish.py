"""Publishing a unit's result: atomically, at its result path, never over another file.

The worker's own result (copied from its outbox in a run) wins; else the final response (a
command's whole stdout, copied); else a FALLBACK text saying why, with what the state dir
captured. The final response lands beside a worker-written result as
``<result>.response.<ext>``.

A command's stdout is never read into memory: it is copied file to file (``publish_copy``, a
MiB at a time), and its size without the whitespace around it (``response_size``) is found by
reading its ends, so a 50 MB response costs what an agent's 50 MB stream does.

What the worker left is read as untrusted (``fsutil.open_regular``): a result (or a command's
stdout) that is not a regular file (a link, a FIFO, a folder) fails the attempt as
``result-not-a-file``, and one larger than ``RESULT_LIMIT`` as ``result-too-large``; either is
left where the worker put it, unread, and the FALLBACK naming it is published instead. A copy
keeps a sparse file's holes: publishing never writes more than the worker's data.
"""

from __future__ import annotations

import os

from . import statedir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .._util.fsutil import UnsafeFile
    from ..executors.records import StreamResult
    from .core import Dispatch

MIN_RESPONSE_BYTES = 20
TAIL_LINES = 60
RESULT_LIMIT = 64 << 20   # the largest result prun publishes (docs/dispatch.md)
SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"   # what ``str.strip`` takes off, in ASCII
SCAN_BYTES = 1 << 16      # a command's stdout is read this much at a time from each end


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
            stream: StreamResult) -> tuple[str | None, str | None, str, str | None]:
    """Publish the unit's result at its result path, atomically and never over another
    file: the worker's own result (copied from its outbox in a run), else the final
    response (a command's whole stdout, copied), else a FALLBACK saying why. A published
    result is a copy: nothing the worker left behind can still write it. A result that is
    not a regular file or is over ``RESULT_LIMIT`` is refused (its FALLBACK published).
    Returns (published: worker|response|fallback|None, the response's sibling, verdict,
    error). ``OSError``: the result path could not be written (a full disk)."""
    from .._util.fsutil import UnsafeFile

    try:
        return _publish(d, verdict, error, exit_code, stream)
    except UnsafeFile as e:
        verdict, error = refused(e)
        return refuse(d, verdict, error, exit_code, stream), None, verdict, error


def refused(e: UnsafeFile) -> tuple[str, str]:
    """The verdict and error of a result that was refused unread."""
    what = "result-too-large" if e.too_large else "result-not-a-file"
    return what, (f"its result {e.filename} is {e.what}: left there unread, not published"
                  + (f" (prun publishes at most {RESULT_LIMIT} bytes)" if e.too_large else ""))


def refuse(d: Dispatch, verdict: str, error: str, exit_code: int | None,
           stream: StreamResult) -> str | None:
    """The FALLBACK of a refused result: at the result path when it is free, else kept in
    the state dir (the worker's own file is at the result path: it stays, unread)."""
    from .._util.fsutil import publish_new

    text = fallback_text(d, verdict, error, exit_code, stream)
    if not os.path.lexists(d.p.result_file) and publish_new(d.p.result_file, text,
                                                             durable=d.durable):
        return "fallback"
    keep_fallback(d, verdict, error, exit_code, stream)
    return None


def _publish(d: Dispatch, verdict: str, error: str | None, exit_code: int | None,
             stream: StreamResult) -> tuple[str | None, str | None, str, str | None]:
    from .._util.fsutil import atomic_write, publish_copy, publish_new, regular_size

    dest, durable = d.p.result_file, d.durable
    if regular_size(d.write_path, RESULT_LIMIT) > 0:     # the worker wrote its own result
        if d.write_path != dest:
            publish_copy(d.write_path, dest, durable=durable, limit=RESULT_LIMIT)
        return "worker", _beside_or_none(d, stream), verdict, error
    size = response_size(stream)
    if verdict == "ok" and size < MIN_RESPONSE_BYTES:
        verdict = "short-response"
        error = f"final response is {size} bytes (fewer than {MIN_RESPONSE_BYTES})"
    kind = "response" if verdict == "ok" else "fallback"
    left = regular_size(dest, RESULT_LIMIT)   # what the worker may have left there
    if left > 0:                           # the worker wrote it at the last moment
        return "worker", beside(d, stream), verdict, error
    if verdict == "ok" and stream.response is None and stream.response_file:
        done = publish_copy(stream.response_file, dest, durable=durable, limit=RESULT_LIMIT)
    else:
        out = stream.response if verdict == "ok" else fallback_text(d, verdict, error,
                                                                      exit_code, stream)
        if os.path.lexists(dest):            # the worker left an empty file: replace it
            atomic_write(dest, out or "", durable=durable)
            done = True
        else:
            done = publish_new(dest, out or "", durable=durable)
    if not done:                           # the worker wrote it at the last moment
        return "worker", beside(d, stream), verdict, error
    return kind, None, verdict, error


def response_size(stream: StreamResult) -> int:
    """The final response's size in bytes without the whitespace around it: the stream's,
    else the file's that holds it (a command's stdout), found from its ends without reading
    it whole; 0 when it is missing. ``UnsafeFile`` when that file is not a regular file or is
    over ``RESULT_LIMIT``."""
    from .._util.fsutil import open_regular

    if stream.response is not None or not stream.response_file:
        return len((stream.response or "").strip().encode())
    try:
        fd = open_regular(stream.response_file, RESULT_LIMIT)
    except FileNotFoundError:
        return 0
    try:
        return _stripped_size(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def _stripped_size(fd: int, size: int) -> int:
    """The bytes of ``fd`` (``size`` long) from its first to its last one that is not
    ``SPACE``, read ``SCAN_BYTES`` at a time from each end (0 when there is none)."""
    start = 0
    while True:
        chunk = os.pread(fd, min(SCAN_BYTES, size - start), start) if start < size else b""
        if not chunk:
            return 0        # whitespace only
        kept = chunk.lstrip(SPACE)
        if kept:
            start += len(chunk) - len(kept)
            break
        start += len(chunk)
    end = size
    while end > start:
        n = min(SCAN_BYTES, end - start)
        kept = os.pread(fd, n, end - n).rstrip(SPACE)
        if kept:
            return end - n + len(kept) - start
        end -= n
    return 0


def _beside_or_none(d: Dispatch, stream: StreamResult) -> str | None:
    """The final response beside the worker's own result; none when the response is refused
    (not a regular file, too large: the result is the worker's, and it stands)."""
    from .._util.fsutil import UnsafeFile

    try:
        return beside(d, stream)
    except UnsafeFile:
        return None


def keep_fallback(d: Dispatch, verdict: str, error: str, exit_code: int | None,
                  stream: StreamResult) -> str | None:
    """The FALLBACK written where any byte can still be written: the state dir's
    ``fallback.md``, else stderr. Returns ``fallback`` when it was kept in the state dir."""
    import sys

    text = fallback_text(d, verdict, error, exit_code, stream)
    try:
        d.state.write(statedir.FALLBACK, text)
        return "fallback"
    except OSError:
        try:
            sys.stderr.write(text)
        except OSError:
            pass
        return None


def beside(d: Dispatch, stream: StreamResult) -> str | None:
    """Keep the worker's own result; the final response goes beside it, when it holds more
    than whitespace (a command's stdout copied, never read whole). ``UnsafeFile``: that
    stdout is not a regular file or is over ``RESULT_LIMIT``."""
    from .._util.fsutil import publish_copy, publish_new

    if response_size(stream) == 0:
        return None
    path = sibling_path(d.p.result_file)
    if stream.response is None and stream.response_file:
        publish_copy(stream.response_file, path, durable=d.durable, limit=RESULT_LIMIT)
    else:
        publish_new(path, stream.response or "", durable=d.durable)
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
