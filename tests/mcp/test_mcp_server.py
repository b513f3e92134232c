"""`prun mcp` driven through the MCP SDK's own client over stdio: a real session, not a call
into the functions. The tools and their schemas, a plan of command units run to the end
through run, wait, status, reconcile and integrate, the result resources, and every error
path (a bad plan, an unknown run, bad arguments)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcpkit import call, cli, connect, git, make_repo, unit, write_plan  # skips without mcp

MCPError = pytest.importorskip("mcp.shared.exceptions").MCPError

TOOLS = ["check", "run", "status", "wait", "cancel", "reassign", "followup", "reconcile",
         "integrate", "dispatch", "receipt", "quota", "ledger", "brief", "panel",
         "panel_result", "review", "decide"]
REFERENCE = Path(__file__).resolve().parents[2] / "skills" / "prun" / "references" / "mcp.md"


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "repo")


def test_the_tools_their_schemas_and_the_resource_templates(repo, tmp_path):
    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            return (await s.list_tools()).tools, \
                (await s.list_resource_templates()).resource_templates

    tools, templates = anyio.run(main)
    by_name = {t.name: t for t in tools}
    assert list(by_name) == TOOLS
    # the names the skill's reference gives, for both CLIs
    text = REFERENCE.read_text()
    for name in TOOLS:
        assert f"`mcp__prun__{name}`" in text and f"`mcp_prun_{name}`" in text
    for t in tools:
        props = t.input_schema["properties"]
        assert "cwd" in props and "cwd" not in t.input_schema.get("required", []), t.name
        assert t.description and t.output_schema is not None
        assert {"lines", "exit_code", "exit_name"} <= set(t.output_schema["properties"])
    req = {t.name: set(t.input_schema.get("required", [])) for t in tools}
    assert req["run"] == {"plan"} and req["check"] == {"plan"}
    for name in ("status", "reconcile", "integrate", "wait"):
        assert req[name] == set(), f"{name}: RUN may be left out"
        assert "run" in by_name[name].input_schema["properties"]
    wait = by_name["wait"].input_schema["properties"]
    assert wait["timeout"]["default"] == 300 and wait["timeout"]["maximum"] == 3600
    assert {"since", "any"} <= set(wait)
    assert by_name["status"].annotations.read_only_hint is True
    assert by_name["integrate"].annotations.read_only_hint is False
    assert {t.uri_template for t in templates} == {"prun://runs/{run}/results",
                                                   "prun://runs/{run}/results/{packet}"}


def test_a_plan_runs_to_the_end_through_the_tools(repo, tmp_path):
    go = tmp_path / "go"
    gate = ("import os, sys, time\n"
            f"while not os.path.exists({str(go)!r}):\n"
            "    time.sleep(0.02)\n"
            "print('## Result'); print('the gate opened and the unit went on')")
    write_plan(repo / "plan.json", [
        unit("alpha", "open('alpha.txt', 'w').write('alpha\\n'); "
             "print('## Summary'); print('wrote alpha.txt with one line')",
             kind="code", owns=["alpha.txt"], requires=["Summary"]),
        unit("beta", "open('beta.txt', 'w').write('beta\\n'); "
             "print('## Summary'); print('wrote beta.txt with one line')",
             kind="code", owns=["beta.txt"], requires=["Summary"]),
        unit("gate", gate, snapshot=False),
    ], name="mcp-flow", check=[sys.executable, "-c", "print('combined check ok')"])
    git(repo, "add", "plan.json")
    git(repo, "commit", "-q", "-m", "plan")

    async def main():
        got = {}
        progress = []

        async def heard(value, total, message):
            progress.append((value, total, message))

        async with connect(repo, tmp_path / "server.log") as s:
            res, text = await call(s, "check", {"plan": "plan.json"})
            assert not res.is_error, text
            assert text.startswith("OK pairs=3 packets=3")
            assert res.structured_content["ok"] is True  # the --json fields, beside the lines
            assert res.structured_content["lines"] == text.splitlines()

            res, text = await call(s, "run", {"plan": "plan.json"})
            assert not res.is_error, text
            run_id = res.structured_content["run_id"]
            assert text == f"RUN {run_id}"

            # the gate holds the run: a short wait reports TIMEOUT, a state and not an error
            res, text = await call(s, "wait", {"run": run_id, "timeout": 1})
            assert not res.is_error, text
            sc = res.structured_content
            assert (sc["exit_code"], sc["exit_name"]) == (124, "TIMEOUT")
            assert sc["run_id"] == run_id and isinstance(sc["cursor"], int)
            assert text.splitlines()[-1] == f"CURSOR {sc['cursor']}"

            res, text = await call(s, "brief", {"packet": "alpha", "run": run_id})
            assert not res.is_error and "# prun unit `alpha`" in text
            assert res.structured_content["packet"] == "alpha"

            go.write_text("open")
            cursor = sc["cursor"]
            while True:
                progress.clear()
                res, text = await call(s, "wait", {"run": run_id, "since": cursor,
                                                   "timeout": 120}, progress=heard)
                assert not res.is_error, text
                sc = res.structured_content
                cursor = sc["cursor"]
                if sc["exit_name"] != "TIMEOUT":
                    break
            assert (sc["exit_code"], sc["exit_name"]) == (0, "OK"), text
            assert sc["events"][-1]["kind"] == "run-done"
            assert any(m and m.startswith("EVENT ") for _, _, m in progress), \
                "each line of a wait is sent as a progress notification"
            assert [v for v, _, _ in progress] == sorted(v for v, _, _ in progress)

            res, text = await call(s, "status", {"run": run_id})
            assert not res.is_error, text
            got["status"] = text
            sc = res.structured_content
            assert sc["run"]["id"] == run_id and sc["counts"] == {"succeeded": 3}
            assert {u["packet_id"] for u in sc["units"]} == {"alpha", "beta", "gate"}

            res, text = await call(s, "reconcile", {"run": run_id})
            assert not res.is_error, text
            sc = res.structured_content
            assert sc["exit_name"] == "OK" and sc["complete"] is True
            assert text.splitlines() == sc["lines"]
            assert sorted(line.split()[1] for line in sc["lines"][:-1]) == \
                ["alpha", "beta", "gate"]
            assert all(line.startswith("ACCEPTED ") for line in sc["lines"][:-1])
            assert sc["lines"][-1].startswith(f"RECONCILE run={run_id} packets=3 accepted=3")

            res, text = await call(s, "integrate", {"run": run_id})
            assert not res.is_error, text
            sc = res.structured_content
            assert (sc["exit_name"], sc["applied"], sc["committed"]) == ("OK", 2, False)
            assert sc["check"]["ok"] is True
            assert text.splitlines()[-1].endswith("committed=no")
            assert "APPLIED alpha files=1" in text and "CHECK passed" in text

            listing = await s.read_resource(f"prun://runs/{run_id}/results")
            got["listing"] = listing.contents[0].text
            one = await s.read_resource(f"prun://runs/{run_id}/results/beta")
            got["beta"] = one.contents[0].text
            got["run_id"] = run_id
        return got

    got = anyio.run(main)
    run_id = got["run_id"]
    # the same lines as the command line's
    assert got["status"] == cli("status", run_id, cwd=repo).stdout.rstrip("\n")
    # the changes are in the working tree, nothing committed
    assert (repo / "alpha.txt").read_text() == "alpha\n"
    assert (repo / "beta.txt").read_text() == "beta\n"
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "2"
    assert "prun://runs/" in got["listing"] and '"packet": "gate"' in got["listing"]
    assert got["beta"] == "## Summary\nwrote beta.txt with one line\n"


def test_every_error_is_a_tool_error_with_one_line(repo, tmp_path):
    (repo / "bad.yaml").write_text("packets: [{id: a, executor: nope, prompt: x}]\n")
    (repo / "f.md").write_text("Check the open item again.\n")
    write_plan(repo / "overlap.json", [
        unit("a", "pass", kind="code", owns=["x.txt"]),
        unit("b", "pass", kind="code", owns=["x.txt"])])

    async def main():
        out = {}
        async with connect(repo, tmp_path / "server.log") as s:
            for key, tool, args in (
                    ("bad-plan", "run", {"plan": "bad.yaml"}),
                    ("bad-plan-check", "check", {"plan": "bad.yaml"}),
                    ("no-plan", "run", {"plan": "missing.yaml"}),
                    ("overlap", "run", {"plan": "overlap.json"}),
                    ("no-run-status", "status", {"run": "nosuch"}),
                    ("no-run-wait", "wait", {"run": "nosuch", "timeout": 5}),
                    ("no-run-reconcile", "reconcile", {"run": "nosuch"}),
                    ("no-run-integrate", "integrate", {"run": "nosuch"}),
                    ("no-run-cancel", "cancel", {"run": "nosuch"}),
                    ("no-run-reassign", "reassign", {"packet": "a", "run": "nosuch"}),
                    ("no-run-followup", "followup", {"packet": "a", "prompt_file": "f.md",
                                                     "run": "nosuch"}),
                    ("codex", "dispatch", {"prompt_file": "bad.yaml", "result_file": "r.md",
                                           "unit_id": "u", "executor": "codex"}),
                    ("bad-receipt", "receipt", {"state_dir": str(tmp_path), "attempt_id": "x"}),
                    ("bad-cwd", "status", {"cwd": str(tmp_path / "nowhere")}),
                    ("too-long", "wait", {"timeout": 99999}),
                    ("wrong-type", "run", {"plan": "plan.json", "parallel": "many"}),
                    ("missing", "run", {}),
                    ("unknown-tool", "nosuchtool", {})):
                res, text = await call(s, tool, args)
                out[key] = (res.is_error, text, res.structured_content)
            for uri in ("prun://runs/nosuch/results/a", "prun://runs/nosuch/results"):
                try:
                    await s.read_resource(uri)
                    out[uri] = None
                except MCPError as e:
                    out[uri] = str(e)
        return out

    out = anyio.run(main)
    for key in [k for k in out if not k.startswith("prun://")]:
        is_error, text, _ = out[key]
        assert is_error, f"{key}: {text}"
        first = text.splitlines()[0]
        assert re.fullmatch(r"prun: .+", first), f"{key}: {text}"
        if key != "overlap":
            assert "\n" not in text, f"{key}: one line: {text!r}"
    assert out["bad-plan"][1] == ("prun: bad.yaml:1: packets[0].executor: unknown executor "
                                  "'nope' (choose one of auto, agy, claude, command, gemini, "
                                  "session)")
    assert out["bad-plan"][2]["exit_name"] == "USAGE"
    assert out["bad-plan-check"][1] == out["bad-plan"][1]
    assert out["no-plan"][1] == ("prun: run: plan 'missing.yaml': no such file (relative paths "
                                 f"start at cwd, {repo}; check the path)")
    # a plan that fails the independence test: the one line, then the FAIL lines
    first, *rest = out["overlap"][1].splitlines()
    assert first.startswith("prun: the plan fails the independence test; nothing was run")
    assert rest[0].startswith("FAIL files a b path=x.txt") and rest[-1].startswith("FAILED ")
    for key in ("no-run-status", "no-run-wait", "no-run-reconcile", "no-run-integrate",
                "no-run-reassign", "no-run-followup"):
        assert out[key][1].startswith("prun: no run 'nosuch' in the ledger "), key
    assert out["no-run-cancel"][1].startswith("prun: no run or attempt nosuch")
    assert out["codex"][1].startswith("prun: codex is not a prun executor")
    assert out["bad-cwd"][1] == (f"prun: status: cwd {str(tmp_path / 'nowhere')!r}: no such "
                                 "folder (check the path)")
    assert out["too-long"][1] == ("prun: wait: timeout: Input should be less than or equal to "
                                  "3600 (see the tool's input schema)")
    assert out["wrong-type"][1].startswith("prun: run: parallel: ")
    assert out["missing"][1].startswith("prun: run: plan: Field required")
    assert out["unknown-tool"][1].startswith("prun: ") and "nosuchtool" in out["unknown-tool"][1]
    assert out["prun://runs/nosuch/results/a"].startswith("prun: no run 'nosuch'")
    assert out["prun://runs/nosuch/results"].startswith("prun: no run 'nosuch'")


def test_dispatch_receipt_cancel_quota_and_ledger(repo, tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Say something long enough to count as a result.\n")
    go = tmp_path / "go"
    write_plan(repo / "held.json", [unit("held", "import os, time\n"
                                     f"while not os.path.exists({str(go)!r}):\n"
                                     "    time.sleep(0.02)\n", snapshot=False)])

    async def main():
        out = {}
        async with connect(repo, tmp_path / "server.log") as s:
            # a command unit, waited for to its end
            res, text = await call(s, "dispatch", {
                "prompt_file": str(prompt), "result_file": str(tmp_path / "r1.md"),
                "unit_id": "u1", "executor": "command", "wait": 120,
                "command": f"{sys.executable} -c \"print('a result of more than twenty bytes')\""})
            out["finished"] = (res.is_error, text, res.structured_content)
            # a unit still running when the call returns goes on
            res, text = await call(s, "dispatch", {
                "prompt_file": str(prompt), "result_file": str(tmp_path / "r2.md"),
                "unit_id": "u2", "executor": "command", "timeout": "2m",
                "command": f"{sys.executable} -c \"import os, time\n"
                           f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n"
                           "print('the second unit ran to its end after the call')\""})
            out["running"] = (res.is_error, text, res.structured_content)
            # a session unit: its hand-off, then its receipt
            res, text = await call(s, "dispatch", {
                "prompt_file": str(prompt), "result_file": str(tmp_path / "r3.md"),
                "unit_id": "u3", "executor": "session"})
            out["session"] = (res.is_error, text, res.structured_content)
            state = res.structured_content["state_dir"]
            res, text = await call(s, "receipt", {"state_dir": state, "attempt_id": "agent-7"})
            out["receipt"] = (res.is_error, text)

            res, text = await call(s, "run", {"plan": "held.json"})
            run_id = res.structured_content["run_id"]
            res, text = await call(s, "cancel", {"run": run_id, "wait": 60})
            out["cancel"] = (res.is_error, text, res.structured_content, run_id)

            res, text = await call(s, "quota", {})
            out["quota"] = (res.is_error, text, res.structured_content)
            res, text = await call(s, "ledger", {"limit": 5})
            out["ledger"] = (res.is_error, text, res.structured_content)
        return out

    out = anyio.run(main)
    is_error, text, sc = out["finished"]
    assert not is_error, text
    assert (sc["exit_name"], sc["running"]) == ("OK", False)
    assert text == f"STATE-DIR {sc['state_dir']}"
    assert (tmp_path / "r1.md").read_text().startswith("a result of more than twenty bytes")

    is_error, text, sc = out["running"]
    assert not is_error and sc["running"] is True and sc["exit_code"] is None, text
    go.write_text("open")
    landed = subprocess.run([sys.executable, "-m", "prun", "gather", "--timeout", "120",
                             str(tmp_path / "r2.md")], capture_output=True, text=True,
                            timeout=180)
    assert landed.returncode == 0, landed.stdout + landed.stderr
    assert "ran to its end after the call" in (tmp_path / "r2.md").read_text()

    is_error, text, sc = out["session"]
    assert not is_error and text.splitlines()[1].startswith("HANDOFF executor=session unit=u3")
    assert sc["receipt_cmd"].startswith("prun receipt ")
    assert out["receipt"] == (False, f"RECEIPT {sc['state_dir']} attempt-id=agent-7")

    is_error, text, sc, run_id = out["cancel"]
    assert not is_error and text == f"CANCEL {run_id} status=cancelled", text
    assert sc["exit_name"] == "OK"

    is_error, text, sc = out["quota"]
    assert not is_error and text.splitlines()[-1].startswith("SNAPSHOT ")
    assert set(sc["groups"]) >= {"claude", "agy-gemini"} and sc["lines"] == text.splitlines()
    is_error, text, sc = out["ledger"]
    assert not is_error and text.startswith("RUN id=")
    assert sc["rows"][0]["status"] == "cancelled"


def test_without_the_sdk_prun_mcp_says_in_one_line_how_to_install_it():
    p = subprocess.run([sys.executable, "-c",
                        "import sys; sys.modules['mcp'] = None\n"
                        "from prun.cli import main; sys.exit(main(['mcp']))"],
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == ("prun: prun mcp needs the MCP SDK (mcp 2.x), which is not installed "
                        "(pip install 'prun-agents[mcp]')\n")
