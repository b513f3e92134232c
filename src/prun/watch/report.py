"""What ``prun monitor`` returns: the event that woke it and one ``UnitReport`` per unit (a
``Report``), and the lines it prints of them: the summary, a digest line per unit, and the
arguments that watch the units still running.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .._util.quoting import quote, word
from .._util.timeparse import format_duration
from ..errors import ExitCode

# the event that woke the monitor, and its exit code (prun.errors.ExitCode)
EVENTS = {"ALL-DONE": ExitCode.OK, "STALLED": ExitCode.STALLED, "FAILED": ExitCode.UNIT_FAILED,
          "TIMEOUT": ExitCode.TIMEOUT}
STILL_RUNNING = ("running", "stalled", "waiting")
STATES = ("done", "running", "stalled", "failed", "waiting")


@dataclass
class UnitReport:
    """One digest line."""

    state_dir: str
    unit_id: str
    state: str
    executor: str
    elapsed_s: float | None
    tail_bytes: int | None
    idle_s: float | None
    model: str | None
    result_file: str | None
    exit_code: int | None
    note: str


@dataclass
class Report:
    event: str
    units: list[UnitReport]
    watch: str

    @property
    def exit_code(self) -> int:
        return EVENTS[self.event]

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATES, 0)
        for u in self.units:
            counts[u.state] += 1
        return counts

    @property
    def still_running(self) -> list[UnitReport]:
        return [u for u in self.units if u.state in STILL_RUNNING]

    def as_dict(self) -> dict[str, Any]:
        return {"event": self.event, "exit_code": self.exit_code, "units_total": len(self.units),
                "counts": self.counts, "watch": self.watch,
                "units": [asdict(u) for u in self.units]}


# output ---------------------------------------------------------------------------------------

def summary_line(report: Report) -> str:
    c = report.counts
    return (f"{report.event} units={len(report.units)} done={c['done']} running={c['running']} "
            f"stalled={c['stalled']} failed={c['failed']} waiting={c['waiting']} "
            f"watch={report.watch}")


def digest_line(u: UnitReport) -> str:
    def dur(v: float | None) -> str:
        return "-" if v is None else format_duration(v)

    return (f"UNIT {quote(u.unit_id)} state={u.state} elapsed={dur(u.elapsed_s)} "
            f"tail={'-' if u.tail_bytes is None else f'{u.tail_bytes}B'} idle={dur(u.idle_s)} "
            f"{word('model', u.model or '-')} "
            f"exit={'-' if u.exit_code is None else u.exit_code} "
            f"{word('result', u.result_file or '-')} {word('dir', u.state_dir)} "
            f"{word('note', u.note or '-')}")


def relaunch_argv(report: Report, options: Sequence[str] = ()) -> list[str]:
    """The arguments that watch the units still running; stalled ones are passed with
    ``--seen-stalled`` so that the same stall does not wake the next monitor at once."""
    argv = list(options)
    for u in report.still_running:
        if u.state == "stalled":
            argv += ["--seen-stalled", u.state_dir]
    argv += [u.state_dir for u in report.still_running if u.state != "stalled"]
    return argv
