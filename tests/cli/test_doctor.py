"""`prun doctor`, as a new user meets it: one line per fact with the fix for what is missing,
PATH deciding which agent CLIs are here; a plan's needs marked, exit 1 when one is missing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import FAKES, make_fake_cli, prun, without_agent_clis
from prun.doctor import CHECKS, Context, Fact, examine

CLIS = ("agy", "claude", "gemini")


@pytest.fixture(autouse=True)
def bare_path(monkeypatch):
    without_agent_clis(monkeypatch)


def with_agy(tmp_path) -> dict[str, str]:
    make_fake_cli(tmp_path / "bin", "agy", FAKES / "fake_agy.py")
    return {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}


def facts(stdout: str) -> dict[str, str]:
    """``topic name`` -> its whole line."""
    return {" ".join(line.split()[:2]): line for line in stdout.splitlines()}


def test_doctor_says_what_is_here_and_how_to_fix_what_is_not(repo, tmp_path):
    r = prun("doctor", cwd=repo, env=with_agy(tmp_path))
    assert (r.returncode, r.stderr) == (0, "")
    found = facts(r.stdout)
    assert found["executor agy"].startswith(
        f'executor agy status=ok detail="{tmp_path / "bin" / "agy"}, version agy 0.0.0-fake, '
        'signed in: cannot be told offline"')
    assert found["executor claude"] == (
        'executor claude status=missing detail="not-installed: claude not found on PATH" '
        'fix="install claude so that it is on PATH or set PRUN_CLAUDE_BIN to its path"')
    assert found["executor session"].startswith("executor session status=ok")
    for key in ("sandbox bwrap", "limits memory", "limits pids", "limits cpus", "quota snapshot",
                "ledger ledger", "extra mcp", "extra dask", "extra review", "skill claude", "mcp claude"):
        assert key in found, r.stdout
    assert 'quota snapshot status=ok detail="none yet at ' in found["quota snapshot"]
    assert found["skill claude"].endswith('fix="prun skill install --for claude"')
    assert found["mcp claude"].endswith('fix="prun mcp install --for claude"')
    assert "needed=yes" not in r.stdout          # no plan: nothing is needed
    assert not (repo / ".prun").exists()          # nothing made
    r = prun("skill", "install", "--for", "claude", cwd=repo)
    assert r.returncode == 0, r.stderr
    line = facts(prun("doctor", cwd=repo).stdout)["skill claude"]
    assert line.startswith("skill claude status=ok") and "fix=" not in line


def test_doctor_marks_what_the_plan_needs_and_exits_1_when_it_is_missing(repo, tmp_path):
    (repo / "p.md").write_text("---\nid: p\nexecutor: agy\n---\nDo the work.\n")
    (repo / "plan.yaml").write_text("packets: [p.md]\n")
    r = prun("doctor", cwd=repo)                  # plan.yaml in the current folder by default
    assert r.returncode == 1, r.stdout + r.stderr
    found = facts(r.stdout)
    assert found["executor agy"].startswith("executor agy status=missing ")
    assert found["executor agy"].endswith(" needed=yes")
    assert found["plan routing"].startswith(
        'plan routing status=missing detail="p.md:3: packet p can go only to agy '
        '(not-installed), missing on this machine" fix="install agy so that it is on PATH')
    assert "needed=yes" not in found["executor claude"]
    r = prun("doctor", "plan.yaml", "--json", cwd=repo, env=with_agy(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is True and doc["plan"] == "plan.yaml"
    agy = next(f for f in doc["facts"] if (f["topic"], f["name"]) == ("executor", "agy"))
    assert (agy["status"], agy["needed"], agy["fix"]) == ("ok", True, None)
    # an auto unit with agy missing goes to session: nothing it needs is missing
    (repo / "p.md").write_text("---\nid: p\n---\nDo the work.\n")
    r = prun("doctor", cwd=repo)
    assert r.returncode == 0, r.stdout
    assert facts(r.stdout)["executor session"].endswith(" needed=yes")


def test_doctor_refuses_a_plan_it_cannot_read(tmp_path):
    r = prun("doctor", "nowhere.yaml", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (2, "")
    assert len(r.stderr.splitlines()) == 1


def test_a_check_is_one_function_in_the_list(tmp_path):
    """A later check (issue 34's resource limits) is one function: its facts come out in
    order, and a plan's need of it is marked."""
    def limits_v2(ctx: Context) -> list[Fact]:
        return [Fact("limits", "cgroup", "missing", "not delegated", "delegate one")]

    ctx = Context({}, Path(tmp_path), needs=frozenset({"limits:cgroup"}))
    report = examine(ctx, [limits_v2])
    assert report.lines() == ['limits cgroup status=missing detail="not delegated" '
                              'fix="delegate one" needed=yes']
    assert not report.ok
    assert all(callable(c) for c in CHECKS)


def test_doctor_tells_a_signed_in_claude_where_its_files_say_so(repo, tmp_path):
    make_fake_cli(tmp_path / "bin", "claude", FAKES / "fake_claude.py")
    env = {"PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config"), "ANTHROPIC_API_KEY": "",
           "CLAUDE_CODE_OAUTH_TOKEN": ""}
    line = facts(prun("doctor", cwd=repo, env=env).stdout)["executor claude"]
    assert line.startswith("executor claude status=ok") and "signed in: cannot be told" in line
    (tmp_path / "claude-config").mkdir()
    (tmp_path / "claude-config" / ".credentials.json").write_text("{}")
    line = facts(prun("doctor", cwd=repo, env=env).stdout)["executor claude"]
    assert line.startswith("executor claude status=ok") and "signed in: yes" in line


def test_doctor_says_whether_workspaces_are_overlaid_here(repo, bwrap, monkeypatch):
    from prun.attempt.overlay import overlays_unavailable

    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(repo.parent / "ws"))
    line = facts(prun("doctor", cwd=repo).stdout)["sandbox overlay"]
    if overlays_unavailable(str(repo.parent / "ws")) is None:
        assert line.startswith("sandbox overlay status=ok"), line
        assert "from 10000 tracked files at the base" in line
        on = facts(prun("doctor", cwd=repo, env={"PRUN_OVERLAY": "on"}).stdout)
        assert on["sandbox overlay"].endswith("code units' checkouts overlays\""), on
    else:
        assert line.startswith("sandbox overlay status=warn"), line
    off = facts(prun("doctor", cwd=repo, env={"PRUN_OVERLAY": "off"}).stdout)["sandbox overlay"]
    assert off == ('sandbox overlay status=warn detail="PRUN_OVERLAY=off: clones and copies" '
                   'fix="unset PRUN_OVERLAY for copy-on-write workspaces"')
    assert not list((repo.parent / "ws").glob(".overlay-probe-*"))   # the probe cleaned up
