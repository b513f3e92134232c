"""How one attempt ended: a typed ``Outcome``, written last to the state dir as ``outcome.json``
(its presence means the dispatcher has finished) and read back by recovery and reconcile.

``kind`` is the dispatcher's judgement (``ledger.OutcomeKind``: succeeded, failed, timeout,
quota, cancelled, handed-off); ``reason`` a short slug saying why (``ok``, ``exit-nonzero``,
``status-error``, ``no-result-event``, ``short-response``, ``launch-failed``, ``resume-refused``,
``timeout``, ``cancelled``, ``quota``); ``exit_code`` the dispatcher's own (``ExitCode``);
``worker_exit`` the worker's, None when it was not observed (never made up). ``tokens``
(``in``, ``out``, ``cached``) and ``cost_usd`` are what the agent CLI reported it used, as its
executor read them (``executors.records.Usage``), each null when it reported none; ``usage``
keeps the CLI's own record beside them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ExitCode
from ..executors.records import Usage, count, dollars
from ..ledger.statuses import OutcomeKind

if TYPE_CHECKING:
    from ..executors.records import Denial, Usage
    from .protocols import ResultIdentity

EXIT_CODE = {OutcomeKind.SUCCEEDED: ExitCode.OK, OutcomeKind.TIMEOUT: ExitCode.TIMEOUT,
             OutcomeKind.QUOTA: ExitCode.QUOTA, OutcomeKind.HANDED_OFF: ExitCode.OK}


@dataclass(frozen=True)
class Quota:
    """The quota error a failed attempt hit: its group and reset time, as recognised."""

    group: str | None
    resets_at: str | None
    message: str


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    reason: str
    error: str | None = None
    published: str | None = None          # worker | response | fallback: what is at result_file
    worker_exit: int | None = None        # the worker's exit code; None: not observed
    backend_status: str | None = None     # the final result event's status, as printed
    result_file: str | None = None
    response_file: str | None = None      # the final response beside a worker-written result
    unit_id: str | None = None
    attempt_id: str | None = None
    executor: str | None = None
    model: str | None = None              # the model that ran
    requested_model: str | None = None
    session_id: str | None = None
    tool_uses: int = 0
    tool_errors: int = 0
    denials: tuple[Denial, ...] = ()
    usage: dict[str, Any] | None = None
    spend: Usage | None = None            # usage as the executor read it (None: not reported)
    quota_note: str | None = None         # the quota gate's MODEL-FALLBACK or refusal line
    quota: Quota | None = None            # a quota error recognised in the run's output
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    state_dir: str | None = None
    result_identity: ResultIdentity | None = None   # what was published: size, SHA-256, ...
    sandboxed: bool | None = None
    escaped: tuple[dict[str, Any], ...] = ()        # processes that left its group, ended
    notes: tuple[str, ...] = ()           # what else was seen: a corrupt stream line, ...
    lines: tuple[str, ...] = field(default=(), compare=False)  # a session unit's hand-off

    @property
    def exit_code(self) -> ExitCode:
        """The dispatcher's exit code for this outcome."""
        return EXIT_CODE.get(self.kind, ExitCode.FAILED)

    @property
    def ok(self) -> bool:
        return self.kind == OutcomeKind.SUCCEEDED

    def to_json(self) -> dict[str, Any]:
        """``outcome.json``: every field, ``outcome`` for the kind, the exit code beside it."""
        d = {name: getattr(self, name) for name in _FIELDS}
        d["outcome"] = str(self.kind)
        d["exit_code"] = int(self.exit_code)
        d["quota"] = asdict(self.quota) if self.quota else None
        d["denials"], d["escaped"] = list(self.denials), list(self.escaped) or None
        d["notes"] = list(self.notes)
        s = self.spend
        d["tokens"] = {"in": s.tokens_in if s else None, "out": s.tokens_out if s else None,
                       "cached": s.tokens_cached if s else None}
        d["cost_usd"] = s.cost_usd if s else None
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Outcome:
        """An ``outcome.json`` read back (fields it lacks keep their defaults; unknown ones
        are ignored: older and newer prun versions read each other's). A state dir is a
        unit's to write: a field of the wrong type reads as missing."""
        values: dict[str, Any] = {
            k: v for k, v in d.items() if k in _FIELDS and k not in _BUILT
            and isinstance(v, _TYPES[k]) and (_TYPES[k] is bool or type(v) is not bool)}
        try:
            kind = OutcomeKind(str(d.get("outcome")))
        except ValueError:
            kind = OutcomeKind.FAILED
        q = d.get("quota")
        values["quota"] = Quota(_str(q.get("group")), _str(q.get("resets_at")),
                                _str(q.get("message")) or "") if isinstance(q, dict) else None
        values["denials"] = tuple(x for x in d.get("denials") or () if isinstance(x, dict)) \
            if isinstance(d.get("denials"), list) else ()
        values["escaped"] = tuple(x for x in d.get("escaped") or () if isinstance(x, dict)) \
            if isinstance(d.get("escaped"), list) else ()
        values["notes"] = tuple(x for x in d.get("notes") or () if isinstance(x, str)) \
            if isinstance(d.get("notes"), list) else ()
        values["spend"] = _spend(d.get("tokens"), d.get("cost_usd"))
        return cls(kind=kind, reason=_str(d.get("reason")) or str(kind), **values)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _spend(tokens: object, cost: object) -> Usage | None:
    """``outcome.json``'s ``tokens`` and ``cost_usd`` read back."""
    t = tokens if isinstance(tokens, dict) else {}
    spent = Usage(count(t.get("in")), count(t.get("out")), count(t.get("cached")), dollars(cost))
    return spent if spent.reported else None


_FIELDS = tuple(f for f in Outcome.__dataclass_fields__ if f not in ("kind", "lines", "spend"))


# what each field of outcome.json may hold when read back (bool is an int: excluded where a
# number is meant)
_BUILT = frozenset({"kind", "reason", "quota", "denials", "escaped", "notes", "spend",
                    "lines"})
_NUM = (int, float)
_TYPES: dict[str, type | tuple[type, ...]] = {
    "error": str, "published": str, "worker_exit": int, "backend_status": str,
    "result_file": str, "response_file": str, "unit_id": str, "attempt_id": str,
    "executor": str, "model": str, "requested_model": str, "session_id": str,
    "tool_uses": int, "tool_errors": int, "usage": dict, "quota_note": str,
    "started_at": str, "finished_at": str, "duration_s": _NUM, "state_dir": str,
    "result_identity": dict, "sandboxed": bool}
