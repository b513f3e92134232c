"""What each MCP tool runs, and how a command's exit becomes a tool result.

Every tool is one ``prun`` command. A command's exit code either reports a state (``wait``'s
4, a unit failed; ``reconcile``'s 10, something needs review; ``integrate``'s 11, a conflict):
then the tool returns a result that carries ``exit_code`` and its name; or it is an error
(usage 2, internal 70, interrupted 130, or any code the command uses for nothing else): then
the tool returns an MCP tool error whose text is the command's one line ``prun: ...``.

A ``prun: ...`` line on stderr with nothing on stdout is prun's error boundary speaking
(``PrunError``, whatever its code); a command that reports a state prints its lines first.
"""

from __future__ import annotations

import json
import signal
from dataclasses import dataclass, field
from typing import Any

from ..errors import ExitCode

LINES, BOTH = "lines", "both"


@dataclass(frozen=True)
class Spec:
    """One tool: its command, the exit codes that report a state, and what it returns."""

    name: str
    results: frozenset[int]
    # LINES: stdout is the command's lines (no --json, or none wanted);
    # BOTH: its --json and its lines, from one child (prun.cli.capture)
    output: str = LINES


def _spec(name: str, results: set[int], output: str = LINES) -> Spec:
    return Spec(name, frozenset(results | {ExitCode.OK}), output)


SPECS: dict[str, Spec] = {s.name: s for s in (
    _spec("check", {ExitCode.FAILED}, BOTH),
    _spec("run", set()),
    _spec("status", set(), BOTH),
    _spec("wait", {ExitCode.FAILED, ExitCode.STOPPED, ExitCode.UNIT_FAILED, ExitCode.STALLED,
                   ExitCode.PARKED, ExitCode.SUPERVISOR_GONE, ExitCode.UNIT_SUCCEEDED,
                   ExitCode.HANDOFF, ExitCode.TIMEOUT}),
    _spec("cancel", {ExitCode.FAILED}),
    _spec("reassign", {ExitCode.FAILED}),
    _spec("followup", {ExitCode.FAILED}),
    _spec("reconcile", {ExitCode.FAILED, ExitCode.NEEDS_REVIEW}, BOTH),
    _spec("integrate", {ExitCode.FAILED, ExitCode.CONFLICT}, BOTH),
    _spec("dispatch", {ExitCode.FAILED, ExitCode.QUOTA, ExitCode.TIMEOUT}),
    _spec("receipt", set()),
    _spec("quota", set(), BOTH),
    _spec("ledger", set(), BOTH),
    _spec("brief", set(), BOTH),
    _spec("panel", {ExitCode.FAILED, ExitCode.NEEDS_REVIEW, ExitCode.STOPPED, ExitCode.TIMEOUT},
          BOTH),
    _spec("review", set(), BOTH),
    _spec("decide", set()),
)}


def exit_name(code: int | None) -> str | None:
    """``ExitCode``'s name for ``code`` (``UNIT_FAILED`` for 4), or None."""
    if code is None:
        return None
    try:
        return ExitCode(code).name
    except ValueError:
        return None


@dataclass
class Outcome:
    """A tool's answer: the text (the command's lines, or the error line) and the structured
    content (complete on its own: it carries the lines too)."""

    error: bool
    text: str
    structured: dict[str, Any] = field(default_factory=dict)


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def ended(command: str, code: int | None, last: str = "") -> str:
    """How a child that said nothing in prun's words ended, in words (no ``prun: ``): a
    signal by its name (the server ends its children only past their bound, and says so
    itself), an exit code with its name in the exit code table."""
    if code is not None and code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        return (f"prun {command} was ended by {sig}, which this server did not send (was the "
                "machine short of memory? see the system log)" + (f": {last}" if last else ""))
    what = f"prun {command} exited with code {code}" if code is not None else \
        f"prun {command} did not finish"
    name = exit_name(code)
    return what + (f" ({name})" if name else "") + (f": {last}" if last else "")


def failure(spec: Spec, code: int | None, lines: list[str], stderr: str) -> str | None:
    """The error line when this exit is an error, else None (a result)."""
    last = _last_line(stderr)
    if code == ExitCode.OK:
        return None
    if code is not None and code in spec.results and (lines or not last.startswith("prun: ")):
        return None
    if last.startswith("prun: "):
        return last
    return f"prun: {ended(spec.name, code, last)}"


def outcome(spec: Spec, code: int | None, lines: list[str], stderr: str, *,
            data: Any = None, extra: dict[str, Any] | None = None) -> Outcome:
    """The tool result for one run of a command. ``data`` is its parsed ``--json`` (an object
    is merged into the structured content as it is; anything else goes under ``rows``);
    ``extra`` adds fields (``run_id``, ``cursor`` ...)."""
    notes = [line for line in stderr.splitlines() if line.strip()]
    message = failure(spec, code, lines, stderr)
    if message is not None:
        # the one line first; the command's own lines after it (e.g. the FAIL lines of a plan
        # that failed the independence test)
        text = "\n".join([message, *lines])
        return Outcome(True, text, {"error": message, "exit_code": code,
                                    "exit_name": exit_name(code), "lines": lines})
    structured: dict[str, Any] = {}
    if isinstance(data, dict):
        structured.update(data)
    elif data is not None:
        structured["rows"] = data
    structured.update(extra or {})
    structured["lines"] = lines
    structured["exit_code"] = code
    structured["exit_name"] = exit_name(code)
    if notes:
        structured["notes"] = notes
    return Outcome(False, "\n".join(lines), structured)


def loads(text: str | None) -> Any:
    """A command's ``--json`` output, or None when there is none or it is not JSON."""
    if not text or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
