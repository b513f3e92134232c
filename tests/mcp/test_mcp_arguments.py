"""MCP arguments are data: an id that looks like a flag, a huge or control-laden value, a blank
id, a plan that is a device, a FIFO or a YAML bomb. Each is refused in one line that names the
argument, what is wrong and the fix, before anything runs; nothing is done to the run; and a
call that runs too long, or whose child something else ended, says so in words."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcpkit import call, cli, connect, git, make_repo, unit, write_plan  # skips without mcp

from helpers import poll

MCPError = pytest.importorskip("mcp.shared.exceptions").MCPError

# 9 levels of 9 aliases: about 387 million strings once expanded
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
    for a, b in zip("abcdefgh", "bcdefghi", strict=True)) + "packets: *i\n"


@pytest.fixture
def repo(tmp_path):
    root = make_repo(tmp_path / "repo")
    write_plan(root / "plan.json", [
        unit("a", "open('a.txt', 'w').write('a\\n'); print('## Summary'); print('wrote a.txt')",
             kind="code", owns=["a.txt"]),
        unit("b", "print('## Summary'); print('read the code, changed nothing')")])
    git(root, "add", "plan.json")
    git(root, "commit", "-q", "-m", "plan")
    return root


def finished_run(repo: Path) -> str:
    ran = cli("run", "plan.json", cwd=repo)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return ran.stdout.split()[1]


def events(repo: Path, run_id: str) -> list:
    r = cli("ledger", run_id, "--events", "--json", cwd=repo)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def one_line(tool: str, text: str) -> str:
    assert "\n" not in text and text.startswith(f"prun: {tool}: "), text
    assert text.endswith(")"), f"the fix is said: {text}"
    return text


def test_ids_that_look_like_flags_are_refused_and_nothing_is_done(repo, tmp_path):
    run_id = finished_run(repo)
    before = events(repo, run_id)
    flags = [("status", {"run": "--all"}, "run"),
             ("ledger", {"run": "--events"}, "run"),
             ("reconcile", {"run": "--rescoped=a"}, "run"),
             ("reconcile", {"run": run_id, "rescoped": ["--all"]}, "rescoped[0]"),
             ("wait", {"run": "--any", "timeout": 5}, "run"),
             ("integrate", {"run": "--include=a"}, "run"),
             ("integrate", {"run": run_id, "include": ["--allow-dirty"]}, "include[0]"),
             ("review", {"run": "--json"}, "run"),
             ("cancel", {"run": "--all"}, "run"),
             ("cancel", {"run": run_id, "packet": "--help"}, "packet"),
             ("reassign", {"packet": "--executor=claude", "run": run_id}, "packet"),
             ("reassign", {"packet": "a", "run": run_id, "executor": "-h"}, "executor"),
             ("decide", {"packet": "--note=x", "decision": "include", "run": run_id}, "packet"),
             ("brief", {"packet": "a", "attempt": "--plan=plan.json"}, "attempt"),
             ("panel_result", {"run": "--json"}, "run"),
             ("quota", {"group": ["--refresh"]}, "group[0]"),
             ("run", {"plan": "plan.json", "deadline": "-5m"}, "deadline"),
             ("receipt", {"state_dir": str(tmp_path), "attempt_id": "--x"}, "attempt_id"),
             ("dispatch", {"prompt_file": "plan.json", "result_file": str(tmp_path / "r.md"),
                           "unit_id": "--help"}, "unit_id")]

    async def main():
        out = []
        async with connect(repo, tmp_path / "server.log") as s:
            for tool, args, arg in flags:
                res, text = await call(s, tool, args)
                out.append((tool, arg, res.is_error, text))
            for uri in ("prun://runs/--all/results", f"prun://runs/{run_id}/results/--all"):
                try:
                    await s.read_resource(uri)
                    out.append(("resource", uri, False, ""))
                except MCPError as e:
                    out.append(("resource", uri, True, str(e)))
        return out

    for tool, arg, is_error, text in anyio.run(main):
        if tool == "resource":
            assert is_error and "starts with '-'" in text and "\n" not in text, (arg, text)
            continue
        assert is_error, (tool, text)
        one_line(tool, text)
        assert text.startswith(f"prun: {tool}: {arg}: '-"), text
        assert "starts with '-' (it would be read as a flag)" in text, text
    # not one of them was obeyed: no rescope, no decision, no cancel, nothing
    assert events(repo, run_id) == before
    assert cli("review", run_id, "--json", cwd=repo).stdout.count('"decision": null') == 2
    assert not (repo / "a.txt").exists()


def test_values_that_are_not_data_are_refused_in_one_line(repo, tmp_path):
    go = tmp_path / "go"
    write_plan(repo / "held.json", [unit("held", "import os, time\n"
                                     f"while not os.path.exists({str(go)!r}):\n"
                                     "    time.sleep(0.02)\n"
                                     "print('## Summary'); print('held until released')",
                                     snapshot=False)])
    big = "x" * 200_000
    cases = [
        ("status", {"run": big}, "run: 'xxxx", "(200,000 characters) is longer than 200"),
        ("cancel", {"run": ""}, "run: '' is empty", "give the id prun printed"),
        ("cancel", {"run": "  \t"}, "run: '  \\t' is blank", ""),
        ("reassign", {"packet": "held", "run": ""}, "run: '' is empty", ""),
        ("followup", {"packet": "held", "prompt_file": "held.json", "run": " "},
         "run: ' ' is blank", ""),
        ("integrate", {"run": ""}, "run: '' is empty", ""),
        ("decide", {"packet": "held", "decision": "reject", "run": ""}, "run: '' is empty", ""),
        ("status", {"run": "ab\x1b]52;c;aGk=\x07"}, "run: 'ab\\x1b]52;c;aGk=\\x07' holds a "
         "control character ('\\x1b')", ""),
        ("dispatch", {"prompt_file": "held.json", "result_file": str(tmp_path / "r.md"),
                      "unit_id": "../x"}, "unit_id: '../x' holds a path separator", ""),
        ("brief", {"packet": "a..b"}, "packet: 'a..b' holds '..'", ""),
        ("decide", {"packet": "held", "decision": "reject", "note": "n" * 200_000},
         "note: 'nnnn", "is 200,000 characters long: a note is at most 4,000 characters"),
        ("decide", {"packet": "held", "decision": "reject", "who": "ada\nDECIDED x"},
         "who: 'ada\\nDECIDED x' holds a control character ('\\n')", ""),
        ("cancel", {"run": "r", "reason": "why\rCANCEL x"}, "reason: ", "control character"),
        ("reconcile", {"rescoped": ["held=fine\nACCEPTED x"]}, "rescoped[0]: ",
         "control character"),
        ("integrate", {"include": ["x/../../y"]}, "include[0]: 'x/../../y' holds a path", ""),
        ("integrate", {"include": ["a"] * 201}, "include: List should have at most 200 items",
         ""),
        ("reconcile", {"rescoped": [f"held={'w' * 4000}"] * 30},
         "arguments: ", "bytes together, more than the 100,000"),
        ("dispatch", {"prompt_file": "held.json", "result_file": str(tmp_path / "r.md"),
                      "unit_id": "u", "executor": "command", "command": "echo \x00 hi"},
         "command: ", "control character ('\\x00')"),
        ("check", {"plan": "held.json\x00.yaml"}, "plan: ", "control character"),
        ("integrate", {"check_timeout": "9999h"}, "check_timeout '9999h': more than 24 h",
         "give at most 24h"),
        ("integrate", {"check_timeout": "99999h"}, "check_timeout '99999h' is longer than ten years",
         "give at most 24h"),
        ("run", {"plan": ""}, "plan: '' is empty", ""),
        ("run", {"plan": "held.json", "cwd": "a\nb"}, "cwd: ", "control character"),
    ]

    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            res, text = await call(s, "run", {"plan": "held.json"})
            assert not res.is_error, text
            run_id = res.structured_content["run_id"]
            got = []
            for tool, args, *_ in cases:
                res, text = await call(s, tool, args)
                got.append((res.is_error, text))
            # the run is still going: no blank id was read as "the latest run"
            res, text = await call(s, "status", {"run": run_id})
            assert res.structured_content["units"][0]["status"] == "running", text
            go.write_text("open")
            res, text = await call(s, "wait", {"run": run_id, "timeout": 120})
            assert res.structured_content["exit_name"] == "OK", text
        return got

    for (tool, _, start, words), (is_error, text) in zip(cases, anyio.run(main), strict=True):
        assert is_error, (tool, text)
        one_line(tool, text)
        assert text.startswith(f"prun: {tool}: {start}"), text
        assert words in text, text
        assert "Error executing tool" not in text and len(text) < 1000, text


def test_a_plan_that_is_not_a_regular_file_is_refused_at_once(repo, tmp_path, monkeypatch):
    # were any of these read, the call would hang until the server's bound: that bound is
    # long, and its message is not the one asserted
    monkeypatch.setenv("PRUN_MCP_TIMEOUT", "120")
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    (tmp_path / "folder.yaml").mkdir()
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as f:
        f.truncate(17 * 1024 * 1024)         # sparse: nothing written
    (repo / "-p.json").write_text((repo / "plan.json").read_text())
    cases = [
        ("check", {"plan": "/dev/zero"}, "plan '/dev/zero': is a character device, not a "
         "regular file (give the path of a file)"),
        ("run", {"plan": "/dev/zero"}, "plan '/dev/zero': is a character device"),
        ("check", {"plan": str(fifo)}, f"plan {str(fifo)!r}: is a FIFO, not a regular file"),
        ("run", {"plan": str(fifo)}, f"plan {str(fifo)!r}: is a FIFO"),
        ("check", {"plan": str(tmp_path / "folder.yaml")}, "is a folder, not a regular file"),
        ("check", {"plan": str(huge)}, "17,825,792 bytes, more than the 16,777,216 a tool reads"),
        ("brief", {"packet": "a", "plan": str(fifo)}, "plan "),
        ("followup", {"packet": "a", "prompt_file": str(fifo), "run": "r"},
         "prompt_file "),
        ("dispatch", {"prompt_file": "/dev/zero", "result_file": str(tmp_path / "r.md"),
                      "unit_id": "u"}, "prompt_file '/dev/zero': is a character device"),
        ("panel", {"question_file": str(fifo), "schema": "plan.json"}, "question_file "),
        ("panel", {"question_file": "plan.json", "schema": "/dev/zero"}, "schema "),
        ("check", {"plan": "plan.json", "repo": str(fifo)}, "repo "),
        ("receipt", {"state_dir": "/dev/null", "attempt_id": "x"},
         "state_dir '/dev/null': is a character device, not a folder"),
    ]

    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            got = []
            for tool, args, _ in cases:
                res, text = await call(s, tool, args)
                got.append((res.is_error, text))
            # a plan whose name starts with '-' is a path, not a flag
            res, text = await call(s, "check", {"plan": "-p.json"})
            return got, (res.is_error, text)

    got, dash = anyio.run(main)
    for (tool, _, words), (is_error, text) in zip(cases, got, strict=True):
        assert is_error, (tool, text)
        one_line(tool, text)
        assert words in text, text
    assert dash == (False, dash[1]) and dash[1].startswith("OK pairs=1 packets=2"), dash
    assert cli("ledger", "--json", cwd=repo).stdout.strip() == "[]"      # no run was made


def _children_with(word: str) -> list[int]:
    """The processes whose command line holds ``word`` (not this test's own)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if word.encode() in cmdline:
            found.append(int(pid))
    return found


def test_a_yaml_bomb_is_bounded_by_the_servers_own_timeout(repo, tmp_path, monkeypatch):
    monkeypatch.setenv("PRUN_MCP_TIMEOUT", "5")
    bomb = repo / "bomb-plan.yaml"
    bomb.write_text(BOMB)

    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            return [await call(s, tool, {"plan": bomb.name}) for tool in ("check", "run")]

    for tool, (res, text) in zip(("check", "run"), anyio.run(main), strict=True):
        assert res.is_error, text
        assert "\n" not in text and text.startswith("prun: "), text
        assert "exit code" not in text and "exited with" not in text, text
        # stopped at the server's own bound, and said so; or refused by the plan's loader,
        # which names the file and why
        stopped = (f"prun: prun {tool} was stopped after 5 s, the bound of this call "
                   "(PRUN_MCP_TIMEOUT, 5 s) (raise PRUN_MCP_TIMEOUT where the server starts, "
                   "or run the command from a shell)")
        assert text == stopped or bomb.name in text, text
    assert _children_with("bomb-plan.yaml") == []          # nothing left running
    assert cli("ledger", "--json", cwd=repo).stdout.strip() == "[]"


def test_a_child_ended_by_a_signal_it_did_not_send_is_named(repo, tmp_path):
    go = tmp_path / "go"
    write_plan(repo / "held.json", [unit("held", "import os, time\n"
                                     f"while not os.path.exists({str(go)!r}):\n"
                                     "    time.sleep(0.02)\n"
                                     "print('## Summary'); print('held until released')",
                                     snapshot=False)])

    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            res, _ = await call(s, "run", {"plan": "held.json"})
            run_id = res.structured_content["run_id"]
            got = {}

            async def waiting():
                got["wait"] = await call(s, "wait", {"run": run_id, "timeout": 600})

            async with anyio.create_task_group() as tg:
                tg.start_soon(waiting)
                # the wait's child, as the out-of-memory killer would find it
                pids = await anyio.to_thread.run_sync(
                    lambda: poll(lambda: _children_with("\0prun\0wait\0")))
                for pid in pids:
                    os.kill(pid, signal.SIGKILL)
            go.write_text("open")
            done = subprocess.run([sys.executable, "-m", "prun", "wait", run_id, "--timeout",
                                   "120s"], cwd=repo, capture_output=True, text=True,
                                  timeout=180)
            assert done.returncode == 0, done.stdout + done.stderr
            return got["wait"]

    res, text = anyio.run(main)
    assert res.is_error, text
    assert text == ("prun: prun wait was ended by SIGKILL, which this server did not send (was "
                    "the machine short of memory? see the system log)"), text
