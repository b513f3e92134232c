"""`prun mcp install|uninstall`: the server's entry merged into Claude Code's and Gemini CLI's
configuration, in a project and in a home, never dropping another server or setting; and the
entry it writes starts a server that answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from prun.cli import main

FILES = {("claude", "project"): ".mcp.json", ("claude", "user"): ".claude.json",
         ("gemini", "project"): ".gemini/settings.json",
         ("gemini", "user"): ".gemini/settings.json"}


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "project"
    p.mkdir()
    subprocess.run(["git", "init", "-q", str(p)], check=True)
    return p


def run_prun(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("target", ["claude", "gemini"])
@pytest.mark.parametrize("scope", ["project", "user"])
def test_the_entry_is_merged_and_nothing_else_is_dropped(target, scope, home, project, capsys,
                                                         monkeypatch):
    monkeypatch.chdir(project)
    base = home if scope == "user" else project
    path = base / FILES[target, scope]
    path.parent.mkdir(parents=True, exist_ok=True)
    before = {"theme": "dark", "projects": {"/x": {"allowedTools": ["Bash"]}},
              "mcpServers": {"other": {"command": "other-server", "args": ["--flag"]}}}
    path.write_text(json.dumps(before, indent=4))
    where = ["--user"] if scope == "user" else []

    code, out, err = run_prun(capsys, "mcp", "install", "--for", target, *where)
    assert code == 0, err
    assert out.startswith(f"ADDED for={target} scope={scope} path={path} command=")
    data = json.loads(path.read_text())
    assert data["theme"] == "dark" and data["projects"] == before["projects"]
    assert data["mcpServers"]["other"] == before["mcpServers"]["other"]
    entry = data["mcpServers"]["prun"]
    assert [entry["command"], *entry["args"]] == [sys.executable, "-m", "prun", "mcp"]
    if target == "claude":
        assert entry["type"] == "stdio"
    else:
        assert entry["timeout"] >= 3_600_000, "a long wait is not cut at Gemini's default"

    code, out, _ = run_prun(capsys, "mcp", "install", "--for", target, *where)
    assert code == 0 and out.startswith("UNCHANGED ")

    code, out, _ = run_prun(capsys, "mcp", "uninstall", "--for", target, *where)
    assert code == 0 and out.startswith(f"REMOVED for={target}")
    data = json.loads(path.read_text())
    assert data["mcpServers"] == before["mcpServers"] and data["theme"] == "dark"
    code, out, _ = run_prun(capsys, "mcp", "uninstall", "--for", target, *where)
    assert out.startswith("ABSENT ")


def test_a_new_file_is_made_and_another_prun_entry_is_kept_without_force(project, capsys):
    path = project / ".mcp.json"
    code, out, _ = run_prun(capsys, "mcp", "install", "--for", "claude", "--project",
                            str(project), "--command", "prun mcp")
    assert code == 0 and out.startswith("ADDED ") and out.rstrip().endswith('command="prun mcp"')
    assert json.loads(path.read_text()) == {
        "mcpServers": {"prun": {"type": "stdio", "command": "prun", "args": ["mcp"]}}}
    text = path.read_text()
    code, out, err = run_prun(capsys, "mcp", "install", "--for", "claude", "--project",
                              str(project))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"prun: {path} already has an MCP server named prun with another "
                          "command")
    assert err.rstrip().endswith("(keep it, or pass --force to replace it)")
    assert path.read_text() == text, "nothing was written"
    code, out, _ = run_prun(capsys, "mcp", "install", "--for", "claude", "--project",
                            str(project), "--force")
    assert code == 0 and out.startswith("REPLACED ")


def test_a_file_that_is_not_json_is_refused_and_left_as_it_was(project, capsys):
    path = project / ".gemini" / "settings.json"
    path.parent.mkdir()
    path.write_text('{\n  // a comment\n  "theme": "dark"\n}\n')
    code, out, err = run_prun(capsys, "mcp", "install", "--for", "gemini", "--project",
                              str(project))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"prun: {path} is not plain JSON")
    assert "add the prun entry by hand (docs/coordinators.md)" in err
    assert path.read_text() == '{\n  // a comment\n  "theme": "dark"\n}\n'


def test_outside_a_repository_the_project_must_be_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_prun(capsys, "mcp", "install", "--for", "claude")
    assert (code, out) == (2, "")
    assert err == ("prun: this folder is not inside a git repository "
                   "(give --project DIR, or --user for your home folder)\n")


def test_the_written_entry_starts_a_server_that_answers(project, capsys):
    pytest.importorskip("mcp.client.stdio")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    assert run_prun(capsys, "mcp", "install", "--for", "claude", "--project", str(project))[0] == 0
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["prun"]

    async def names():
        import os

        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       cwd=str(project), env=dict(os.environ))
        with open(Path(project) / "server.log", "w") as log:
            async with stdio_client(params, errlog=log) as (r, w), ClientSession(r, w) as s:
                init = await s.initialize()
                tools = await s.list_tools()
                return init, [t.name for t in tools.tools]

    init, tools = anyio.run(names)
    assert init.server_info.name == "prun" and "wait" in tools and "integrate" in tools
    assert "prun://runs/{run}/results/{packet}" in init.instructions


def test_a_claude_project_install_approves_its_server_and_only_it(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]},
                                 "enabledMcpjsonServers": ["theirs"]}))
    code, out, err = run_prun(capsys, "mcp", "install", "--for", "claude")
    assert code == 0, err
    assert out.startswith("ADDED ") and str(local) in err
    data = json.loads(local.read_text())
    assert data == {"permissions": {"allow": ["Bash(ls)"]},
                    "enabledMcpjsonServers": ["theirs", "prun"]}
    code, out, _ = run_prun(capsys, "mcp", "install", "--for", "claude")
    assert out.startswith("UNCHANGED ") and \
        json.loads(local.read_text())["enabledMcpjsonServers"] == ["theirs", "prun"]
    code, out, _ = run_prun(capsys, "mcp", "uninstall", "--for", "claude")
    assert code == 0 and out.startswith("REMOVED ")
    assert json.loads(local.read_text())["enabledMcpjsonServers"] == ["theirs"]


def test_approving_needs_local_settings_that_are_an_object(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text("[1, 2]")
    code, out, err = run_prun(capsys, "mcp", "install", "--for", "claude")
    assert code == 2 and out == "" and "settings.local.json" in err
    assert not (project / ".mcp.json").exists() and local.read_text() == "[1, 2]"


@pytest.mark.parametrize("where", [["--user"], []])
def test_no_approval_where_none_is_needed(where, home, project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    target = "claude" if where else "gemini"
    code, _, err = run_prun(capsys, "mcp", "install", "--for", target, *where)
    assert code == 0 and "approved" not in err
    assert not (project / ".claude").exists()


def _prun_cmd(*args: str, cwd: Path, path: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PATH": path})


def test_the_entry_names_prun_as_path_finds_it_and_the_install_names_what_it_made(project,
                                                                                  tmp_path):
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "prun"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m prun \"$@\"\n")
    shim.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    r = _prun_cmd("mcp", "install", "--for", "claude", cwd=project, path=path)
    assert r.returncode == 0, r.stderr
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]["prun"]
    assert [entry["command"], *entry["args"]] == ["prun", "mcp"]
    assert r.stdout.rstrip().endswith('command="prun mcp"')
    made = f"{project / '.mcp.json'}, {project / '.claude' / 'settings.local.json'}"
    assert (f"prun: note: created {made}; git does not track or ignore /.mcp.json, "
            "/.claude/settings.local.json: commit them to share with the project, or add to "
            ".gitignore: /.mcp.json /.claude/settings.local.json\n") in r.stderr
    assert f"the prun on PATH here is {shim}, not this one's" in r.stderr

    # no prun on PATH: this interpreter by its absolute path, and why
    (project / ".gitignore").write_text(".claude/\n")
    r = _prun_cmd("mcp", "install", "--for", "gemini", cwd=project, path="/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    entry = json.loads((project / ".gemini" / "settings.json").read_text())["mcpServers"]["prun"]
    assert [entry["command"], *entry["args"]] == [sys.executable, "-m", "prun", "mcp"]
    assert (f"prun: note: prun is not on PATH here, so the entry names this interpreter by its "
            f"absolute path ({sys.executable}), which only this machine has") in r.stderr
    assert "/.gemini/settings.json" in r.stderr
