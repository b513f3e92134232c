"""Built-in probes: `prun quota` reads agy's pools through agy's print-mode /quota with no
probe configured (a fake agy printing the envelope public code reads), and reports Claude
Code's pool as unknown, never a guess; a configured probe still wins, and
PRUN_QUOTA_BUILTIN=off turns the built-ins off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import calls, make_fake_cli, prun

FAKE = Path(__file__).parent / "fake_agy_slash_quota.py"
ENVELOPE = {"status": "SUCCESS", "command": {"data": {"groups": [
    {"name": "Gemini Models", "buckets": [
        {"id": "gemini-5h", "name": "5 hour", "window": "5h", "remaining_fraction": 0.8,
         "reset_time": "2030-01-01T05:00:00Z"},
        {"id": "gemini-weekly", "name": "Weekly", "window": "weekly",
         "remaining_fraction": 0.25, "reset_time": "2030-01-07T00:00:00Z"}]},
    {"name": "Claude and GPT models", "buckets": [
        {"id": "3p-weekly", "name": "Weekly", "window": "weekly", "remaining_fraction": 0,
         "reset_time": "2030-01-03T00:00:00Z"}]}]}}}


@pytest.fixture
def agy(tmp_path, monkeypatch):
    monkeypatch.setenv("PRUN_AGY_BIN", str(make_fake_cli(tmp_path / "bin", "agy", FAKE)))
    monkeypatch.setenv("FAKE_AGY_LOG", str(tmp_path / "agy.jsonl"))
    monkeypatch.setenv("PRUN_QUOTA_BUILTIN", "on")
    return tmp_path / "agy.jsonl"


def _groups(*args):
    r = prun("quota", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["groups"]


def test_agy_pools_are_read_through_its_slash_quota(agy, monkeypatch):
    monkeypatch.setenv("FAKE_AGY_QUOTA", json.dumps(ENVELOPE))
    groups = _groups()
    gemini, other = groups["agy-gemini"], groups["agy-claude-gpt"]
    assert (gemini["left"], gemini["resets_at"], gemini["state"]) == \
        (0.25, "2030-01-07T00:00:00Z", "ok")
    assert gemini["source"] == "probe:agy /quota weekly"
    assert (other["left"], other["state"], other["resets_at"]) == \
        (0.0, "empty", "2030-01-03T00:00:00Z")
    assert all(c["argv"] == ["-p", "/quota", "--output-format", "json"] for c in calls(agy))
    claude = groups["claude"]
    assert claude["state"] == "unknown" and "5-hour and 7-day" in claude["error"]


@pytest.mark.parametrize("printed", [
    {"status": "ERROR", "error": "authentication required. Run agy to log in"},
    {"status": "SUCCESS", "command": {"data": {"windows": []}}},
    "not json"])
def test_what_it_cannot_read_stays_unknown(agy, monkeypatch, printed):
    monkeypatch.setenv("FAKE_AGY_QUOTA", printed if isinstance(printed, str)
                       else json.dumps(printed))
    gemini = _groups()["agy-gemini"]
    assert gemini["state"] == "unknown" and gemini["left"] is None and gemini["error"]


def test_a_configured_probe_wins_and_off_turns_them_off(agy, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_AGY_QUOTA", json.dumps(ENVELOPE))
    monkeypatch.setenv("PRUN_QUOTA_BUILTIN", "off")
    assert _groups()["agy-gemini"]["state"] == "unknown" and not calls_made(agy)
    monkeypatch.setenv("PRUN_QUOTA_BUILTIN", "on")
    (tmp_path / "config.toml").write_text(
        '[quota.probes]\nagy-gemini = ["echo", "{\\"left\\": 0.5}"]\n')
    groups = _groups("--refresh")
    assert groups["agy-gemini"]["left"] == 0.5
    assert groups["agy-claude-gpt"]["left"] == 0.0


def calls_made(log: Path) -> list[dict]:
    return calls(log) if log.exists() else []


def test_a_probe_that_reads_nothing_leaves_a_quota_hit_standing(monkeypatch):
    # Claude Code's built-in probe always reads "unknown": re-reading after a quota error must
    # not erase the hit the run just recorded (its reset estimated: none in the error)
    from prun import executors
    from prun.quota import after_backend_failure, record_hit

    monkeypatch.setenv("PRUN_QUOTA_BUILTIN", "on")
    record_hit("claude", None, "usage limit reached")
    after_backend_failure(["claude"], probe_of=executors.quota_probe)
    claude = _groups()["claude"]
    assert claude["left"] == 0.0 and claude["source"] == "hit", claude
