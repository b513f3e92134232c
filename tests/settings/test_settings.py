"""The settings: every variable prun reads, checked once, before any command makes anything."""

from __future__ import annotations

import json

import pytest

from helpers import prun
from prun import settings
from prun.errors import UsageError


def test_durations_read_as_people_write_them():
    s = settings.load({"PRUN_STALL_THRESHOLD": "10m", "PRUN_KILL_GRACE_SECONDS": "0.5",
                       "PRUN_HOOK_TIMEOUT": "1m30s", "PRUN_WATCH": "POLL",
                       "PRUN_MCP_TIMEOUT": "15m"})
    assert (s.stall_s, s.kill_grace_s, s.hook_timeout_s, s.watch_mode, s.mcp_timeout_s) == \
        (600, 0.5, 90, "poll", 900)
    d = settings.load({})
    assert (d.stall_s, d.kill_grace_s, d.sandbox, d.port_start, d.port_count,
            d.mcp_timeout_s) == (600, 5, "auto", 20000, 10, 600)


@pytest.mark.parametrize("name, value", [
    ("PRUN_STALL_THRESHOLD", "soon"), ("PRUN_STALL_THRESHOLD", "0"),
    ("PRUN_KILL_GRACE_SECONDS", "-1"), ("PRUN_HOOK_TIMEOUT", "x"), ("PRUN_SANDBOX", "maybe"),
    ("PRUN_WATCH", "fast"), ("PRUN_WATCH_POLL_INTERVAL", "0"), ("PRUN_PORT_START", "80"),
    ("PRUN_PORT_COUNT", "lots"), ("PRUN_GATHER_TIMEOUT", "1 hour"),
    ("PRUN_TIMEOUT_GRACE_SECONDS", "later"), ("PRUN_STABLE_WINDOW", "-"),
    ("PRUN_MCP_TIMEOUT", "0"), ("PRUN_MCP_TIMEOUT", "never")])
def test_a_bad_value_is_one_line_and_exit_2_before_anything_is_made(name, value, repo):
    with pytest.raises(UsageError) as err:
        settings.load({name: value})
    assert name in err.value.message
    for args in (["status"], ["run", "plan.yaml"], ["ledger"]):
        r = prun(*args, env={name: value})
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert r.stderr.startswith(f"prun: {name}=")
    assert not (repo / ".prun" / "runs").exists()


def test_a_stall_threshold_written_as_a_duration_runs(repo):
    (repo / "plan.yaml").write_text(json.dumps({"packets": [{
        "id": "a", "executor": "command", "command": ["echo", "a result that is long enough"],
        "prompt": "x"}]}))
    r = prun("run", "plan.yaml", env={"PRUN_STALL_THRESHOLD": "10m"})
    assert r.returncode == 0, r.stdout + r.stderr
