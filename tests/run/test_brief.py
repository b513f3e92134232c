"""What each worker is told and sees: the brief (through the real `prun run`, with fake CLIs
that record the prompt and argv they got), `prun brief`, the read-only snapshot of the code."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import FAKES, calls, make_fake_cli, prun
from prun.ledger import Ledger
from runkit import write_plan

# A command unit that records the brief it got on stdin and its environment.
RECORD = textwrap.dedent("""
    import json, os, sys
    brief = sys.stdin.read()
    with open({log!r}, "a") as f:
        f.write(json.dumps({{"brief": brief, "cwd": os.getcwd(),
                            "env": {{k: v for k, v in os.environ.items()
                                    if k.startswith("PRUN_")}}}}) + "\\n")
    print("recorded the brief and the environment of this unit in full")
""")


def _record(log: Path, pid: str, **fields) -> dict:
    return {"id": pid, "executor": "command",
            "command": [sys.executable, "-c", RECORD.format(log=str(log))],
            "prompt": f"Do the work of {pid} and report.", **fields}


def _attempts(run_id):
    with Ledger.open() as led:
        return {a["packet_id"]: dict(a) for a in led.attempts(run_id)}


def test_code_unit_is_told_its_whole_contract(repo, tmp_path):
    log = tmp_path / "seen.jsonl"
    plan = write_plan(repo / "plan.yaml", [
        _record(log, "api", kind="code", scope="the HTTP handlers and their tests",
                owns=["src/api/**", "tests/api/**"], shared={"pyproject.toml": "api"},
                state=["port:8000", "db:orders"], requires=["Summary", "Open items"],
                data={"reachable": ["the repository"], "prohibited": ["credentials"],
                      "retention": "results kept with the run"}),
        _record(log, "models", kind="code", owns=["src/models/**"])])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    seen = {json.loads(line)["env"]["PRUN_PACKET_ID"]: json.loads(line)
            for line in log.read_text().splitlines()}
    api = seen["api"]["brief"]
    contract, _, task = api.partition("\n## Task\n")
    assert contract.startswith("# prun unit `api`\nScope: the HTTP handlers and their tests\n")
    assert "a throwaway clone of the repository at commit" in contract
    assert "never commit, push, or run destructive git" in contract
    assert "You own: `src/api/**`, `tests/api/**`, `pyproject.toml`. Change nothing else" \
        in contract
    assert "stop and report it under \"Open items\"" in contract
    assert "`pyproject.toml`: you are its integration owner" in contract
    assert "port 8000" in contract and "`db:orders`" in contract
    assert "reachable: the repository; prohibited: credentials; retention: results kept" \
        in contract
    att = _attempts(run_id)
    outbox = str(Path(att["api"]["state_dir"]) / "outbox" / "result.md")  # published as a copy
    assert f"write it to {outbox} in one operation" in contract
    assert seen["api"]["env"]["PRUN_RESULT_FILE"] == outbox
    assert "with the sections Summary, Open items" in contract
    assert "Start no other agents" in contract
    assert task.strip() == "Do the work of api and report."
    assert len(contract.encode()) < 1500
    # models declares the shared file with api as its owner? no: it only sees its own paths
    assert "pyproject.toml" not in seen["models"]["brief"]
    # the same facts as environment variables
    env = seen["api"]["env"]
    assert json.loads(env["PRUN_OWNS"]) == ["src/api/**", "tests/api/**", "pyproject.toml"]
    assert env["PRUN_WORKSPACE_KIND"] == "clone" and env["PRUN_UNIT_ID"] == "api"
    assert Path(env["PRUN_BRIEF_FILE"]).read_text() == api
    assert int(env["PRUN_PORT_BASE"]) > 0
    # frozen in the ledger, and `prun brief` prints exactly what the worker got
    assert att["api"]["brief"] == api
    shown = prun("brief", "api", "--run", run_id)
    assert shown.returncode == 0 and shown.stdout == api and not shown.stderr
    js = json.loads(prun("brief", "api", "--run", run_id, "--json").stdout)
    assert js["attempt"] == att["api"]["id"] and js["preview"] is False
    assert js["contract_bytes"] < 1500


def test_brief_preview_for_a_plan_not_yet_run(repo, tmp_path):
    plan = write_plan(repo / "plan.yaml", [
        {"id": "survey", "executor": "command", "command": ["true"], "prompt": "Survey it.",
         "scope": "a survey", "requires": ["Summary"]}])
    r = prun("brief", "survey", "--plan", str(plan))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# prun unit `survey`\nScope: a survey\n")
    assert "<run dir>/state/<the attempt's state dir>/outbox/result.md" in r.stdout
    assert "Code to read: a read-only copy of the repository" in r.stdout
    assert "values shown as <...> are fixed when the unit starts" in r.stderr
    missing = prun("brief", "nope", "--plan", str(plan))
    assert missing.returncode == 2 and "no packet 'nope'" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1


def test_read_only_unit_reads_the_code_through_one_shared_snapshot(repo, tmp_path):
    (repo / "src").mkdir()
    (repo / "src" / "mod.py").write_text("def f():\n    return 1\n")
    os.system(f"git -C {repo} add -A && git -C {repo} -c user.email=t@e -c user.name=t "
              f"commit -qm code")
    (repo / "src" / "mod.py").write_text("uncommitted edit\n")  # not in the snapshot
    log = tmp_path / "seen.jsonl"
    plan = write_plan(repo / "plan.yaml", [_record(log, f"review-{i}") for i in range(3)]
                      + [_record(log, "blind", snapshot=False)], parallel=4)
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    seen = {json.loads(line)["env"]["PRUN_PACKET_ID"]: json.loads(line)
            for line in log.read_text().splitlines()}
    snaps = {s["env"].get("PRUN_REPO_SNAPSHOT") for k, s in seen.items() if k != "blind"}
    assert len(snaps) == 1                      # one snapshot per base per run
    snap = Path(snaps.pop())
    assert (snap / "src" / "mod.py").read_text() == "def f():\n    return 1\n"
    assert not os.access(snap / "src" / "mod.py", os.W_OK) or os.geteuid() == 0
    for k in ("review-0", "review-1", "review-2"):
        assert "Code to read: a read-only copy of the repository at commit" in seen[k]["brief"]
        assert str(snap) in seen[k]["brief"]
        assert seen[k]["cwd"] != str(snap) and not Path(seen[k]["cwd"], "src").exists()
    assert "PRUN_REPO_SNAPSHOT" not in seen["blind"]["env"]
    assert "Code to read" not in seen["blind"]["brief"]


@pytest.mark.parametrize("executor, flag", [("claude", "--add-dir"), ("agy", "--add-dir"),
                                            ("gemini", "--include-directories")])
def test_agent_cli_gets_the_snapshot_as_its_extra_directory(repo, tmp_path, monkeypatch,
                                                            executor, flag):
    source = {"claude": "fake_claude.py", "agy": "fake_agy.py", "gemini": "fake_gemini.py"}
    path = make_fake_cli(tmp_path / "bin", executor, FAKES / source[executor])
    monkeypatch.setenv(f"PRUN_{executor.upper()}_BIN", str(path))
    log = tmp_path / f"{executor}.jsonl"
    monkeypatch.setenv(f"FAKE_{executor.upper()}_LOG", str(log))
    monkeypatch.setenv("IS_SANDBOX", "1")  # claude's bypass mode as root
    plan = write_plan(repo / "plan.yaml", [{"id": "look", "executor": executor,
                                            "prompt": "Read the code and report."}])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    (call,) = calls(log)
    argv = call["argv"]
    snap = argv[argv.index(flag) + 1]
    assert Path(snap, "README").read_text() == "a repository for tests\n"
    assert call["cwd"] != snap
    prompt = argv[argv.index("-p") + 1]
    assert prompt.startswith("# prun unit `look`") and snap in prompt
    assert prompt.rstrip().endswith("Read the code and report.")


def test_a_changed_snapshot_or_result_is_never_accepted(repo, tmp_path):
    log = tmp_path / "seen.jsonl"
    plan = write_plan(repo / "plan.yaml", [_record(log, "look"), _record(log, "other")])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    assert prun("reconcile", run_id).returncode == 0
    att = _attempts(run_id)
    snap = Path(json.loads(log.read_text().splitlines()[0])["env"]["PRUN_REPO_SNAPSHOT"])
    readme = snap / "README"
    os.chmod(readme, 0o644)
    readme.write_text("changed by a unit\n")
    result = Path(att["other"]["result_path"])
    with open(result, "a") as f:
        f.write("appended after it was published\n")
    rec = prun("reconcile", run_id)
    assert rec.returncode == 1
    lines = rec.stdout.splitlines()
    assert any(line.startswith(f"REJECTED look reason=snapshot-modified snapshot={snap} "
                               "first=\"README ") and line.endswith("changes=2")
               for line in lines), lines
    assert any(line.startswith(f"REJECTED other reason=result-changed path={result}")
               for line in lines), lines
    # prun clean removes the run's snapshot with the workspaces
    cleaned = prun("clean", run_id)
    assert f"REMOVED - {snap}" in cleaned.stdout.splitlines()
    assert not snap.exists() and not Path(f"{snap}.json").exists()


def test_a_unit_asked_for_verification_is_told_how_its_claims_are_checked(repo):
    plan = write_plan(repo / "plan.yaml", [
        {"id": "fix", "executor": "command", "command": ["true"], "prompt": "Fix it.",
         "requires": ["Summary", "Verification"]},
        {"id": "look", "executor": "command", "command": ["true"], "prompt": "Look.",
         "requires": ["Summary"]}])
    told = prun("brief", "fix", "--plan", str(plan)).stdout
    assert "Under Verification, write each command you ran in backticks" in told
    assert "Under Verification" not in prun("brief", "look", "--plan", str(plan)).stdout
