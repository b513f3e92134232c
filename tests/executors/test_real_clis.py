"""The real Claude Code and Gemini CLI binaries, offline: prun's argv, environment, stream
reading, resume and timeout against the CLIs themselves, each talking to a loopback stand-in
for its model API (``fakes/model_api.py``).

The CLIs come from npm (``.ci/run`` installs the versions ``docs/executors.md`` names). Where
one is not on PATH its tests skip; on CI that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers import FAKES, prun, working_repo, write_plan
from prun.ledger import Ledger

from .conftest import Unit

ANSWER = "The mock model answers: all done, nothing else to report."
NPM = {"claude": "@anthropic-ai/claude-code", "gemini": "@google/gemini-cli"}
API = {"claude": "anthropic", "gemini": "gemini"}       # the model API each CLI talks to
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


class ModelAPI:
    """The loopback model API: its address and the requests it answered."""

    def __init__(self, url: str, log: Path):
        self.url, self.log = url, log

    def requests(self, cli: str) -> list[dict]:
        """The requests ``cli`` (claude or gemini) made, in order."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [r for r in map(json.loads, lines) if r["api"] == API[cli]]


@pytest.fixture
def model_api(tmp_path):
    log = tmp_path / "api-requests.jsonl"
    proc = subprocess.Popen([sys.executable, str(FAKES / "model_api.py"), str(log)],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()          # "PORT <n>" once it listens
        assert line.startswith("PORT "), f"the model API did not start: {line!r}"
        yield ModelAPI(f"http://127.0.0.1:{line.split()[1]}", log)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def real_binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    why = f"the real {name} CLI is not on PATH (npm install -g {NPM[name]})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must have it: {why}")
    pytest.skip(why)


def cli_env(model_api: ModelAPI, home: Path) -> dict[str, str]:
    """What both CLIs need to run offline against the loopback API, with ``home`` (made, and
    Gemini's auth setting written there) as HOME."""
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    return {"HOME": str(home), "NO_PROXY": "127.0.0.1", "TERM": "dumb", "NO_COLOR": "1",
            "ANTHROPIC_BASE_URL": model_api.url, "ANTHROPIC_API_KEY": "sk-test",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0", "IS_SANDBOX": "1",   # IS_SANDBOX: CI runs as root
            "GOOGLE_GEMINI_BASE_URL": model_api.url, "GEMINI_API_KEY": "test-key"}


def clean_environment(monkeypatch) -> None:
    """No proxy, and none of prun's per-CLI overrides, from the caller's environment."""
    for var in ("PRUN_CLAUDE_BIN", "PRUN_GEMINI_BIN", "PRUN_CLAUDE_MODEL", "PRUN_GEMINI_MODEL",
                "PRUN_CLAUDE_PERMISSION_MODE", *PROXIES):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(params=["claude", "gemini"])
def real_cli(request, tmp_path, monkeypatch, model_api):
    """One real CLI, found on PATH, with a fresh HOME and its API pointed at the loopback."""
    name = request.param
    real_binary(name)
    clean_environment(monkeypatch)
    for var, value in cli_env(model_api, tmp_path / "home").items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("PRUN_LEDGER", "off")
    monkeypatch.setenv("PRUN_STATE_ROOT", str(tmp_path / "state"))
    return name


def test_a_unit_publishes_the_real_clis_answer(real_cli, tmp_path, model_api):
    unit = Unit(tmp_path, real_cli)
    p = unit.dispatch("--sandbox", "off", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert unit.result.read_text().strip() == ANSWER
    session = (unit.state / "conversation-id").read_text().strip()   # from the init event
    outcome = unit.outcome
    assert (outcome["outcome"], outcome["reason"], outcome["exit_code"]) == ("succeeded", "ok", 0)
    assert outcome["session_id"] == session
    assert (outcome["tokens"]["in"], outcome["tokens"]["out"]) == (12, 9)  # the API's usage
    assert model_api.requests(real_cli)


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else b""
            for p in sorted(root.rglob("*"))}


