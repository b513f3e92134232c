"""Probe commands: the output contract, failures that leave a group unknown, TTL and forcing."""

from __future__ import annotations

import json
import sys
import time

import psutil
import pytest
from quota_helpers import entry, iso, runs

from prun import executors, quota
from prun.executors import get as get_executor


def state(group):
    return quota.group_states(known=executors.quota_groups())[group]


def test_probe_reading_recorded(q):
    q.probe("claude", json={"left": 0.42, "resets_at": "2031-05-01T10:00:00+02:00",
                            "source": "usage page"})
    s = state("claude")
    assert s.left == 0.42 and s.resets_at == "2031-05-01T08:00:00Z"
    assert s.source == "probe:usage page" and s.error is None
    assert q.read_snapshot()["groups"]["claude"]["left"] == 0.42


def test_remaining_and_limit_and_resets_in(q):
    q.probe("agy-gemini", json={"remaining": 25, "limit": 100, "resets_in": 3600})
    s = state("agy-gemini")
    assert s.left == 0.25
    assert s.resets_at[:15] == iso(3600)[:15]


def test_probe_saying_zero_makes_group_empty(q):
    q.probe("gemini", json={"group": "gemini", "left": 0, "resets_in": 600})
    assert state("gemini").empty


FAILURES = {
    "nonzero-exit": ({"json": {"left": 0.0}, "exit": 3, "stderr": "meter offline"},
                     "probe exited 3: meter offline"),
    "garbage": ({"raw": "Remaining: lots\n"}, "not a JSON object"),
    "nothing": ({"raw": ""}, "printed nothing"),
    "a-list": ({"raw": "[0.0]"}, "not a JSON object"),
    "string-for-number": ({"json": {"left": "0"}}, "left='0' is not a number"),
    "out-of-range": ({"json": {"left": -1}}, "outside 0..1"),
    "no-left": ({"json": {"resets_in": 5}}, "no left"),
    "bad-reset": ({"json": {"left": 0, "resets_at": "soon"}}, "not an ISO 8601 time"),
    "wrong-group": ({"json": {"group": "claude", "left": 0}}, "reports group 'claude'"),
    "reported-error": ({"json": {"error": "not logged in", "left": 0}},
                       "reported error: not logged in"),
    "zero-limit": ({"json": {"remaining": 0, "limit": 0}}, "do not make a fraction"),
}


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_failed_probe_leaves_group_unknown_never_empty(q, name):
    spec, expected = FAILURES[name]
    q.write_snapshot({"agy-gemini": entry(0.8, age_s=3600)})  # an old reading: due for refresh
    q.probe("agy-gemini", **spec)
    s = state("agy-gemini")
    assert not s.known and not s.empty
    assert expected in s.error
    assert s.read_at  # the attempt is recorded, so it is not retried on every call


def test_probe_that_cannot_start(q):
    q.probe("claude", json={"left": 1})
    q.config.write_text('[quota.probes]\nclaude = ["/nonexistent/probe-binary"]\n')
    s = state("claude")
    assert not s.known and "could not start" in s.error


def test_json_after_chatter_uses_last_line(q):
    q.probe("claude", raw='checking the meter...\n{"left": 0.5}\n')
    assert state("claude").left == 0.5


