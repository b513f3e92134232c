"""The example probes in examples/probes/ honour the probe contract, run through prun itself."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

from prun import executors, quota

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "probes"


def configure(q, probes: dict[str, list[str]]) -> None:
    lines = ["[quota.probes]"]
    for group, args in probes.items():
        lines.append(f"{group} = {json.dumps([sys.executable, *args])}")
    q.config.write_text("\n".join(lines) + "\n")


def test_claude_headers_probe(q, tmp_path):
    headers = tmp_path / "headers.txt"
    headers.write_text("HTTP/2 200\r\n"
                       "anthropic-ratelimit-requests-limit: 50\r\n"
                       "anthropic-ratelimit-requests-remaining: 40\r\n"
                       "anthropic-ratelimit-requests-reset: 2031-01-01T00:01:00Z\r\n"
                       "anthropic-ratelimit-tokens-limit: 400000\r\n"
                       "anthropic-ratelimit-tokens-remaining: 100000\r\n"
                       "anthropic-ratelimit-tokens-reset: 2031-01-01T00:05:00Z\r\n")
    configure(q, {"claude": [str(EXAMPLES / "claude.py"), str(headers)]})
    s = quota.group_states(known=executors.quota_groups())["claude"]
    assert s.left == 0.25 and s.resets_at == "2031-01-01T00:05:00Z"
    assert s.source == "probe:ratelimit headers (tokens)"


def test_agy_probe_serves_both_groups(q, tmp_path):
    export = tmp_path / "agy.json"
    export.write_text(json.dumps({"models": [
        {"model": "gemini-3.8-flash-high", "left": 0.62, "resets_at": "2031-01-01T05:00:00Z"},
        {"model": "gemini-3.8-pro", "left": 0.4, "resets_at": "2031-01-01T06:00:00Z"},
        {"model": "claude-sonnet-4-6", "left": 0.0, "resets_in": 2040},
    ]}))
    script = str(EXAMPLES / "agy.py")
    configure(q, {"agy-gemini": [script, str(export)],
                  "agy-claude-gpt": [script, "--group", "agy-claude-gpt", str(export)]})
    states = quota.group_states(known=executors.quota_groups())
    assert states["agy-gemini"].left == 0.4
    assert states["agy-gemini"].resets_at == "2031-01-01T06:00:00Z"
    assert states["agy-claude-gpt"].empty


def test_gemini_counter_probe(q, tmp_path):
    from zoneinfo import ZoneInfo

    today = dt.datetime.now(ZoneInfo("America/Los_Angeles")).date().isoformat()
    counter = tmp_path / "counter.json"
    counter.write_text(json.dumps({"date": today, "requests": 750}))
    configure(q, {"gemini": [str(EXAMPLES / "gemini.py"), "--limit", "1000", str(counter)]})
    s = quota.group_states(known=executors.quota_groups())["gemini"]
    assert s.left == 0.25 and s.resets_at and not s.empty


def test_examples_report_errors_not_readings(q, tmp_path):
    missing = str(tmp_path / "nope")
    configure(q, {"claude": [str(EXAMPLES / "claude.py"), missing],
                  "agy-gemini": [str(EXAMPLES / "agy.py"), missing],
                  "gemini": [str(EXAMPLES / "gemini.py"), "--limit", "5", missing]})
    states = quota.group_states(known=executors.quota_groups())
    for g in ("claude", "agy-gemini", "gemini"):
        assert not states[g].known and "reported error" in states[g].error
