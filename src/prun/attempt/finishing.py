"""Finishing an attempt: judge it (its exit code and its stream's final event, or why it
never ran), record a quota hit, publish its result or a FALLBACK (``publish``), and write
``outcome.json`` last: its presence means the attempt is over.

    stream = the whole stream, read             (``Follower.finish``)
    verdict, error = judge(...)                 why it ended: ok, or a reason and its error
    hit = quota_after(...)                      a quota error recognised in a failure
    published = publish(...)                    the worker's result, the response, or FALLBACK
    conclude(...)                               outcome.json, the published index, the ledger
"""

from __future__ import annotations

import time

from ..errors import QuotaExhausted
from . import statedir
from .beginning import write_opening
from .publish import keep_fallback, publish
from .statedir import iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..executors.records import QuotaHit, StreamResult
    from .core import Dispatch
    from .outcome import Outcome
    from .protocols import ResultIdentity

STDERR_TAIL_BYTES = 20000   # what the executor reads of stderr for a resume refusal or a quota
# verdicts after which no quota error is looked for, and after which quota is not re-read
NO_QUOTA_HIT = ("ok", "quota", "launch-failed")
NO_QUOTA_REREAD = ("ok", "quota", "cancelled")
# an attempt that succeeded but whose result could not be written (its output is kept)
UNPUBLISHED = ("disk-full", "publish-failed")


def finish(d: Dispatch, exit_code: int | None, *, timed_out: bool = False,
           cancelled: bool = False, refused: QuotaExhausted | None = None) -> Outcome:
    """Judge the run, publish the result (or FALLBACK), write outcome.json last."""
    try:
        write_opening(d)   # kept for a keeper that did not start the worker
    except OSError:         # a full disk: outcome.json says what it can
        pass
    follower = d.follow()
    stream = follower.finish(read=d.worker is not None or follower.offset > 0
                             or d.receipt is not None or d.reopened)  # reopened: read it all
    verdict, error = judge(d, exit_code, stream, timed_out=timed_out, cancelled=cancelled,
                           refused=refused)
    hit = quota_after(d, verdict, exit_code, stream)
    published: str | None
    try:
        published, sibling, verdict, error = publish(d, verdict, error, exit_code, stream)
    except OSError as e:  # a full disk, a folder gone or read-only: no result there
        verdict, error = unpublished(d, verdict, error, e)
        published, sibling = keep_fallback(d, verdict, error, exit_code, stream), None
    if exit_code is None and verdict not in ("ok", *UNPUBLISHED) and d.launched_at \
            and not (timed_out or cancelled or refused or d.lost or d.limited):
        verdict = "exit-unknown"   # what it left does not show success either
        error = (f"{error}; " if error else "") + ("its exit code was not observed (its "
                                                  "keeper was gone)")
    return conclude(d, verdict, error, exit_code, published, sibling, stream, hit)


def unpublished(d: Dispatch, verdict: str, error: str | None, e: OSError) -> tuple[str, str]:
    """The verdict and error of an attempt whose result could not be written: ``disk-full``
    (no space, a quota) or ``publish-failed`` when it had succeeded (``prun resume``
    publishes a run's from its state dir once it can be written); a failed one keeps its
    own verdict, the reason its FALLBACK is not at the result path added to its error."""
    import errno

    why = (f"cannot write the result {d.p.result_file}: {e.strerror or e} (the FALLBACK is "
           "in the state dir)")
    if verdict != "ok":
        return verdict, f"{error}; {why}" if error else why
    full = e.errno in (errno.ENOSPC, errno.EDQUOT)
    return ("disk-full" if full else "publish-failed"), why


def judge(d: Dispatch, exit_code: int | None, stream: StreamResult, *, timed_out: bool,
          cancelled: bool, refused: QuotaExhausted | None) -> tuple[str, str | None]:
    """Why the attempt ended: (verdict, error); ``ok`` and None when it succeeded. What
    stopped it before or from outside comes first; else the executor judges its exit."""
    if refused is not None:
        return "quota", refused.line()
    if d.launch_error:
        return "launch-failed", d.launch_error
    if d.lost is not None and not cancelled:   # its cluster worker died, or its diff did not land
        return d.lost
    if d.limited is not None:   # its tree passed a limit: ended by its keeper
        return d.limited
    if timed_out:
        return ("timeout", f"no exit within the {int(d.settings.timeout_s)} s timeout; "
                "process group ended")
    if cancelled:
        return "cancelled", "the dispatcher was stopped; the worker's group was ended"
    if d.follower is not None and d.follower.refused:
        return "stream-not-a-file", (f"its stream {d.state.file(statedir.TAIL)} is "
                                     f"{d.follower.refused}: not read")
    return _judge_exit(d, exit_code, stream)