def test_a_sandboxed_real_cli_reaches_its_api_and_works_in_its_workspace(
        real_cli, tmp_path, model_api, bwrap, monkeypatch):
    monkeypatch.delenv("PRUN_SANDBOX_WRITABLE", raising=False)
    person = files(tmp_path / "home")
    unit = Unit(tmp_path, real_cli)
    unit.prompt.write_text("MOCK-SHELL: echo in > inside.txt\n")
    p = unit.dispatch("--sandbox", "on", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert unit.outcome["sandboxed"] is True
    assert (unit.state / "work" / "inside.txt").read_text() == "in\n"
    assert unit.result.read_text().strip() == ANSWER
    # it found the person's settings (Gemini's auth type) as a copy, and wrote only its copies
    own = unit.state / "home"
    if real_cli == "gemini":
        assert (own / ".gemini" / "settings.json").exists()
    assert (own / (".claude.json" if real_cli == "claude" else ".gemini/tmp")).exists()
    assert files(tmp_path / "home") == person


@pytest.mark.parametrize("sandbox", ["off", "on"])
def test_a_follow_up_resumes_the_real_clis_conversation(real_cli, tmp_path, model_api, sandbox,
                                                        request, monkeypatch):
    if sandbox == "on":
        request.getfixturevalue("bwrap")
        monkeypatch.delenv("PRUN_SANDBOX_WRITABLE", raising=False)
    unit = Unit(tmp_path, real_cli)
    first = unit.dispatch("--sandbox", sandbox, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    state = unit.state
    session = (state / "conversation-id").read_text().strip()
    turns = max(r["turns"] for r in model_api.requests(real_cli))
    p = unit.dispatch("--sandbox", sandbox, "--continue-from", str(state), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert unit.result.read_text().strip() == ANSWER
    assert (unit.state / "conversation-id").read_text().strip() == session
    assert model_api.requests(real_cli)[-1]["turns"] > turns   # the earlier turn was sent again


SUBAGENT_TOOLS = {"claude": {"Agent", "Task", "Workflow"}, "gemini": {"invoke_agent"}}


@pytest.mark.parametrize("name", ["claude", "gemini"])
def test_a_sandboxed_unit_is_not_offered_its_clis_sub_agent_tool_unless_allotted(
        name, tmp_path, monkeypatch, model_api, bwrap):
    env = run_env(tmp_path, monkeypatch, model_api, "on")
    monkeypatch.delenv("PRUN_SANDBOX_WRITABLE", raising=False)
    repo = working_repo(tmp_path, monkeypatch, {"README.md": "a project\n"})
    plan = write_plan(repo / "plan.yaml", [{"id": "alone", "executor": name, "mode": "plan",
                                            "prompt": "Say what the project is."}])
    p = prun("run", str(plan), "--plain", env=env, timeout=240, cwd=repo)
    assert p.returncode == 0, p.stdout + p.stderr
    with Ledger.open() as led:
        (attempt,) = led.attempts(p.stdout.split()[1])
    state = Path(attempt["state_dir"])
    argv = json.loads((state / "unit.json").read_text())["argv"]
    flag = "--disallowedTools" if name == "claude" else "--policy"
    assert flag in argv, argv
    offered = {t for r in model_api.requests(name) for t in r["tools"]}
    assert offered and not offered & SUBAGENT_TOOLS[name], offered
    # allotted, the same unit is offered it: what the request shows is the flag's doing
    allowed = write_plan(repo / "fan.yaml", [{"id": "fan", "executor": name, "mode": "plan",
                                              "subdispatch": True,
                                              "prompt": "Say what the project is."}])
    before = len(model_api.requests(name))
    p = prun("run", str(allowed), "--plain", env=env, timeout=240, cwd=repo)
    assert p.returncode == 0, p.stdout + p.stderr
    offered = {t for r in model_api.requests(name)[before:] for t in r["tools"]}
    assert offered & SUBAGENT_TOOLS[name], offered


def test_a_hanging_real_cli_is_ended_at_the_timeout(real_cli, tmp_path, model_api):
    unit = Unit(tmp_path, real_cli)
    unit.prompt.write_text("MOCK-HANG: wait for an answer that never comes.\n")
    p = unit.dispatch("--sandbox", "off", "--timeout", "8", timeout=120)
    assert p.returncode == 124, p.stdout + p.stderr
    assert unit.result.read_text().startswith("FALLBACK reason=timeout")
    worker = json.loads((unit.state / "unit.json").read_text())["worker"]
    assert not psutil.pid_exists(worker["pid"]) or \
        psutil.Process(worker["pid"]).status() == psutil.STATUS_ZOMBIE
    assert any(r["hang"] for r in model_api.requests(real_cli))


def run_env(tmp_path: Path, monkeypatch, model_api: ModelAPI, sandbox: str) -> dict[str, str]:
    """The environment of a `prun run` whose units use both real CLIs."""
    for name in ("claude", "gemini"):
        real_binary(name)
    clean_environment(monkeypatch)
    return {**cli_env(model_api, tmp_path / "home"),
            "PRUN_LEDGER": str(tmp_path / "ledger.sqlite"), "PRUN_SANDBOX": sandbox}


def test_a_run_drives_both_real_clis(tmp_path, monkeypatch, model_api):
    env = run_env(tmp_path, monkeypatch, model_api, "off")
    repo = working_repo(tmp_path, monkeypatch, {"README.md": "a project\n"})
    plan = write_plan(repo / "plan.yaml", [
        {"id": "from-claude", "executor": "claude", "mode": "plan",
         "prompt": "Read README.md and say what the project is."},
        {"id": "from-gemini", "executor": "gemini", "mode": "plan",
         "prompt": "Read README.md and say what the project is."}])
    p = prun("run", str(plan), "--plain", env=env, timeout=240, cwd=repo)
    assert p.returncode == 0, p.stdout + p.stderr
    results = Path(p.stdout.split("RESULTS ", 1)[1].split()[0])
    for pid in ("from-claude", "from-gemini"):
        assert (results / f"{pid}.1.md").read_text().strip() == ANSWER
    assert model_api.requests("claude") and model_api.requests("gemini")


def test_real_clis_in_a_sandboxed_run_change_their_clones_never_the_repository(
        tmp_path, monkeypatch, model_api, bwrap):
    env = run_env(tmp_path, monkeypatch, model_api, "on")
    repo = working_repo(tmp_path, monkeypatch, {"README.md": "a project\n"})
    packets = [{"id": f"by-{name}", "executor": name, "kind": "code", "mode": "accept-edits",
                "owns": [f"{name}.txt"],
                "prompt": f"MOCK-SHELL: echo {name} > {name}.txt; echo stray > {repo}/stray.txt"}
               for name in ("claude", "gemini")]
    plan = write_plan(repo / "plan.yaml", packets)
    p = prun("run", str(plan), "--plain", env=env, timeout=240, cwd=repo)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not (repo / "stray.txt").exists()           # the real repository is read-only
    r = prun("reconcile", "--json", env=env, timeout=120, cwd=repo)
    assert "claude.txt" in r.stdout and "gemini.txt" in r.stdout, r.stdout + r.stderr


def shell_unit(real_cli: str, tmp_path: Path, command: str) -> tuple[Unit, Path]:
    """A write-capable unit in a git clone whose model calls the shell tool with ``command``."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    unit = Unit(tmp_path, real_cli)
    unit.prompt.write_text(f"MOCK-SHELL: {command}\n")
    p = unit.dispatch("--sandbox", "off", "--mode", "accept-edits", timeout=120,
                      env={"PRUN_SCRATCH_CWD": str(clone)})
    assert p.returncode == 0, p.stdout + p.stderr
    return unit, clone


def test_the_real_clis_shell_tool_runs_in_the_workspace(real_cli, tmp_path, model_api):
    unit, clone = shell_unit(real_cli, tmp_path, "echo made > made.txt")
    assert (clone / "made.txt").read_text() == "made\n"
    assert unit.outcome["tool_uses"] == 1


def test_in_plan_mode_the_real_clis_shell_tool_is_denied_and_the_denial_kept(
        real_cli, tmp_path, model_api):
    unit = Unit(tmp_path, real_cli)
    unit.prompt.write_text("MOCK-SHELL: echo x > planned.txt\n")
    p = unit.dispatch("--sandbox", "off", "--mode", "plan", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr     # a denied tool is no failure
    assert not (unit.state / "work" / "planned.txt").exists()
    (denial,) = unit.outcome["denials"]
    assert denial["tool"] == ("Bash" if real_cli == "claude" else "run_shell_command")


def test_the_real_clis_shell_tool_cannot_commit(real_cli, tmp_path, model_api):
    """Claude: prun's PreToolUse hook refuses the call; Gemini: prun's git wrapper refuses it."""
    unit, clone = shell_unit(real_cli, tmp_path, "git -c user.email=t@example.com -c "
                             "user.name=t commit --allow-empty -qm sneaky")
    log = subprocess.run(["git", "-C", str(clone), "log", "--oneline"], capture_output=True,
                         text=True)
    assert log.stdout == ""                                       # no commit was made
    sent_back = "\n".join(r["tool_result"] or "" for r in model_api.requests(real_cli))
    assert "commit" in sent_back and "refused" in sent_back, sent_back   # the model was told
    if real_cli == "claude":                                      # and the outcome lists it
        assert [d.get("by") for d in unit.outcome["denials"]] == ["prun-guard"]


def test_the_real_clis_find_the_skill_and_the_mcp_server(real_cli, tmp_path, monkeypatch):
    """After `prun skill install` and `prun mcp install` in a project, each CLI started there
    lists the skill and connects to prun's server (Claude headless too: the install approves
    the project's server)."""
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    monkeypatch.chdir(project)
    for what in ("skill", "mcp"):
        p = prun(what, "install", "--for", real_cli, cwd=project)
        assert p.returncode == 0, p.stderr
    if real_cli == "claude":
        # A headless claude waits only briefly for its MCP servers before it starts (the
        # server's own start, mostly the MCP SDK's imports, is about a second here; more on a
        # loaded machine): a run that starts first shows it "pending", so up to three runs.
        for _ in range(3):
            p = subprocess.run([shutil.which("claude"), "-p", "hi", "--output-format",
                                "stream-json", "--verbose"], capture_output=True, text=True,
                               cwd=project, stdin=subprocess.DEVNULL, timeout=120)
            assert p.returncode == 0, p.stderr
            init = json.loads(p.stdout.splitlines()[0])
            assert "prun" in init["skills"]
            (server,) = [s for s in init["mcp_servers"] if s["name"] == "prun"]
            assert server["source"] == "project" and server["status"] in ("connected", "pending")
            if server["status"] == "connected":
                break
        assert server["status"] == "connected", init["mcp_servers"]
        assert {"mcp__prun__run", "mcp__prun__wait", "mcp__prun__status"} <= set(init["tools"])
    else:
        listed = {}
        for what in ("mcp", "skills"):
            p = subprocess.run([shutil.which("gemini"), what, "list"], capture_output=True,
                               text=True, cwd=project, stdin=subprocess.DEVNULL, timeout=120,
                               env={**os.environ, "GEMINI_CLI_TRUST_WORKSPACE": "true"})
            assert p.returncode == 0, p.stderr
            listed[what] = p.stdout + p.stderr
        assert any(line.strip().startswith("✓ prun:") and line.rstrip().endswith("Connected")
                   for line in listed["mcp"].splitlines()), listed["mcp"]
        assert "prun [Enabled]" in listed["skills"], listed["skills"]


def test_a_real_cli_as_coordinator_calls_prun_over_mcp(real_cli, tmp_path, monkeypatch,
                                                       model_api):
    """A coordinating session's model calls prun's quota tool: the CLI starts prun's MCP
    server from the installed entry, calls it, and hands the model its answer (Claude the
    structured content, Gemini the lines)."""
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    p = prun("mcp", "install", "--for", real_cli, cwd=project)
    assert p.returncode == 0, p.stderr
    tool = "mcp__prun__quota" if real_cli == "claude" else "mcp_prun_quota"
    prompt = f"MOCK-TOOL: {tool} {{}}"
    argv = ([shutil.which("claude"), "-p", prompt, "--output-format", "stream-json", "--verbose",
             "--dangerously-skip-permissions"] if real_cli == "claude" else
            [shutil.which("gemini"), "-p", prompt, "--output-format", "stream-json", "--yolo",
             "-m", "gemini-3.8-flash"])
    for _ in range(3):      # a headless claude may start before the server is up (see above)
        p = subprocess.run(argv, capture_output=True, text=True, cwd=project, timeout=120,
                           stdin=subprocess.DEVNULL,
                           env={**os.environ, "GEMINI_CLI_TRUST_WORKSPACE": "true"})
        assert p.returncode == 0, p.stderr
        sent_back = [r["tool_result"] for r in model_api.requests(real_cli) if r["tool_result"]]
        if sent_back and "group" in sent_back[-1]:
            break
    answer = sent_back[-1]
    if real_cli == "claude":
        assert '"groups"' in answer and '"claude"' in answer, answer
    else:
        assert "QUOTA group=gemini" in answer, answer


def test_a_real_clis_quota_error_is_recorded_as_a_hit(real_cli, tmp_path, model_api):
    unit = Unit(tmp_path, real_cli)
    unit.prompt.write_text("MOCK-QUOTA: the API says the quota is spent.\n")
    p = unit.dispatch("--sandbox", "off", timeout=120)
    assert p.returncode == 1, p.stdout + p.stderr
    outcome = unit.outcome
    assert outcome["outcome"] == "failed" and outcome["quota"]["group"] == real_cli
    assert "quota" in outcome["quota"]["message"]
    assert unit.result.read_text().startswith("FALLBACK")
    q = prun("quota", "--json")                      # the next dispatches know
    assert q.returncode == 0, q.stderr
    group = json.loads(q.stdout)["groups"][real_cli]
    assert (group["state"], group["source"], group["left"]) == ("empty", "hit", 0), group


def test_cancelling_a_run_ends_the_real_clis_and_all_they_started(tmp_path, monkeypatch,
                                                                   model_api):
    env = run_env(tmp_path, monkeypatch, model_api, "off")
    repo = working_repo(tmp_path, monkeypatch, {"README.md": "a project\n"})
    plan = write_plan(repo / "plan.yaml", [
        {"id": f"stuck-{name}", "executor": name, "prompt": "MOCK-HANG: never answered."}
        for name in ("claude", "gemini")])
    p = prun("run", str(plan), "--detach", env=env, timeout=60, cwd=repo)
    assert p.returncode == 0, p.stderr
    run_id = p.stdout.split()[1]
    deadline = time.monotonic() + 120     # until both CLIs have sent their request
    while len({r["api"] for r in model_api.requests("claude") + model_api.requests("gemini")
               if r["hang"]}) < 2:
        assert time.monotonic() < deadline, "the CLIs never reached the API"
        time.sleep(0.2)
    c = prun("cancel", run_id, "--wait", "60", env=env, timeout=120, cwd=repo)
    assert c.returncode == 0, c.stdout + c.stderr
    s = prun("status", run_id, "--json", env=env, timeout=60, cwd=repo)
    statuses = {u["packet_id"]: u["status"] for u in json.loads(s.stdout)["units"]}
    assert statuses == {"stuck-claude": "cancelled", "stuck-gemini": "cancelled"}, s.stdout
    left = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("PRUN_RUN_ID") == run_id:
                left.append(proc.info["pid"])
        except psutil.Error:
            continue
    assert left == [], "processes of the run outlived its cancel"


@pytest.mark.parametrize("name", ["claude", "gemini"])
def test_a_follow_up_in_a_run_resumes_the_real_clis_conversation(name, tmp_path, monkeypatch,
                                                                  model_api):
    env = run_env(tmp_path, monkeypatch, model_api, "off")
    repo = working_repo(tmp_path, monkeypatch, {"README.md": "a project\n"})
    plan = write_plan(repo / "plan.yaml", [{"id": "asked", "executor": name, "kind": "code",
                                            "owns": ["notes.md"], "prompt": "Say hello."}])
    p = prun("run", str(plan), "--plain", env=env, timeout=240, cwd=repo)
    assert p.returncode == 0, p.stdout + p.stderr
    run_id = p.stdout.split()[1]
    turns = max(r["turns"] for r in model_api.requests(name))
    more = tmp_path / "more.md"
    more.write_text("And one more thing.\n")
    f = prun("followup", "asked", "--prompt-file", str(more), "--run", run_id, "--wait", "60",
             env=env, timeout=120, cwd=repo)
    assert f.returncode == 0 and "resume=yes" in f.stdout, f.stdout + f.stderr
    w = prun("wait", run_id, env=env, timeout=240, cwd=repo)
    assert w.returncode == 0, w.stdout + w.stderr
    s = json.loads(prun("status", run_id, "--json", env=env, cwd=repo).stdout)
    (unit,) = s["units"]
    assert (unit["status"], unit["attempts"]) == ("succeeded", 2), unit
    assert model_api.requests(name)[-1]["turns"] > turns      # the conversation went on


def test_a_cross_vendor_panel_of_the_real_clis_agrees(tmp_path, monkeypatch, model_api):
    env = run_env(tmp_path, monkeypatch, model_api, "off")
    repo = working_repo(tmp_path, monkeypatch, {"README.md": "a project\n"})
    question = tmp_path / "question.md"
    question.write_text("Is README.md a plain text file?\n\n"
                        'MOCK-ANSWER: Looked.\\n```json\\n{"verdict": "yes"}\\n```\n')
    schema = tmp_path / "verdict.schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["verdict"],
                                  "properties": {"verdict": {"enum": ["yes", "no"]}}}))
    p = prun("panel", str(question), "--schema", str(schema), "--json", env=env, timeout=300,
             cwd=repo)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout)
    assert report["counts"]["valid"] == 2 and report["counts"]["panelists"] == 2, report
    executors = {x["executor"] for x in report["panelists"]}
    assert executors == {"claude", "gemini"}
    assert report["verdict"] == "agree" and report["counts"]["agree"] == 1
    assert [x["answer"] for x in report["panelists"]] == [{"verdict": "yes"}] * 2
