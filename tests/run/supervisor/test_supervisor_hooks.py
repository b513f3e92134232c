"""The on_event hooks live in a scope: no hook process outlives it, those past its bound are
ended, and nothing fired after it is run."""

from __future__ import annotations

import asyncio
import os

from prun.run.event_hooks import EventHooks
from prun.run.events import Event


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_no_hook_outlives_its_scope(tmp_path):
    started = tmp_path / "started"
    command = f'echo "$$ $PRUN_PACKET_ID" >> {started}; exec sleep 120'
    log = tmp_path / "hooks.log"
    env = {"PATH": os.environ["PATH"], "PRUN_HOOK_TIMEOUT": "0.5"}

    async def run() -> None:
        async with EventHooks(command, str(log), env) as hooks:
            hooks.fire(Event("dispatched", "run-1", packet_id="quiet"))   # not actionable
            for i in range(20):  # four at a time, each ended at its timeout: more than the
                hooks.fire(Event("failed", "run-1", packet_id=f"p{i}"))  # bound allows
        hooks.fire(Event("failed", "run-1", packet_id="late"))

    asyncio.run(run())
    lines = [line.split() for line in started.read_text().splitlines()]
    assert lines and all(packet.startswith("p") for _, packet in lines)
    assert not [pid for pid, _ in lines if _alive(int(pid))]
    text = log.read_text()
    assert "hook for failed ended after 0.5 s" in text
    assert "hooks still running 1.5 s after the run were ended" in text
