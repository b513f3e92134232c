"""Show what each quota group has left, when it resets, and how old the reading is.

Readings older than the TTL (5 minutes) are re-read first when a probe is configured for the
group; --refresh re-reads every probed group now. Also installed as `agent-quota`.
Groups: claude (the Claude account Sonnet units share), agy-gemini, agy-claude-gpt (agy's two
metered groups), gemini (Gemini CLI), and any other group the config or snapshot names.

One line per group, then one line for the snapshot (a table when stdout is a terminal):

  QUOTA group=<g> state=ok|empty|unknown left=<0..1|unknown> resets=<ISO|unknown>
        age=<duration|never> source=<probe|probe:...|hit|none>[ error="<text>"]
  (a value with blanks or quotes is JSON-quoted)
  SNAPSHOT age=<duration|never> ttl=<duration>[ problem="<text>"] path=<file>

exit codes: 0 printed; 1 the snapshot could not be written; 2 bad config file or option.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .. import executors, quota
from .._util.quoting import printable, word
from .._util.timeparse import format_duration
from ..errors import StateError
from ..quota.snapshot import parse_time
from ..settings import config
from . import options

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..quota import GroupState, Snapshot
    from ..settings.config import QuotaConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--refresh", action="store_true",
                   help="re-read every group that has a probe now, whatever its age")
    p.add_argument("--group", action="append", default=[], metavar="GROUP",
                   type=options.name("quota group", "`prun quota` lists them"),
                   help="show only this group (repeatable)")


def run(args: argparse.Namespace) -> int:
    env = os.environ
    cfg = config.quota(env)  # a bad config file is exit 2 here, not a warning
    try:
        snap = quota.current(env, force=args.refresh, strict=True,
                             also=executors.quota_groups(), probe_of=executors.quota_probe)
    except OSError as e:
        raise StateError(f"cannot write the quota snapshot: {e}",
                         hint="check PRUN_QUOTA_SNAPSHOT and its folder's permissions")
    states = quota.group_states_of(snap, cfg, executors.quota_groups())
    if args.group:
        states = {g: states.get(g) or quota.GroupState(g) for g in args.group}
    now = time.time()
    if args.json:
        print(json.dumps(_as_json(snap, states, cfg, now), indent=2, sort_keys=True))
    elif sys.stdout.isatty():
        _table(snap, states, cfg, now)
    else:
        for s in states.values():
            print(_line(s, cfg, now))
        print(_snapshot_line(snap, cfg, now))
    return 0


def _fmt_left(left: float | None) -> str:
    return "unknown" if left is None else f"{left:.2f}"


def _fmt_age(age: float | None) -> str:
    return "never" if age is None else format_duration(age)


def _line(s: GroupState, cfg: QuotaConfig, now: float) -> str:
    age = s.age_s(now)
    line = (f"QUOTA {word('group', s.group)} state={s.state} left={_fmt_left(s.left)} "
            f"{word('resets', s.resets_at or 'unknown')} age={_fmt_age(age)} "
            f"{word('source', s.source or 'none')}")
    if s.error:
        line += " " + word("error", s.error)
    return line


def _snapshot_age(snap: Snapshot, now: float) -> float | None:
    try:
        return now - parse_time(snap.updated_at) if snap.updated_at else None
    except (ValueError, OverflowError):
        return None


def _snapshot_line(snap: Snapshot, cfg: QuotaConfig, now: float) -> str:
    line = (f"SNAPSHOT age={_fmt_age(_snapshot_age(snap, now))} "
            f"ttl={format_duration(cfg.ttl_s)}")
    if snap.problem:
        line += " " + word("problem", snap.problem)
    return line + " " + word("path", snap.path)


def _as_json(snap: Snapshot, states: Mapping[str, GroupState], cfg: QuotaConfig,
             now: float) -> dict[str, Any]:
    groups = {}
    for g, s in states.items():
        item = s.to_json()
        item.update(state=s.state, age_s=_round(s.age_s(now)), probe=g in cfg.probes)
        groups[g] = item
    return {"snapshot": snap.path, "updated_at": snap.updated_at,
            "age_s": _round(_snapshot_age(snap, now)), "ttl_s": cfg.ttl_s,
            "problem": snap.problem, "config": cfg.path, "groups": groups}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


def _table(snap: Snapshot, states: Mapping[str, GroupState], cfg: QuotaConfig,
           now: float) -> None:
    table = Table(title=Text(f"quota snapshot: {printable(snap.path)}"))
    for col in ("group", "state", "left", "resets", "age", "source", "error"):
        table.add_column(col)
    style = {"ok": "green", "empty": "red", "unknown": "yellow"}
    for s in states.values():
        left = "?" if s.left is None else f"{s.left:.0%}"
        resets = (s.resets_at or "-") + (" (est.)" if s.reset_estimated else "")
        cells = [Text(printable(x)) for x in (s.group, s.state, left, resets,
                                               _fmt_age(s.age_s(now)), s.source or "-",
                                               s.error or "")]
        cells[1].stylize(style[s.state])
        table.add_row(*cells)
    console = Console()
    console.print(table)
    console.print(_snapshot_line(snap, cfg, now), markup=False, highlight=False)
