"""Beginning an attempt: the state dir's opening files (``begin``), then the quota gate and
``unit.json`` (``admit``). With a launcher that ``stages`` them (a run's keeper), they are kept
in ``Dispatch.opening`` for it, and ``unit.json`` is written once, at the launch; whatever is
still kept when the attempt ends without it is written by ``write_opening``."""

from __future__ import annotations

from ..errors import QuotaExhausted
from . import statedir

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .core import Dispatch


def begin(d: Dispatch) -> None:
    """The prompt's copy and the one-value files (a session unit has no process, pid or
    stream)."""
    sd, p = d.state, d.p
    _copy_prompt(d)
    _put(d, statedir.RESULT_FILE, p.result_file)
    if p.executor.launches_process:
        _put(d, statedir.DISPATCH_PID, str(d.dispatcher_pid))
        if d.opening is None:     # (a keeper creates them as it opens them)
            open(sd.file(statedir.TAIL), "ab").close()
            open(sd.file(statedir.STDERR), "ab").close()


def admit(d: Dispatch, *, gate: bool = True) -> None:
    """The quota gate (``gate``: asked; a Dask worker's task was admitted by its
    coordinator), then the model and ``unit.json``. A refusal raises QuotaExhausted, its
    attempt's opening files and ``unit.json`` written all the same."""
    try:
        if gate:
            _gate(d)
    except QuotaExhausted:   # nothing is launched: every opening file is written here
        if d.opening is None:
            d.state.write_json(statedir.UNIT, d.unit_record())
        else:
            write_opening(d)
        raise
    _put(d, statedir.MODEL, d.settings.model or d.p.executor.name)
    if d.opening is None:
        d.state.write_json(statedir.UNIT, d.unit_record())


def _copy_prompt(d: Dispatch) -> None:
    """``prompt``, whole or none: with a run's keeper, copied by it from the frozen brief
    (prun's own file, never changed), else written here."""
    from .._util.fsutil import atomic_write

    dest = d.state.file(statedir.PROMPT)
    if d.opening is not None and d.p.request.briefed:
        d.copies.append((d.p.request.prompt_file, dest))
    elif d.opening is not None:
        d.opening.append((dest, d.p.prompt))
    else:
        atomic_write(dest, d.p.prompt, durable=d.durable)


def _put(d: Dispatch, name: str, text: str) -> None:
    """A one-value opening file: written, or kept for the launcher."""
    if d.opening is None:
        d.state.write(name, text)
    else:
        d.opening.append((d.state.file(name), statedir.value_text(text)))


def write_opening(d: Dispatch) -> None:
    """The opening files kept for a launcher that did not start the worker, and the
    pre-launch ``unit.json``, written here (a refusal, a launch that failed or never
    came). Nothing to do once written."""
    if d.opening is None:
        return
    from .._util.fsutil import atomic_write

    staged, d.opening = d.opening, None
    if d.copies:
        staged.append((d.state.file(statedir.PROMPT), d.p.prompt))
        d.copies = []
    for path, text in staged:
        atomic_write(path, text, durable=False)
    if not d.state.worker:   # a keeper that started it late wrote its record
        d.state.write_json(statedir.UNIT, d.unit_record())


def _gate(d: Dispatch) -> None:
    """The quota gate: may swap the model (MODEL-FALLBACK) or raise QuotaExhausted."""
    from ..errors import GateRefusal

    try:
        decision = d.p.executor.gate(d.settings, d.p.env)
    except QuotaExhausted as e:  # exit 75: the refusal is recorded before finish() runs
        d.quota_note = (e.note if isinstance(e, GateRefusal) else None) or e.line()
        d.state.write(statedir.QUOTA_NOTE, d.quota_note)
        raise
    if decision is None:
        return
    if decision.note:
        import sys

        d.quota_note = decision.note
        print(decision.note, file=sys.stderr, flush=True)
        d.state.write(statedir.QUOTA_NOTE, decision.note)
    if decision.settings is not None:
        d.settings = decision.settings
