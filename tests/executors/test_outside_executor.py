"""The proof that adding an executor is one module, one fake CLI and its tests: an executor
registered from outside prun (tests/executors/outside/prun_echo.py, its CLI tests/fakes/
fake_echo.py), found through its ``prun.executors`` entry point by the real ``prun`` command,
accepted by the schema, routed and metered by its flags, run and reconciled."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from helpers import FAKES, calls, make_fake_cli, prun

OUTSIDE = Path(__file__).parent / "outside"


def iso(offset_s: float = 0.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


@pytest.fixture
def echo(tmp_path, monkeypatch):
    """The echo executor installed as an outside package would be: its module and a dist-info
    whose entry_points.txt declares it, in a folder on PYTHONPATH; its fake CLI at
    PRUN_ECHO_BIN. Returns the CLI's call log."""
    site = tmp_path / "site"
    info = site / "prun_echo-0.1.dist-info"
    info.mkdir(parents=True)
    shutil.copy(OUTSIDE / "prun_echo.py", site / "prun_echo.py")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: prun-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[prun.executors]\necho = prun_echo:Echo\n")
    path = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))
    monkeypatch.setenv("PRUN_ECHO_BIN", str(make_fake_cli(tmp_path / "bin", "echo-agent",
                                                          FAKES / "fake_echo.py")))
    log = tmp_path / "echo-calls.jsonl"
    monkeypatch.setenv("FAKE_ECHO_LOG", str(log))
    return log


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    for k, v in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                 "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                 "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": str(tmp_path / "gitconfig"),
                 "PRUN_WORKSPACE_ROOT": str(tmp_path / "ws")}.items():
        monkeypatch.setenv(k, v)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    (root / "README.md").write_text("readme\n")
    subprocess.run(["git", "-C", str(root), "add", "README.md"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", "base"], check=True)
    monkeypatch.chdir(root)
    return root


def snapshot(groups: dict) -> None:
    """Write the quota snapshot the isolated environment points at."""
    entries = {g: {"left": left, "resets_at": iso(3600), "read_at": iso(-5), "source": "probe",
                   "error": None} for g, left in groups.items()}
    Path(os.environ["PRUN_QUOTA_SNAPSHOT"]).write_text(json.dumps(
        {"version": 1, "updated_at": iso(-5), "groups": entries}))


def policy(tmp_path, monkeypatch, text: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    monkeypatch.setenv("PRUN_POLICY", str(path))


def packet(folder: Path, name: str, fields: str) -> str:
    path = folder / f"{name}.md"
    path.write_text(f"---\nid: {name}\n{fields}---\nDo the {name} unit.\n")
    return str(path)


def test_a_plan_runs_on_it_and_reconciles(repo, echo, tmp_path, monkeypatch):
    snapshot({"echo-pool": 0.5})
    policy(tmp_path, monkeypatch, '[routing]\nordinary = "echo"\n')
    monkeypatch.setenv("FAKE_ECHO_WRITE", "notes/echo.md")
    plan = repo / "plan.yaml"
    plan.write_text("packets:\n"
                    "  - {id: notes, kind: code, executor: echo, owns: [notes/**],\n"
                    "     prompt: Write the notes file.}\n"
                    "  - {id: survey, prompt: Survey the repository.}\n")
    r = prun("run", str(plan), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    assert f"RUN {run_id} status=succeeded packets=2 succeeded=2" in r.stdout
    assert [c["argv"] for c in calls(echo)] == [["--mode", "write"]] * 2

    r = prun("ledger", run_id)
    reasons = {line.split(" packet_id=")[1].split()[0]: line.split('routing_reason="')[1]
               .split('"')[0] for line in r.stdout.splitlines() if line.startswith("ATTEMPT")}
    assert reasons == {"notes": "named in the packet; echo-pool healthy (left 50%)",
                       "survey": "ordinary unit: echo takes the larger share; echo-pool healthy "
                                 "(left 50%)"}
    r = prun("reconcile")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[:2] == ["ACCEPTED notes files=1", "ACCEPTED survey"]
    assert not (repo / "notes").exists()   # reconcile changes nothing in the tree


def test_routing_and_quota_treat_it_by_its_flags(echo, tmp_path, monkeypatch):
    named = packet(tmp_path, "named", "executor: echo\n")
    auto = packet(tmp_path, "auto", "")
    r = prun("quota")
    assert "QUOTA group=echo-pool state=unknown" in r.stdout   # its quota_groups(), unread

    snapshot({"echo-pool": 0.0})
    r = prun("route", named)
    assert r.returncode == 75, r.stderr
    assert r.stdout.startswith("WAIT named executor=echo model=- action=wait reason=\"named in "
                               "the packet, but echo-pool reads empty (resets ")

    snapshot({"echo-pool": 0.8})
    policy(tmp_path, monkeypatch, '[routing]\nordinary = "echo"\n[capacity]\necho = 1\n')
    r = prun("route", named, auto)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        'ROUTE named executor=echo model=- action=assign reason="named in the packet; '
        'echo-pool healthy (left 80%)"',
        'ROUTE auto executor=session model=sonnet action=reroute reason="ordinary unit: the '
        'echo pool\'s batch capacity of 1 is taken, so it goes to session instead; claude not '
        'read (unknown is never empty)"',
        "ROUTE-SUMMARY units=2 now=2 wait=0 echo=1 session=1"]

    policy(tmp_path, monkeypatch, '[routing]\nsonnet = "echo"\n')
    r = prun("route", auto)
    assert r.returncode == 2
    assert r.stderr.strip().endswith("routing.sonnet = 'echo' (use one of session, claude)")


def test_the_loader_asks_it_what_it_can_do(echo, tmp_path):
    p = packet(tmp_path, "tools", "executor: echo\nsession_tools: true\n")
    r = prun("route", p)
    assert r.returncode == 2
    assert ":4: packet 'tools' needs session tools but runs on 'echo', an outside process" \
        in r.stderr
    r = prun("route", packet(tmp_path, "typo", "executor: ecko\n"))
    assert r.returncode == 2
    assert r.stderr.strip().endswith("executor: unknown executor 'ecko' (did you mean 'echo'?)")


def test_without_its_package_the_name_is_unknown(tmp_path):
    r = prun("route", packet(tmp_path, "named", "executor: echo\n"))
    assert r.returncode == 2
    assert "executor: unknown executor 'echo' (choose one of auto, agy, claude, command, " \
           "gemini, session)" in r.stderr
