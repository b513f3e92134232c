"""Finishing an attempt: judge it (its exit code and its stream's final event, or why it
never ran), record a quota hit, publish its result or a FALLBACK (``publish``), and write
``outcome.json`` last: its presence means the attempt is over."""

from __future__ import annotations

import time

from ..errors import QuotaExhausted
from . import statedir
from .core import iso
from .publish import publish
from .waiting import pump, record_session

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..executors.records import StreamResult
    from .core import Dispatch
    from .outcome import Outcome


def finish(d: Dispatch, exit_code: int | None, *, timed_out: bool = False,
           cancelled: bool = False, refused: QuotaExhausted | None = None) -> Outcome:
    """Judge the run, publish the result (or FALLBACK), write outcome.json last."""
    from .._util.fsutil import read_text, tail_bytes

    p, sd = d.p, d.state
    stream = _final_stream(d)
    launch_error = getattr(d, "launch_error", None)
    if refused is not None:
        verdict, error = "quota", refused.line()
    elif launch_error:
        verdict, error = "launch-failed", launch_error
    elif timed_out:
        verdict = "timeout"
        error = f"no exit within the {int(d.settings.timeout_s)} s timeout; process group ended"
    elif cancelled:
        verdict, error = "cancelled", "the dispatcher was stopped; the worker's group was ended"
    else:
        j = p.executor.judge(exit_code if exit_code is not None else 1, stream)
        verdict, error = j.reason, j.error
        if j.ok:
            verdict, error = "ok", None
        elif p.resume_id and p.executor.resume_refused(
                exit_code or 0, stream, tail_bytes(sd.file(statedir.STDERR), 20000)
                .decode("utf-8", "replace")):
            verdict = "resume-refused"  # the run starts a fresh attempt instead
        elif d.launched_at and time.time() - d.launched_at >= d.settings.timeout_s:
            verdict = "timeout"  # the CLI's own bounded timeout stopped it
    response = stream.response
    if response is None and stream.response_file:
        response = read_text(stream.response_file, "")
    hit = None
    if verdict not in ("ok", "quota", "launch-failed"):
        stderr_tail = tail_bytes(sd.file(statedir.STDERR), 20000).decode("utf-8", "replace")
        hit = p.executor.quota_hit(stream, exit_code or 0, stderr_tail)
        if hit is not None:
            hit.group = hit.group or p.executor.quota_group(d.settings.model)
            from .. import quota

            quota.record_hit(hit, d.p.env)
    if verdict not in ("ok", "quota", "cancelled") and launch_error is None:
        from .. import quota

        quota.after_backend_failure(p.executor, d.p.env)
    published, sibling, verdict, error = publish(d, verdict, error, exit_code, stream,
                                                 response)
    from . import published as index

    landed = index.identity(p.result_file)
    d.outcome = _outcome(d, verdict, error, exit_code, published, sibling, stream, hit,
                         landed)
    sd.write_json(statedir.OUTCOME, d.outcome.to_json(), durable=d.durable)
    if landed is not None:  # waiters treat the result as landed from now on
        index.record(p.result_file, sd.path, outcome=sd.file(statedir.OUTCOME),
                     state_root=p.config.state_root)
    d._ledger("finish")
    return d.outcome


def _outcome(d: Dispatch, verdict: str, error: str | None, exit_code: int | None,
             published: str | None, sibling: str | None, stream: StreamResult, hit,
             landed: dict | None) -> Outcome:
    from ..ledger.statuses import OutcomeKind
    from .outcome import Outcome, Quota

    p = d.p
    kind = {"ok": OutcomeKind.SUCCEEDED, "timeout": OutcomeKind.TIMEOUT,
            "quota": OutcomeKind.QUOTA, "cancelled": OutcomeKind.CANCELLED,
            }.get(verdict, OutcomeKind.FAILED)
    finished = time.time()
    return Outcome(
        kind, verdict, error=error, published=published, worker_exit=exit_code,
        backend_status=stream.status, result_file=p.result_file, response_file=sibling,
        unit_id=p.request.unit_id, attempt_id=p.request.attempt_id,
        executor=p.executor.name, model=d.settings.model,
        requested_model=d.requested_model, session_id=stream.session_id,
        tool_uses=stream.tool_uses, tool_errors=stream.tool_errors,
        denials=tuple(stream.denials or ()), usage=stream.usage,
        quota_note=d.quota_note,
        quota=Quota(hit.group, hit.resets_at, hit.message) if hit else None,
        started_at=iso(d.started), finished_at=iso(finished),
        duration_s=round(finished - d.started, 3), state_dir=d.state.path,
        result_identity=landed, sandboxed=d.sandboxed, escaped=tuple(d.escaped))


def _final_stream(d: Dispatch) -> StreamResult:
    if d.reader is None:
        d.reader = d.p.executor.reader()
    if d.worker is not None or d._tail_offset:
        pump(d)
        if d._tail_rest:
            d.reader.feed(d._tail_rest.decode("utf-8", "replace"))
            d._tail_rest = b""
    stream = d.reader.finish(d.state.file(statedir.TAIL))
    record_session(d)
    return stream
