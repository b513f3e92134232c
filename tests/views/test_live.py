"""The live view at fixed terminal sizes, on real run views (a frozen plan in a real ledger,
its packets and attempts moved the way a supervisor moves them)."""

from __future__ import annotations

import io
import os
import time

import pytest

from prun.ledger import Ledger, Status, now_iso
from prun.plan import load_plan
from prun.run.freeze import freeze
from prun.views.live import frame, ledger_notices
from prun.views.model import view
from runkit import py_unit, write_plan

PREFIX = "investigate-the-flaky-integration-suite"   # 40 characters with the dash
assert len(PREFIX + "-") == 40


def render(v, notices=(), *, width=80, height=20, stall_s=600.0, now=None):
    from rich.console import Console

    console = Console(width=width, height=height, file=io.StringIO(), record=True,
                      color_system=None, legacy_windows=False)
    console.print(frame(v, notices, width=width, height=height, stall_s=stall_s, now=now))
    return console.export_text().rstrip("\n").split("\n")


def make_run(repo, ids, **plan_settings):
    plan = write_plan(repo / "plan.yaml", [py_unit(i, "pass") for i in ids], **plan_settings)
    led = Ledger.open()
    run = freeze(load_plan(str(plan)), led)
    return led, run["id"]


def start(led, run_id, pid, status="running", *, executor="command", ago=5.0, **fields):
    aid = f"{run_id}:{pid}:1"
    led.record_attempt(aid, "test", run_id=run_id, packet_id=pid, executor=executor,
                       status=Status.DISPATCHED, receipt="pid:1@1",
                       dispatched_at=now_iso(time.time() - ago), **fields)
    led.set_packet_status(run_id, pid, status, "test")
    return aid


def finish(led, run_id, pid, status, **fields):
    aid = start(led, run_id, pid, "running")
    led.update_attempt(aid, "test", status=status, finished_at=now_iso(), **fields)
    led.set_packet_status(run_id, pid, status, f"{pid} ended: {status}")


@pytest.fixture
def big(repo):
    ids = [f"{PREFIX}-{i:03d}" for i in range(300)]
    led, run_id = make_run(repo, ids)
    for i in range(0, 200):
        start(led, run_id, ids[i])
    for i in range(200, 290):
        finish(led, run_id, ids[i], "succeeded")
    for i in range(290, 295):
        finish(led, run_id, ids[i], "failed", reason="exit-nonzero")
    yield led, run_id, ids
    led.close()


def unit_cells(lines):
    """The first cell of each table row (after the run's line, notices and header)."""
    header = next(i for i, ln in enumerate(lines) if ln.startswith("unit"))
    return [ln.split()[0] for ln in lines[header + 1:] if ln and not ln.startswith("…")]


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_long_ids_sharing_a_prefix_stay_distinct_at_any_width(big, width):
    led, run_id, ids = big
    lines = render(view(led, run_id), width=width, height=60)
    assert all(len(ln) <= width for ln in lines)
    shown = unit_cells(lines)
    assert len(lines) == 60 and len(set(shown)) == len(shown)
    assert lines[-1].startswith(f"… {300 - len(shown)} more: ")
    assert all(s.endswith(i[-3:]) for s, i in zip(shown[:5], ids[290:], strict=False))


def test_counts_and_notices_stay_visible_and_failures_come_first(big):
    led, run_id, ids = big
    notices = [f"{ids[290 + i]}: failed: exit-nonzero" for i in range(5)]
    lines = render(view(led, run_id), notices, width=80, height=20)
    assert len(lines) == 20 and all(len(ln) <= 80 for ln in lines)
    header = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["unit", "state"])
    head = " ".join(lines[:header - 5]).split()
    assert head[3:7] == ["failed=5", "running=200", "pending=5", "succeeded=90"]
    assert lines[header - 5:header] == notices
    rows = lines[header + 1:-1]
    assert [r.split()[1] for r in rows[:5]] == ["failed"] * 5
    assert lines[-1] == (f"… {300 - len(rows)} more: {200 - (len(rows) - 5)} running, "
                         "5 pending, 90 succeeded")
    tiny = render(view(led, run_id), notices, width=50, height=8)
    assert len(tiny) <= 8 and "failed=5" in " ".join(tiny[:3])
    assert tiny[-1].startswith("… ")


