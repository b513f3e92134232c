"""Showing a run: terse stable lines (pipes, coordinators) or a live table (a terminal).

Line formats (one record per line, ``key=value`` words; a value or name that is not plain is
quoted as ``prun._util.quoting`` says):

    RUN <run-id> status=<s> packets=<n> <status>=<count>... elapsed=<d> supervisor=<alive|gone>
    UNIT <packet> <event> attempt=<attempt-id> executor=<x> [cause="..."] [result=<path>]
         [accept=passed|failed|timeout|error]
    STOPPED action="..." need="..."
    COST <executor> attempts=<n> tokens_in=<n> tokens_out=<n> cached=<n> usd=<x> [<total>_unknown=<k>]...
    RESULTS <folder>

A ``COST`` total is the sum of what the attempts that reported it reported; ``unknown`` when
none did, and ``<total>_unknown=<k>`` when ``k`` of the attempts did not (it is then a lower
bound). Only executors some attempt of which reported anything get a line.

Without ``--verbose`` only what needs attention is printed per unit (failures, timeouts,
cancellations, stalls, parking, a stopped run); successes show in the final counts.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .._util.quoting import quote, word
from .._util.timeparse import epoch, format_duration
from ..run.admission import REASONS

if TYPE_CHECKING:
    from .model import RunView, Spend, UnitView


def run_line(view: RunView) -> str:
    run = view.run
    counts = view.counts()
    words = ["RUN", quote(run["id"]), word("status", run["status"]), word("packets", len(view.units))]
    words += [word(k, counts[k]) for k in sorted(counts)]
    started = epoch(run["created_at"])
    end = epoch(run["finished_at"]) or time.time()
    if started:
        words.append(word("elapsed", format_duration(end - started)))
    words.append(word("supervisor", "alive" if view.supervisor_alive else "gone"))
    return " ".join(words)


def unit_line(u: UnitView, now: float) -> str:
    if u.waiting in REASONS:   # held back by the machine's room: ``waiting reason=memfree``
        return " ".join(["UNIT", quote(u.packet_id), "waiting", word("reason", u.waiting),
                         word("note", (u.note or "")[:200])])
    words = ["UNIT", quote(u.packet_id), u.status]
    if u.attempt_id:
        words.append(word("attempt", u.attempt_id))
    if u.executor:
        words.append(word("executor", u.executor))
    el = u.elapsed(now)
    if el is not None:
        words.append(word("elapsed", format_duration(el)))
    if u.reason and u.status != "succeeded":
        words.append(word("reason", u.reason))
    if u.resets_at and u.status == "parked":
        words.append(word("resets_at", u.resets_at))
    if u.note and u.status in ("pending", "parked"):
        words.append(word("note", u.note.splitlines()[0][:200]))
    if u.result_path and u.status not in ("succeeded", "pending", "running", "parked"):
        words.append(word("result", u.result_path))
    if u.parked_until:
        words.append(word("parked_until", u.parked_until))
    if u.waiting:
        words.append(word("waiting", u.waiting))
    if u.accept:
        words.append(word("accept", u.accept["status"]))
    return " ".join(words)


def gone_line(run_id: str) -> str:
    """What a run whose supervisor is gone needs next (said on stderr by ``status``)."""
    return f"prun: the supervisor of run {quote(run_id)} is gone (`prun resume {run_id}` takes it over)"


# the names of the totals on a COST line, for the attempts' columns
COST_WORDS = {"tokens_in": "tokens_in", "tokens_out": "tokens_out", "tokens_cached": "cached",
              "cost_usd": "usd"}


def cost_line(s: Spend) -> str:
    words = ["COST", quote(s.executor), word("attempts", s.attempts)]
    for column, name in COST_WORDS.items():
        value = getattr(s, column)
        shown = "unknown" if value is None else f"{value:.4f}" if column == "cost_usd" \
            else str(value)
        words.append(word(name, shown))
    words += [word(f"{COST_WORDS[c]}_unknown", n) for c, n in s.unknown.items()
              if getattr(s, c) is not None]
    return " ".join(words)


QUIET = ("succeeded", "running", "pending")  # counted on the RUN line, not listed


def summary_lines(view: RunView, everything: bool = False) -> list[str]:
    """The run line, a line per unit that needs attention (every unit with ``everything``),
    and where the results are. Running and pending units are listed once the run is over
    (a pending unit then means the run stopped before it)."""
    now = time.time()
    lines = [run_line(view)]
    over = view.run["status"] != "running"
    for u in view.units:
        if (everything or u.status not in QUIET or u.waiting
                or (over and u.status != "succeeded")
                or (u.accept and u.accept["status"] != "passed")):
            lines.append(unit_line(u, now))
    lines += [cost_line(s) for s in view.spend()]
    lines.append(f"RESULTS {quote(view.run['run_dir'] + '/results')}")
    return lines
