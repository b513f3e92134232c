"""Routing to what is installed, through the `prun` command, with PATH deciding which agent
CLIs are here: `auto` passes over a missing executor and says so; a packet that can go only to
missing executors is refused by `prun route`, `prun check` and `prun run`, naming what to
install, before anything is made."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import FAKES, make_fake_cli, prun, without_agent_clis
from prun.ledger import Ledger

CLIS = ("agy", "claude", "gemini")


@pytest.fixture(autouse=True)
def bare_path(monkeypatch):
    without_agent_clis(monkeypatch)


def on_path(tmp_path, name: str) -> dict[str, str]:
    """The environment of a `prun` whose PATH finds the fake ``name`` first."""
    make_fake_cli(tmp_path / "bin", name, FAKES / f"fake_{name}.py")
    return {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}


def test_auto_skips_a_missing_agy_and_says_so(tmp_path):
    r = prun("route", "--no-quota", "--id", "u", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "SKIP u skipped=agy reason=not-installed"
    assert lines[1].startswith("ROUTE u executor=session model=sonnet action=assign "
                               'reason="ordinary unit: session, agy is not-installed; ')
    r = prun("route", "--no-quota", "--json", cwd=tmp_path)
    unit = json.loads(r.stdout)["units"][0]
    assert unit["skipped"] == [{"executor": "agy", "reason": "not-installed"}]
    # installed (found on PATH): agy takes it, nothing is skipped
    r = prun("route", "--no-quota", "--id", "u", cwd=tmp_path, env=on_path(tmp_path, "agy"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ROUTE u executor=agy "), r.stdout


def plan_naming(root, front: str):
    (root / "p.md").write_text(f"---\nid: p\n{front}\n---\nDo the work.\n")
    (root / "plan.yaml").write_text("packets: [p.md]\n")


@pytest.mark.parametrize("front, where, words", [
    ("executor: agy", "p.md:3: ", "packet p can go only to agy (not-installed), missing on this "
     "machine (install agy so that it is on PATH or set PRUN_AGY_BIN to its path;"),
    ("executor: claude", "p.md:3: ", "packet p can go only to claude (not-installed)"),
    ("data:\n  may_go_to: [agy]", "p.md:3: ", "packet p can go only to agy (not-installed)"),
])
def test_a_plan_only_missing_executors_can_take_is_refused_before_anything_is_made(
        repo, front, where, words):
    plan_naming(repo, front)
    for args in (["route", "--no-quota", "plan.yaml"], ["check", "plan.yaml"],
                 ["run", "plan.yaml"]):
        r = prun(*args, cwd=repo)
        assert (r.returncode, r.stdout) == (2, ""), r.stdout + r.stderr
        assert r.stderr.startswith(f"prun: {where}{words}"), r.stderr
        assert len(r.stderr.splitlines()) == 1
    assert not (repo / ".prun").exists()
    with Ledger.open() as ledger:
        assert ledger.latest_run() is None


def test_a_candidate_only_a_missing_executor_can_take_is_refused_before_anything_is_made(repo):
    # candidates are routed as the units they run as: the second one's agy is not here
    plan_naming(repo, "executor: command\ncommand: [echo, done]\ncandidates: [command, agy]")
    for args in (["check", "plan.yaml"], ["run", "plan.yaml"]):
        r = prun(*args, cwd=repo)
        assert (r.returncode, r.stdout) == (2, ""), r.stdout + r.stderr
        assert "p.c2 can go only to agy (not-installed)" in r.stderr, r.stderr
    assert not (repo / ".prun").exists()
    assert not Path(os.environ["PRUN_LEDGER"]).exists()
    r = prun("doctor", "plan.yaml", cwd=repo)
    assert r.returncode == 1 and "executor agy status=missing" in r.stdout, r.stdout


def test_a_named_executor_found_on_path_passes(repo, tmp_path):
    plan_naming(repo, "executor: agy")
    r = prun("check", "plan.yaml", cwd=repo, env=on_path(tmp_path, "agy"))
    assert (r.returncode, r.stdout) == (0, "OK pairs=0 packets=1 sequenced=0\n"), r.stderr


def test_route_passes_over_missing_executors_in_every_rule():
    """The pure function: ``missing`` comes in as an argument, as the quota readings do."""
    from prun.errors import UsageError
    from prun.plan.routing import Need, Policy, route

    gone = {"agy": "not-installed", "claude": "not-signed-in"}
    d = route([Need("s", session_tools=True)], policy=Policy(session_tools="claude"),
              missing=gone)[0]
    assert (d.executor, d.skipped) == ("session", (("claude", "not-signed-in"),))
    d = route([Need("o")], missing=gone)[0]
    assert (d.executor, d.action, d.skipped) == ("session", "assign", (("agy", "not-installed"),))
    assert route([Need("o")])[0].executor == "agy"           # nothing missing: the seed's split
    with pytest.raises(UsageError, match=r"packet g can go only to agy \(not-installed\)"):
        route([Need("g", may_go_to=("google",))], missing=gone)