def test_hanging_probe_is_killed_with_its_group(q, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    q.set("probe_timeout", "1s")
    q.probe("agy-claude-gpt", hang=True, grandchild=str(pidfile))
    started = time.monotonic()
    s = state("agy-claude-gpt")
    assert time.monotonic() - started < 10
    assert not s.known and "timed out after 1s" in s.error
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the probe's grandchild survived")


def test_fresh_reading_is_not_reprobed(q):
    count = q.probe("claude", json={"left": 0.5})
    q.write_snapshot({"claude": entry(0.7, age_s=60)})
    assert state("claude").left == 0.7
    assert runs(count) == 0


def test_stale_reading_is_reprobed(q):
    count = q.probe("claude", json={"left": 0.5})
    q.write_snapshot({"claude": entry(0.7, age_s=301)})
    assert state("claude").left == 0.5
    assert runs(count) == 1
    assert state("claude").left == 0.5
    assert runs(count) == 1  # now fresh


def test_ttl_is_configurable(q):
    count = q.probe("claude", json={"left": 0.5})
    q.set("ttl", "30s")
    q.write_snapshot({"claude": entry(0.7, age_s=60)})
    assert state("claude").left == 0.5 and runs(count) == 1


def test_groups_without_probe_are_not_refreshed(q):
    count = q.probe("claude", json={"left": 0.5})
    q.write_snapshot({"claude": entry(0.7, age_s=10), "gemini": entry(0.2, age_s=9999)})
    assert state("gemini").left == 0.2
    assert runs(count) == 0


def test_backend_failure_forces_refresh_past_ttl(q):
    count = q.probe("agy-gemini", json={"left": 0.3})
    other = q.probe("agy-claude-gpt", json={"left": 0.6})
    claude = q.probe("claude", json={"left": 0.9})
    q.write_snapshot({"agy-gemini": entry(0.9, age_s=5), "agy-claude-gpt": entry(0.9, age_s=5)})
    quota.after_backend_failure(get_executor("agy").quota_groups(), env=None)
    assert runs(count) == 1 and runs(other) == 1
    assert runs(claude) == 0  # only the failed executor's groups
    groups = q.read_snapshot()["groups"]
    assert groups["agy-gemini"]["left"] == 0.3 and groups["agy-claude-gpt"]["left"] == 0.6


def test_backend_failure_without_probes_does_nothing(q):
    quota.after_backend_failure(get_executor("agy").quota_groups(), env=None)
    assert not q.snapshot.exists()


def test_hit_stands_against_a_later_probe_until_it_resets(q):
    q.probe("agy-gemini", json={"left": 0.7})
    quota.record_hit("agy-gemini", iso(1800), "Resets in 30m.", env=None)
    quota.after_backend_failure(get_executor("agy").quota_groups(), env=None)
    s = state("agy-gemini")
    assert s.empty and s.source == "hit"


def test_probe_replaces_a_hit_whose_reset_was_only_estimated(q):
    q.probe("claude", json={"left": 0.7})
    quota.record_hit("claude", None, "usage limit", env=None)
    quota.current(None, ["claude"], force=True)
    s = state("claude")
    assert s.left == 0.7 and s.source == "probe"


def test_probe_replaces_a_hit_past_its_reset(q):
    count = q.probe("agy-gemini", json={"left": 0.7})
    q.write_snapshot({"agy-gemini": entry(0.0, resets_in=-60, age_s=3600, source="hit")})
    assert state("agy-gemini").left == 0.7 and runs(count) == 1


def test_unreadable_snapshot_is_repaired_by_probes(q):
    q.write_raw('{"groups": {"claude": {"left": 0.1')
    q.probe("claude", json={"left": 0.8})
    assert state("claude").left == 0.8
    assert q.read_snapshot()["groups"]["claude"]["left"] == 0.8


def test_bad_config_warns_and_reads_snapshot(q, capsys):
    q.write_snapshot({"claude": entry(0.4)})
    q.config.write_text("[quota\nprobes = 3\n")
    assert state("claude").left == 0.4
    err = capsys.readouterr().err
    assert "not valid TOML" in err and err.startswith("prun: warning:")


def test_probe_printing_past_the_cap_fails_and_is_ended(q):
    from prun.quota.probes import MAX_OUTPUT

    q.probe("claude", json={"left": 1})
    flood = "import sys, time\nwhile True:\n    sys.stdout.write('x' * 65536)\n    sys.stdout.flush()\n"
    q.config.write_text(f"[quota.probes]\nclaude = {json.dumps([sys.executable, '-c', flood])}\n")
    started = time.monotonic()
    s = state("claude")
    assert time.monotonic() - started < 10
    assert not s.known and f"printed more than {MAX_OUTPUT} bytes" in s.error


class _Interrupted(BaseException):
    pass


def test_interrupted_caller_kills_the_running_probes(q, tmp_path):
    import os
    import signal

    from prun.quota.probes import run_all

    pidfile = tmp_path / "grandchild.pid"
    q.probe("claude", hang=True, grandchild=str(pidfile))

    def interrupt(signum, frame):
        raise _Interrupted

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 2.0)
        with pytest.raises(_Interrupted):
            run_all({"claude": [sys.executable, str(q.script)]}, 60, dict(os.environ))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    else:
        pytest.fail("the interrupted probe's grandchild survived")
