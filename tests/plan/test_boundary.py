"""The data boundary: where each executor's data goes, what `may_go_to` allows, the retention
grammar, and the refusals of check, route, run and reassign."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import prun
from prun import executors
from prun.errors import UsageError
from prun.ledger import Ledger
from prun.plan import load_packet
from prun.plan.boundary import DELETE, KEEP, NONE, NOTE, Retention, allowed, parse_retention


@pytest.mark.parametrize("executor,model,expected", [
    ("agy", None, ("agy", "google")),
    ("agy", "gemini-3.1-pro", ("agy", "google")),
    ("agy", "claude-sonnet-4-6", ("agy", "google", "anthropic")),
    ("agy", "claude-opus-4-6-thinking", ("agy", "google", "anthropic")),
    ("agy", "gpt-oss-120b-medium", ("agy", "google", "openai")),
    ("agy", "some-new-model", ("agy", "google", "anthropic", "openai")),
    ("claude", None, ("claude", "anthropic")),
    ("claude", "opus", ("claude", "anthropic")),
    ("session", None, ("session", "anthropic")),
    ("gemini", None, ("gemini", "google")),
    ("command", None, ("command", "local")),
])
def test_each_executor_declares_where_its_data_goes(executor, model, expected):
    assert executors.get(executor).recipients(model) == expected


@pytest.mark.parametrize("may_go_to,executor,model,ok", [
    ((), "claude", None, True),                          # no boundary given
    (("agy",), "agy", "claude-sonnet-4-6", True),        # the executor named: any model
    (("agy",), "claude", None, False),
    (("google",), "agy", None, True),
    (("google",), "gemini", None, True),
    (("google",), "agy", "claude-sonnet-4-6", False),    # reaches anthropic too
    (("google", "anthropic"), "agy", "claude-sonnet-4-6", True),
    (("google",), "session", None, False),
    (("anthropic",), "session", None, True),
    (("anthropic",), "claude", "opus", True),
    (("google", "openai"), "agy", "gpt-oss-120b-medium", True),
    (("google",), "command", None, False),
    (("local",), "command", None, True),
])
def test_allowed(may_go_to, executor, model, ok):
    assert allowed(may_go_to, executor, model) is ok


@pytest.mark.parametrize("text,expected", [
    (None, Retention(NONE)),
    ("keep", Retention(KEEP, text="keep")),
    ("keep 30d", Retention(KEEP, keep_s=30 * 86400, text="keep 30d")),
    ("  keep 1h30m ", Retention(KEEP, keep_s=5400, text="  keep 1h30m ")),
    ("delete", Retention(DELETE, text="delete")),
    ("delete after integration", Retention(NOTE, text="delete after integration")),
    ("results kept with the run", Retention(NOTE, text="results kept with the run")),
    ("keeping nothing", Retention(NOTE, text="keeping nothing")),
])
def test_retention_grammar(text, expected):
    assert parse_retention(text) == expected


def test_keep_with_a_bad_duration_is_refused():
    with pytest.raises(UsageError, match="'keep' takes a duration"):
        parse_retention("keep forever")
    assert parse_retention("keep 30d").until(1000.0) == 1000.0 + 30 * 86400
    assert parse_retention("keep").until(1000.0) is None


# load time: check, route and run refuse -----------------------------------------------------

def packet_file(folder, name: str, front: str):
    path = folder / name
    path.write_text(f"---\n{front}\n---\nDo the work.\n")
    return path


def one_line_refusal(r, where: str) -> str:
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"prun: {where}: "), r.stderr
    return lines[0]


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    root.mkdir()
    for args in (["init", "-q"], ["-c", "user.email=t@example.invalid", "-c", "user.name=t",
                                  "commit", "-q", "--allow-empty", "-m", "base"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    return root


def test_a_named_executor_outside_the_boundary_is_refused_everywhere(repo):
    pk = packet_file(repo, "a.md", "id: a\nexecutor: claude\ndata:\n  may_go_to: [agy]")
    (repo / "plan.yaml").write_text("packets: [a.md]\n")
    for args in (["check", "plan.yaml"], ["route", "--no-quota", "a.md"],
                 ["route", "--no-quota", "plan.yaml"], ["run", "plan.yaml"]):
        line = one_line_refusal(prun(*args, cwd=repo), f"{pk.name}:3")
        assert "executor claude reaches anthropic, outside the data boundary (may_go_to: agy)" \
            in line
    assert not (repo / ".prun" / "runs").exists()          # nothing frozen
    with Ledger.open() as ledger:
        assert ledger.latest_run() is None


def test_check_and_run_refuse_a_unit_no_executor_inside_its_boundary_can_run(repo):
    pk = packet_file(repo, "o.md", "id: o\ndata:\n  may_go_to: [openai]")
    (repo / "plan.yaml").write_text("packets: [o.md]\n")
    for args in (["check", "plan.yaml"], ["run", "plan.yaml"]):     # routing decides this one
        line = one_line_refusal(prun(*args, cwd=repo), f"{pk.name}:3")
        assert "packet o: data may go to openai only, and no executor of the routing policy" \
            in line
    assert not (repo / ".prun" / "runs").exists()
    with Ledger.open() as ledger:
        assert ledger.latest_run() is None


def test_the_model_decides_for_agy(tmp_path):
    packet_file(tmp_path, "g.md", "id: g\nexecutor: agy\ndata:\n  may_go_to: google")
    assert load_packet(tmp_path / "g.md").data.may_go_to == ("google",)
    pk = packet_file(tmp_path, "c.md", "id: c\nexecutor: agy\nmodel: claude-sonnet-4-6\n"
                                       "data:\n  may_go_to: [google]")
    line = one_line_refusal(prun("route", "--no-quota", str(pk), cwd=tmp_path), f"{pk}:3")
    assert "agy with model claude-sonnet-4-6 reaches google, anthropic" in line


@pytest.mark.parametrize("data,line,words", [
    ("data:\n  may_go_to: [google, bogus]", 5, "data.may_go_to[1]: 'bogus' is neither an "
                                               "executor nor a provider family"),
    ("data:\n  may_go_to: the result file", 5, "data.may_go_to: 'the result file'"),
    ("data:\n  retention: keep forever", 5, "bad retention 'keep forever'"),
])
def test_bad_boundary_values_are_refused_with_their_line(tmp_path, data, line, words):
    pk = packet_file(tmp_path, "b.md", f"id: b\nkind: read-only\n{data}")
    r = prun("route", "--no-quota", str(pk), cwd=tmp_path)
    text = one_line_refusal(r, f"{pk}:{line}")
    assert words in text
    if "may_go_to" in words:
        assert "(use executors (agy, claude, command, gemini, session) or families (google, " \
               "anthropic, openai, local))" in text


def test_inline_packets_and_defaults_are_checked_in_the_plan(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text("packets:\n  - id: a\n    prompt: hi\n    data:\n      may_go_to: [google,"
                    " nowhere]\n")
    line = one_line_refusal(prun("check", str(plan), cwd=tmp_path), f"{plan}:5")
    assert "packets[0].data.may_go_to[1]: 'nowhere'" in line
    plan.write_text("defaults:\n  executor: gemini\n  data: {may_go_to: [anthropic]}\n"
                    "packets:\n  - {id: a, prompt: hi}\n")
    line = one_line_refusal(prun("check", str(plan), cwd=tmp_path), f"{plan}:2")
    assert "defaults: executor gemini reaches google" in line


def test_notes_and_boundaries_inside_load_as_before(tmp_path):
    pk = packet_file(tmp_path, "n.md", "id: n\nexecutor: gemini\ndata:\n"
                                       "  may_go_to: [google, local]\n"
                                       "  retention: results kept with the run")
    p = load_packet(pk)
    assert p.data.retention_rule == Retention(NOTE, text="results kept with the run")
    assert p.data.may_go_to == ("google", "local")


# reassign -----------------------------------------------------------------------------------

def test_reassign_refuses_an_executor_outside_the_boundary(repo):
    unit = {"id": "p", "executor": "command", "prompt": "unit p",
            "command": [sys.executable, "-c", "print('a result that is long enough to count')"],
            "data": {"may_go_to": ["local"]}}
    (repo / "plan.yaml").write_text(json.dumps({"packets": [unit]}))
    r = prun("run", "plan.yaml", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    r = prun("reassign", "p", "--run", run_id, "--executor", "agy", cwd=repo)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "prun: packet p: executor agy with model gemini-3.8-flash-high reaches google, outside "
        "the data boundary (may_go_to: local) (name an executor inside it, or executor: auto; "
        "a new recipient needs its own decision, not a change of configuration)"]
    with Ledger.open() as ledger:
        assert len(ledger.attempts(run_id, "p")) == 1
        assert not [e for e in ledger.events(run_id) if e["kind"] == "request"]
    r = prun("reassign", "p", "--run", run_id, "--executor", "command", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"REASSIGN p run={run_id} executor=command predecessor={run_id}:p:1" in r.stdout
