"""The live view of a run on a terminal: one frame that fits the terminal, whatever the number
of units and the length of their ids.

A frame is, top to bottom: the run's line (id, status, counts, elapsed: never scrolled away),
the latest notices (what went wrong, newest last), then the table of units. The table shows
what needs attention first (failed, timed out, blocked and stalled units, then parked ones and
session units waiting for their receipt, then running, pending and finished ones); when the
rows do not fit, the last one says how many more there are and in which states. Ids too long
for their column are shortened in the middle, never to two identical ones
(``prun._util.shorten``); a column empty in every row shown is left out, and on a narrow
terminal the least useful columns go first (model, cost, last activity, executor, elapsed).
What a unit or a plan named reaches the terminal through ``prun._util.quoting.printable``: no
control character from a name (rich passes escape sequences in plain strings through).
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .._util.quoting import printable
from .._util.shorten import MIN_WIDTH, shorten
from .._util.timeparse import epoch, format_duration
from ..run.events import NON_SUCCESS
from ..settings import current
from .model import view

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from ..ledger import Ledger
    from ..run.events import Event
    from .model import RunView, UnitView

COLUMNS = ("unit", "state", "elapsed", "executor", "activity", "model", "cost")
HEADERS = {"unit": "unit", "state": "state", "elapsed": "elapsed", "executor": "executor",
           "activity": "last activity", "model": "model", "cost": "cost"}
DROPPED_FIRST = ("model", "cost", "activity", "executor", "elapsed")  # on a narrow terminal
GAP = 2                  # columns are two spaces apart
NOTICES = 5              # at most, newest last
# what needs attention first; within a rank, plan order
RANK = {"failed": 0, "timeout": 0, "blocked": 0, "stalled": 0, "parked": 1, "waiting": 1,
        "cancelled": 2, "running": 3, "pending": 4, "succeeded": 5}


@dataclass(frozen=True)
class Row:
    unit: str
    state: str           # the packet's status, or stalled / waiting
    cells: dict[str, str]


def state_of(u: UnitView, now: float, stall_s: float) -> str:
    """The unit's state as the view shows it: its status, ``stalled`` for a running unit
    with no output for ``stall_s``, ``waiting`` for a session unit without its receipt."""
    if u.waiting:
        return "waiting"
    if u.status == "running" and u.started is not None:
        quiet_since = u.last_activity or u.started
        if now - quiet_since >= stall_s:
            return "stalled"
    return u.status


def rows_of(view: RunView, now: float, stall_s: float) -> list[Row]:
    """One row per unit, what needs attention first."""
    out = []
    for u in view.units:
        state = state_of(u, now, stall_s)
        el = u.elapsed(now)
        activity = ""
        if state == "parked" and (u.parked_until or u.resets_at):
            when = epoch(u.parked_until or u.resets_at)
            activity = "until " + time.strftime("%H:%M:%S", time.localtime(when)) if when else ""
        elif state == "waiting":
            activity = u.waiting or ""          # receipt, memfree or load
        elif u.last_activity and state in ("running", "stalled"):
            activity = f"{format_duration(now - u.last_activity)} ago"
        out.append(Row(printable(u.packet_id), state, {
            "state": state, "elapsed": format_duration(el) if el is not None else "",
            "executor": printable(u.executor or ""), "activity": activity,
            "model": printable(u.model or ""), "cost": _cost(u)}))
    return sorted(out, key=lambda r: RANK.get(r.state, 0))


def _cost(u: UnitView) -> str:
    if u.cost_usd is not None:
        return f"${u.cost_usd:.4f}"
    tokens = [t for t in (u.tokens.get("in"), u.tokens.get("out")) if t is not None]
    if not tokens:
        return ""
    n = sum(tokens)
    return f"{n / 1000:.1f}k tok" if n >= 1000 else f"{n} tok"


def columns_for(rows: Sequence[Row], width: int) -> tuple[list[str], dict[str, int]]:
    """The columns that fit ``width`` (empty ones left out) and each one's width; the unit
    column takes what is left, at least ``MIN_WIDTH``."""
    wide = {c: max([len(HEADERS[c])] + [len(r.cells[c]) for r in rows]) for c in COLUMNS[1:]}
    cols = [c for c in COLUMNS[1:] if any(r.cells[c] for r in rows)]
    unit_w = max([len(HEADERS["unit"])] + [len(r.unit) for r in rows])
    for drop in (None, *DROPPED_FIRST):
        if drop in cols:
            cols.remove(drop)
        room = width - sum(wide[c] for c in cols) - GAP * len(cols)
        if room >= min(unit_w, MIN_WIDTH * 3) or not cols:
            break
    widths = {c: wide[c] for c in cols}
    widths["unit"] = max(MIN_WIDTH, min(unit_w, room))
    return ["unit", *cols], widths


def frame(view: RunView, notices: Sequence[str], *, width: int, height: int,
          now: float | None = None, stall_s: float = 600.0,
          driven_here: bool = False) -> RenderableType:
    """The whole view of ``view`` in at most ``width`` columns and ``height`` lines
    (``driven_here``: this process is its supervisor, whose liveness goes without saying)."""
    now = time.time() if now is None else now
    head = [Text(line, style="bold") for line in head_lines(view, now, width, driven_here)]
    shown_notices = list(notices)[-max(0, min(NOTICES, height - 3 - len(head))):] \
        if height > 3 + len(head) else []
    notes = [Text(_cut(printable(n), width), style="yellow") for n in shown_notices]
    rows = rows_of(view, now, stall_s)
    room = max(1, height - 1 - len(head) - len(notes))   # and the table's header
    shown, hidden = (rows, []) if len(rows) <= room else (rows[:room - 1], rows[room - 1:])
    cols, widths = columns_for(shown, width)
    names = shorten([r.unit for r in shown], widths["unit"])
    t = Table(box=None, pad_edge=False, padding=(0, GAP // 2), show_edge=False,
              header_style="bold", expand=False)
    for c in cols:
        t.add_column(HEADERS[c] if len(HEADERS[c]) <= widths[c] else HEADERS[c][:widths[c]],
                     width=widths[c], no_wrap=c != "unit",
                     overflow="fold" if c == "unit" else "ellipsis")
    for r, name in zip(shown, names, strict=True):
        # Text, not str: a name is shown as written, never read as rich markup
        t.add_row(Text(name), *(Text(r.cells[c]) for c in cols[1:]), style=_style(r.state))
    more = [Text(_cut(more_line(hidden), width), style="dim")] if hidden else []
    return Group(*head, *notes, t, *more)


def head_lines(view: RunView, now: float, width: int, driven_here: bool = False) -> list[str]:
    """The run's line: its id, status, the count of units in each state (what needs
    attention first) and its elapsed time, wrapped to ``width``."""
    run = view.run
    counts = view.counts()
    started, end = epoch(run["created_at"]), epoch(run["finished_at"]) or now
    words = [f"prun {printable(run['id'])}", printable(run["status"])]
    words += [f"{k}={counts[k]}" for k in sorted(counts, key=lambda k: (RANK.get(k, 0), k))]
    if started:
        words.append(format_duration(end - started))
    if not driven_here and not view.supervisor_alive and run["status"] == "running":
        words.append("supervisor=gone")
    return textwrap.wrap(" ".join(words), width, break_on_hyphens=False) or [""]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


def more_line(hidden: Sequence[Row]) -> str:
    """The row that stands for the units not shown: how many, in which states."""
    counts: dict[str, int] = {}
    for r in hidden:
        counts[r.state] = counts.get(r.state, 0) + 1
    what = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(),
                                                     key=lambda kv: RANK.get(kv[0], 0)))
    return f"… {len(hidden)} more: {what}"


def _style(state: str) -> str:
    return {"failed": "red", "timeout": "red", "blocked": "red", "stalled": "magenta",
            "parked": "yellow", "waiting": "cyan", "succeeded": "green"}.get(state, "")


def ledger_notices(ledger: Ledger, run_id: str, limit: int = NOTICES) -> list[str]:
    """The run's latest notices as the ledger has them (a run watched from elsewhere): what
    stalled, stopped, was parked, blocked or handed off, and the packets that failed, timed
    out or were cancelled, with their cause."""
    rows = ledger.conn.execute(
        "SELECT packet_id, kind, status, cause FROM events WHERE run_id = ? AND cause != '' AND"
        " (kind IN ('stalled', 'stopped', 'parked', 'blocked', 'handoff', 'escaped', 'waiting',"
        " 'accept-failed', 'unverified')"
        " OR (kind = 'packet' AND status IN ('failed', 'timeout', 'cancelled')))"
        " ORDER BY seq DESC LIMIT ?", (run_id, limit)).fetchall()
    return [f"{r['packet_id'] or 'run'}: {r['status'] or r['kind']}: {r['cause']}"
            for r in reversed(rows)]


class LiveRenderer:
    """The live view of a run this process drives (``prun run`` on a terminal), redrawn
    twice a second; notices come from the supervisor's events."""

    def __init__(self, ledger: Ledger, run_id: str, console: Console | None = None):
        self.ledger, self.run_id = ledger, run_id
        self.console = console or Console()
        self.stall_s = current().stall_s
        self.notes: list[str] = []
        self.last: RenderableType = ""
        self.live = Live(console=self.console, refresh_per_second=2, transient=False,
                         get_renderable=self._frame)
        self.live.start()

    def handle(self, ev: Event) -> None:
        if ev.kind in NON_SUCCESS and ev.cause:
            self.notes = [*self.notes, f"{ev.packet_id or 'run'}: {ev.kind}: {ev.cause}"][-NOTICES:]

    def _frame(self) -> RenderableType:
        try:
            v = view(self.ledger, self.run_id)
        except Exception:  # a ledger busy for a moment: the last frame stays
            return self.last
        self.last = frame(v, self.notes, width=self.console.width,
                          height=max(3, self.console.height - 1), stall_s=self.stall_s,
                          driven_here=True)
        return self.last

    def close(self) -> None:
        self.live.stop()