def _judge_exit(d: Dispatch, exit_code: int | None, stream: StreamResult
                ) -> tuple[str, str | None]:
    """The executor's judgement of a worker that exited; a failure is a refused resume, or a
    timeout when the CLI's own bounded timeout ran out.

    An exit code that was never observed (the keeper that reaped the worker died with the
    supervisor, or a standalone dispatcher was killed) is not made up: an agent is judged by
    its final result event, as if it had exited 0; a command, which has none, fails with
    ``exit-unknown`` (its output kept in the FALLBACK); ``outcome.json`` says
    ``worker_exit: null``."""
    ex = d.p.executor
    if exit_code is None and not ex.event_stream:   # no final event: nothing shows it finished
        return "exit-unknown", ("its exit code was not observed (its dispatcher or keeper was "
                                "gone), and a command's output alone does not show it finished")
    j = ex.judge(0 if exit_code is None else exit_code, stream)
    if j.ok:
        return "ok", None
    if exit_code is None and j.reason == "no-result-event":
        return j.reason, (f"{j.error}; its exit code was not observed (its keeper was gone), "
                          "so it is judged by what it left")
    if d.p.resume_id and ex.resume_refused(exit_code or 0, stream, _stderr_tail(d)):
        return "resume-refused", j.error  # the run starts a fresh attempt instead
    if d.launched_at and time.time() - d.launched_at >= d.settings.timeout_s:
        return "timeout", j.error
    return j.reason, j.error


def quota_after(d: Dispatch, verdict: str, exit_code: int | None, stream: StreamResult
                ) -> QuotaHit | None:
    """After a failure: the quota error the executor recognises in it, recorded (its group
    empty until it resets), and the executor's quota groups re-read past their TTL."""
    ex, hit = d.p.executor, None
    if verdict not in NO_QUOTA_HIT:
        hit = ex.quota_hit(stream, exit_code or 0, _stderr_tail(d))
        if hit is not None:
            from .. import quota

            hit.group = hit.group or ex.quota_group(d.settings.model)
            quota.record_hit(hit.group, hit.resets_at, hit.message, d.p.env)
    if verdict not in NO_QUOTA_REREAD and d.launch_error is None:
        from .. import quota

        quota.after_backend_failure(ex.quota_groups(), d.p.env, ex.quota_probe)
    return hit


def conclude(d: Dispatch, verdict: str, error: str | None, exit_code: int | None,
             published: str | None, sibling: str | None, stream: StreamResult,
             hit: QuotaHit | None) -> Outcome:
    """Write ``outcome.json`` (last of the state dir's files), then index a result that
    landed (its driver records the end in the ledger)."""
    from . import result_index as index

    p, sd = d.p, d.state
    landed = index.identity(p.result_file) if verdict not in UNPUBLISHED else None
    d.outcome = _outcome(d, verdict, error, exit_code, published, sibling, stream, hit,
                         landed)
    try:
        sd.write_json(statedir.OUTCOME, d.outcome.to_json(), durable=d.durable)
    except OSError:  # the state dir's disk is full too: the ledger still hears the end
        pass
    if landed is not None:  # waiters treat the result as landed from now on
        index.record(p.result_file, sd.path, outcome=sd.file(statedir.OUTCOME),
                     state_root=p.config.state_root)
    return d.outcome


def _outcome(d: Dispatch, verdict: str, error: str | None, exit_code: int | None,
             published: str | None, sibling: str | None, stream: StreamResult,
             hit: QuotaHit | None, landed: ResultIdentity | None) -> Outcome:
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
        denials=tuple(stream.denials or ()), usage=stream.usage, spend=stream.spend,
        quota_note=d.quota_note,
        quota=Quota(hit.group, hit.resets_at, hit.message) if hit else None,
        started_at=iso(d.started), finished_at=iso(finished),
        duration_s=round(finished - d.started, 3), state_dir=d.state.path,
        result_identity=landed, sandboxed=d.sandboxed, escaped=tuple(d.escaped),
        notes=stream_notes(stream))


def stream_notes(stream: StreamResult) -> tuple[str, ...]:
    """What the outcome notes of the worker's stream: its lines that were not JSON objects
    (corrupt, cut, or too long to keep), which were skipped, not read."""
    if not stream.bad_lines:
        return ()
    n = stream.bad_lines
    return (f"corrupt-stream: {n} line{'s' if n > 1 else ''} of its stream "
            f"{'were' if n > 1 else 'was'} not a JSON object and {'were' if n > 1 else 'was'} "
            "skipped",)


def _stderr_tail(d: Dispatch) -> str:
    from .._util.fsutil import tail_bytes

    return tail_bytes(d.state.file(statedir.STDERR), STDERR_TAIL_BYTES).decode("utf-8",
                                                                             "replace")