def table(lines):
    header = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["unit", "state"])
    return [ln.split() for ln in lines[header + 1:] if not ln.startswith("… ")]


def test_a_stalled_unit_comes_first_too(repo, tmp_path):
    ids = [f"u{i:02d}" for i in range(30)]
    led, run_id = make_run(repo, ids)
    for i, pid in enumerate(ids):
        sd = tmp_path / "sd" / pid
        sd.mkdir(parents=True)
        (sd / "tail").write_text("output\n")
        quiet = 3600 if i in (7, 21, 28) else 1      # three units said nothing for an hour
        os.utime(sd / "tail", (time.time() - quiet, time.time() - quiet))
        start(led, run_id, pid, ago=4000, state_dir=str(sd))
    lines = render(view(led, run_id), width=60, height=10, stall_s=600.0)
    rows = table(lines)
    assert [(r[0], r[1]) for r in rows[:3]] == [("u07", "stalled"), ("u21", "stalled"),
                                                ("u28", "stalled")]
    assert {r[1] for r in rows[3:]} == {"running"}
    assert lines[-1] == f"… {30 - len(rows)} more: {30 - len(rows)} running"
    assert "1h00m ago" in lines[-len(rows) - 1 + 0] or any("1h00m" in ln for ln in lines)


def test_a_column_empty_in_every_row_is_left_out(repo):
    led, run_id = make_run(repo, ["a", "b"])
    finish(led, run_id, "a", "succeeded")
    header = render(view(led, run_id))[1]
    assert header.split() == ["unit", "state", "elapsed", "executor"]    # no model, no cost
    led.update_attempt(f"{run_id}:a:1", model="sonnet", cost_usd=0.0125)
    lines = render(view(led, run_id))
    assert lines[1].split() == ["unit", "state", "elapsed", "executor", "model", "cost"]
    assert lines[3].split() == ["a", "succeeded", "5s", "command", "sonnet", "$0.0125"]


def test_a_narrow_terminal_drops_the_least_useful_columns_first(big):
    led, run_id, _ = big
    lines = render(view(led, run_id), width=30, height=12)
    assert all(len(ln) <= 30 for ln in lines)
    rows = table(lines)
    assert len({r[0] for r in rows}) == len(rows) and [r[1] for r in rows[:5]] == ["failed"] * 5
    header = next(ln for ln in lines if ln.startswith("unit"))
    assert header.split() == ["unit", "state"] or header.split() == ["unit", "state", "elapsed"]


def test_notices_from_the_ledger(big):
    led, run_id, ids = big
    got = ledger_notices(led, run_id)
    assert len(got) == 5 and got[-1] == f"{ids[294]}: failed: {ids[294]} ended: failed"


def test_names_in_the_view_never_drive_the_terminal(repo):
    """A model name or a notice holding escape sequences (a title change, a screen clear, an
    OSC 52 clipboard write) or rich markup is shown as text, its control characters escaped."""
    from rich.console import Console

    led, run_id = make_run(repo, ["a", "b"])
    evil = "m\x1b]0;pwned\x07\x1b[2J\x1b]52;c;eA==\x07[link=file:///etc]x[/link]"
    start(led, run_id, "a", model=evil)
    finish(led, run_id, "b", "failed")
    out = io.StringIO()
    console = Console(width=200, height=20, file=out, force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    console.print(frame(view(led, run_id), [f"b: failed: {evil}\nsecond line"],
                        width=200, height=20))
    text = out.getvalue()
    assert "\x1b]" not in text and "\x07" not in text and "\x1b[2J" not in text
    assert "\\033]0;pwned\\a" in text and "[link=file:///etc]" in text
