"""`prun status RUN --watch` / `prun top RUN`: a detached run followed from another process
until it ends; and what `prun status` says of a parked unit and of a session unit waiting for
its receipt. The units wait on files the test creates: nothing here sleeps."""

from __future__ import annotations

import json
import os
import pty
import queue
import signal
import struct
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from helpers import prun
from prun._util.timeparse import epoch
from runkit import py_unit, write_plan

LONG = "a result that is long enough to count as one, " * 3


def gated(pid: str, gate: Path, code: str = "") -> dict:
    return py_unit(pid, f"import os, time\nwhile not os.path.exists({str(gate)!r}): "
                        f"time.sleep(0.02)\n{code or f'print({LONG!r})'}")


class Lines:
    """A child's stdout read line by line in a thread; ``snapshot()`` waits (bounded) for
    the next status snapshot, which ends with its RESULTS line."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.q = proc, queue.Queue()
        self.all: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def snapshot(self) -> list[str]:
        out = []
        while True:
            line = self.q.get(timeout=60)
            assert line is not None, f"ended after {self.all}"
            self.all.append(line)
            out.append(line)
            if line.startswith("RESULTS "):
                return out

    def end(self) -> list[str]:
        """Every line up to the end of the output."""
        while (line := self.q.get(timeout=60)) is not None:
            self.all.append(line)
        return self.all

    def until(self, check) -> list[str]:
        while not check(snap := self.snapshot()):
            pass
        return snap


def _watch(*args):
    return subprocess.Popen([sys.executable, "-m", "prun", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_watch_without_a_terminal_prints_a_snapshot_per_change_until_the_run_ends(repo, tmp_path):
    gates = {p: tmp_path / f"gate-{p}" for p in ("first", "second")}
    plan = write_plan(repo / "plan.yaml", [gated(p, g) for p, g in gates.items()])
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    w = _watch("status", run_id, "--watch", "--all")
    lines = Lines(w)
    first = lines.snapshot()
    assert first[0].startswith(f"RUN {run_id} status=running")
    gates["first"].touch()
    snap = lines.until(lambda s: any(ln.startswith("UNIT first succeeded") for ln in s))
    assert any(ln.startswith("UNIT second running") for ln in snap)
    gates["second"].touch()
    w.wait(timeout=60)
    final = lines.end()[-4:]
    assert w.returncode == 0, [*lines.all, w.stderr.read()]
    assert final[0].startswith(f"RUN {run_id} status=succeeded")
    assert final[-1].startswith("RESULTS ")
    assert not any("\x1b" in ln for ln in lines.all)         # no terminal frames
    assert all(ln.split()[0] in ("RUN", "UNIT", "COST", "RESULTS") for ln in lines.all)


def test_watch_exits_with_the_runs_code_and_ctrl_c_leaves_the_run_alone(repo, tmp_path):
    gate = tmp_path / "gate"
    plan = write_plan(repo / "plan.yaml", [gated("bad", gate, "raise SystemExit(3)")])
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    w = _watch("top", run_id)
    lines = Lines(w)
    lines.snapshot()
    w.send_signal(signal.SIGINT)
    w.wait(timeout=60)
    assert w.returncode == 130
    assert "status=running" in prun("status", run_id).stdout    # the run goes on
    w = _watch("top", run_id)
    lines = Lines(w)
    lines.snapshot()
    gate.touch()
    w.wait(timeout=60)
    lines.end()
    assert w.returncode == 1
    assert lines.all[-3].startswith(f"RUN {run_id} status=failed")
    assert lines.all[-2].startswith("UNIT bad failed")


def test_watch_refuses_json_and_an_unknown_run(repo):
    r = prun("status", "--watch", "--json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--watch" in r.stderr
    r = prun("top", "no-such-run")
    assert r.returncode == 2 and r.stderr.startswith("prun: no run")


def test_top_on_a_terminal_shows_the_live_view_then_the_summary(repo, tmp_path):
    gate = tmp_path / "gate"
    ids = [f"{'review-the-long-module-name-of-the-parser'}-{i:02d}" for i in range(12)]
    plan = write_plan(repo / "plan.yaml", [gated(i, gate) for i in ids])
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    master, slave = pty.openpty()
    import fcntl
    import termios

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 15, 50, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    w = subprocess.Popen([sys.executable, "-m", "prun", "top", run_id], stdin=slave,
                         stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    seen = bytearray()
    framed = threading.Event()

    def read():
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)
            if b"review-" in seen:
                framed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert framed.wait(60), bytes(seen)
    gate.touch()
    w.wait(timeout=60)
    reader.join(10)
    os.close(master)
    text = bytes(seen).decode("utf-8", "replace")
    assert w.returncode == 0, text + w.stderr.read().decode()
    assert "\x1b[" in text                                    # a terminal frame was drawn
    assert f"prun {run_id}" in text
    assert all(len(line) <= 50 for line in _plain(text).splitlines() if "review" in line)
    assert f"RUN {run_id} status=succeeded" in text           # then the summary lines


def _plain(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")


def _iso(seconds_from_now: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def test_status_shows_a_parked_units_reset_time(repo, fake_agy, tmp_path):
    resets = _iso(3600)
    (tmp_path / "quota.json").write_text(json.dumps({"version": 1, "groups": {"agy-gemini": {
        "left": 0.0, "resets_at": resets, "read_at": _iso(0), "source": "probe"}}}))
    plan = write_plan(repo / "plan.yaml", [{"id": "research", "executor": "agy",
                                            "prompt": "look something up"}])
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    try:
        w = prun("wait", run_id, "--timeout", "60")
        assert w.returncode == 6, w.stdout + w.stderr
        s = prun("status", run_id)
        (line,) = [ln for ln in s.stdout.splitlines() if ln.startswith("UNIT research")]
        words = line.split()
        assert words[:3] == ["UNIT", "research", "parked"]
        assert words[-1].startswith("parked_until=")     # the pool's reset, from its snapshot
        assert epoch(words[-1].split("=", 1)[1]) == epoch(resets)
        unit = json.loads(prun("status", run_id, "--json").stdout)["units"][0]
        assert epoch(unit["parked_until"]) == epoch(resets) and unit["waiting"] is None
    finally:
        prun("cancel", run_id)


def test_status_shows_a_session_unit_waiting_for_its_receipt(repo):
    plan = write_plan(repo / "plan.yaml", [{"id": "mail", "executor": "session",
                                            "session_tools": True, "prompt": "read my mail"}])
    run_id = prun("run", str(plan), "--detach").stdout.split()[1]
    try:
        w = prun("wait", run_id, "--timeout", "60")
        assert w.returncode == 9, w.stdout + w.stderr
        s = prun("status", run_id)
        (line,) = [ln for ln in s.stdout.splitlines() if ln.startswith("UNIT mail")]
        assert line.split()[2] == "running" and line.endswith(" waiting=receipt")
        unit = json.loads(prun("status", run_id, "--json").stdout)["units"][0]
        assert unit["waiting"] == "receipt"
        state_dir = next(a for a in json.loads(prun("status", run_id, "--json").stdout)
                         ["attempts"])["state_dir"]
        assert prun("receipt", state_dir, "--attempt-id", "agent-7").returncode == 0
        # once the receipt is in the state dir the unit no longer waits for it
        unit = json.loads(prun("status", run_id, "--json").stdout)["units"][0]
        assert unit["waiting"] is None
    finally:
        prun("cancel", run_id)



def test_status_shows_the_reset_of_a_unit_parked_by_a_quota_stop(repo, fake_agy):
    plan = write_plan(repo / "plan.yaml", [{"id": "research", "executor": "agy",
                                            "prompt": "look something up"}])
    run_id = prun("run", str(plan), "--detach",
                  env={"FAKE_AGY_SCENARIO": "quota"}).stdout.split()[1]
    try:
        w = prun("wait", run_id, "--timeout", "60")
        assert w.returncode == 6, w.stdout + w.stderr
        (line,) = [ln for ln in prun("status", run_id).stdout.splitlines()
                   if ln.startswith("UNIT research")]
        words = dict(w.split("=", 1) for w in line.split()[3:] if "=" in w)
        assert line.split()[2] == "parked"
        resets = epoch(words["resets_at"])                 # the attempt's: "Resets in 34m"
        assert resets == epoch(words["parked_until"])
        assert resets - epoch(json.loads(prun("status", run_id, "--json").stdout)
                              ["attempts"][0]["finished_at"]) > 30 * 60
    finally:
        prun("cancel", run_id)
