"""``prun quota`` (and ``agent-quota``): lines, JSON, refresh, exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from quota_helpers import entry, runs

from helpers import prun

LINE = re.compile(r"^QUOTA group=(\S+) state=(ok|empty|unknown) left=(\S+) resets=(\S+) "
                  r"age=(\S+) source=(\S+|\"[^\"]*\")( error=\".*\")?$")


def parse(stdout: str) -> dict:
    rows = {}
    for line in stdout.splitlines()[:-1]:
        m = LINE.match(line)
        assert m, line
        rows[m.group(1)] = m.groups()
    return rows


def test_lines_for_every_group(q):
    q.write_snapshot({"agy-gemini": entry(0.0, resets_in=600, age_s=65, source="hit"),
                      "claude": entry(0.42, age_s=5)})
    proc = prun("quota")
    assert proc.returncode == 0, proc.stderr
    rows = parse(proc.stdout)
    assert list(rows)[:4] == ["claude", "agy-gemini", "agy-claude-gpt", "gemini"]
    assert rows["agy-gemini"][1:3] == ("empty", "0.00")
    assert re.fullmatch(r"1m0\ds", rows["agy-gemini"][4]) and rows["agy-gemini"][5] == "hit"
    assert rows["claude"][1:3] == ("ok", "0.42")
    assert rows["gemini"][1:5] == ("unknown", "unknown", "unknown", "never")
    last = proc.stdout.splitlines()[-1]
    assert re.match(r"SNAPSHOT age=1\ds ttl=5m00s path=", last)
    assert last.endswith(str(q.snapshot))


def test_json(q):
    q.write_snapshot({"agy-claude-gpt": entry(0.0, resets_in=600)})
    proc = prun("quota", "--json")
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    g = data["groups"]["agy-claude-gpt"]
    assert g["state"] == "empty" and g["left"] == 0.0 and 5 <= g["age_s"] <= 60
    assert data["groups"]["claude"]["state"] == "unknown"
    assert data["snapshot"] == str(q.snapshot) and data["ttl_s"] == 300
    assert data["problem"] is None


def test_refresh_runs_probes_now(q):
    count = q.probe("claude", json={"left": 0.25, "source": "test meter"})
    q.write_snapshot({"claude": entry(0.9, age_s=1)})
    assert parse(prun("quota").stdout)["claude"][2] == "0.90"
    assert runs(count) == 0
    rows = parse(prun("quota", "--refresh").stdout)
    assert rows["claude"][2] == "0.25" and rows["claude"][5] == '"probe:test meter"'
    assert runs(count) == 1


def test_probe_error_is_shown(q):
    q.probe("gemini", raw="garbage")
    rows = parse(prun("quota").stdout)
    assert rows["gemini"][1] == "unknown" and "not a JSON object" in rows["gemini"][6]


def test_group_filter(q):
    q.write_snapshot({"claude": entry(0.5)})
    out = prun("quota", "--group", "claude", "--group", "nope").stdout.splitlines()
    assert [ln.split()[1] for ln in out[:-1]] == ["group=claude", "group=nope"]


def test_unreadable_snapshot_is_reported_not_fatal(q):
    q.write_raw('{"groups": ')
    proc = prun("quota")
    assert proc.returncode == 0
    assert 'problem="not valid JSON' in proc.stdout.splitlines()[-1]
    assert json.loads(prun("quota", "--json").stdout)["problem"].startswith("not valid JSON")


def test_bad_config_is_exit_2(q):
    q.config.write_text("[quota]\nttl = true\n")
    proc = prun("quota")
    assert proc.returncode == 2
    assert proc.stderr.startswith("prun: ") and "quota.ttl" in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_agent_quota_is_prun_quota(q):
    q.write_snapshot({"claude": entry(0.5)})
    proc = subprocess.run([sys.executable, "-c",
                           "import sys; sys.argv[0] = 'agent-quota'; "
                           "from prun.cli import agent_quota_main; agent_quota_main()", "--json"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["groups"]["claude"]["left"] == 0.5


def test_listed_in_help():
    assert "quota" in prun("--help").stdout
