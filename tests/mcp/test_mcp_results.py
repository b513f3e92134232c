"""How a command's exit becomes a tool result (prun.mcp.tools), the terse-line reader
(prun.mcp.lines), and the child that returns a command's --json and its lines together
(prun.cli.capture)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from prun.mcp import lines, tools


def test_lines_are_read_with_their_quoted_values():
    rec = lines.parse('EVENT 12 failed packet=a status=timeout cause="ran past 45m (the unit\'s '
                      'timeout) \\"x\\"" resets_at=2026-12-01T10:00:00Z')
    assert rec == {"word": "EVENT", "args": ["12", "failed"], "packet": "a",
                   "status": "timeout", "cause": "ran past 45m (the unit's timeout) \"x\"",
                   "resets_at": "2026-12-01T10:00:00Z"}
    assert lines.parse("") == {"word": "", "args": []}
    assert lines.first(["RUN r1 status=running", "CURSOR 7"], "CURSOR") == \
        {"word": "CURSOR", "args": ["7"]}


@pytest.mark.parametrize(("tool", "code", "out", "err", "error"), [
    ("wait", 4, ["EVENT 3 failed packet=a", "RUN r", "CURSOR 3"], "", False),
    ("wait", 124, ["RUN r", "CURSOR 0"], "", False),
    ("reconcile", 10, ["REVIEW a reason=unfinished"], "", False),
    ("integrate", 11, ["CONFLICT a path=x with=b"], "", False),
    ("check", 1, ["FAIL files a b path=x"], "", False),
    ("dispatch", 1, ["STATE-DIR /s"], "prun: unit u failed (exit-nonzero): code 3\n", False),
    ("status", 2, [], "prun: no run 'x' in the ledger (`prun ledger` lists the runs)\n", True),
    ("reconcile", 1, [], "prun: the ledger is unreadable (check it)\n", True),
    ("wait", 70, [], "Traceback ...\nprun: internal error (a bug): please report it\n", True),
    ("run", 1, ["FAIL files a b path=x"], "prun: the plan fails the independence test\n", True),
    ("status", 130, [], "", True),
])
def test_a_state_is_a_result_and_an_error_is_one_line(tool, code, out, err, error):
    got = tools.outcome(tools.SPECS[tool], code, out, err)
    assert got.error is error
    if error:
        first = got.text.splitlines()[0]
        assert first.startswith("prun: ") and got.structured["error"] == first
        assert got.text.splitlines()[1:] == out
    else:
        assert got.text == "\n".join(out)
        assert got.structured["exit_code"] == code
        assert got.structured["exit_name"] == tools.exit_name(code)
        assert got.structured["lines"] == out


def test_a_json_list_goes_under_rows_and_an_object_is_merged():
    spec = tools.SPECS["ledger"]
    assert tools.outcome(spec, 0, ["RUN id=r"], "", data=[{"id": "r"}]).structured["rows"] == \
        [{"id": "r"}]
    merged = tools.outcome(tools.SPECS["status"], 0, ["RUN r"], "", data={"run": {"id": "r"}})
    assert merged.structured["run"] == {"id": "r"} and merged.structured["lines"] == ["RUN r"]


def capture(*argv: str, cwd) -> dict:
    p = subprocess.run([sys.executable, "-m", "prun.cli.capture", json.dumps({"argv": argv})],
                       capture_output=True, text=True, timeout=120, cwd=cwd)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_capture_returns_the_json_and_the_lines_of_one_command(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"packets": [
        {"id": "a", "executor": "command", "command": ["true"], "prompt": "a",
         "kind": "code", "owns": ["x.txt"]},
        {"id": "b", "executor": "command", "command": ["true"], "prompt": "b",
         "kind": "code", "owns": ["x.txt"]}]}))
    got = capture("check", str(plan), "--no-git", cwd=tmp_path)
    assert got["exit_code"] == 1
    assert json.loads(got["json"])["failures"][0]["rule"] == "files"
    plain = subprocess.run([sys.executable, "-m", "prun", "check", str(plan), "--no-git"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert got["lines"] == plain.stdout.splitlines()
    bad = capture("status", "nosuch", cwd=tmp_path)
    assert (bad["exit_code"], bad["lines"], bad["json"]) == (2, None, "")
    assert bad["stderr"].startswith("prun: no run 'nosuch'")
