"""Containment through the real `prun run`: each escape a worker could try, attempted from
inside a unit, leaves the real repository, the run's snapshot and the published result
unchanged, and no process behind."""

from __future__ import annotations

import json
import os
import select
import shlex
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from helpers import FAKES, make_fake_cli, prun
from prun.ledger import Ledger
from runkit import write_plan

REAL_GIT = shutil.which("git")


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def _run(repo, packets, **settings):
    plan = write_plan(repo / "plan.yaml", packets, **settings)
    r = prun("run", str(plan))
    run_id = r.stdout.split()[1]
    with Ledger.open() as led:
        attempts = {a["packet_id"]: dict(a) for a in led.attempts(run_id)}
        events = [dict(e) for e in led.events(run_id)]
    return r, run_id, attempts, events


def _py(pid: str, code: str, **fields) -> dict:
    return {"id": pid, "executor": "command",
            "command": [sys.executable, "-c", textwrap.dedent(code)],
            "prompt": f"unit {pid}", **fields}


class Fifo:
    """A named pipe a process keeps open for writing after it wrote one byte: ``drain`` reads
    until the end of file, which comes only when every process holding it has exited (None if
    one still holds it after ``timeout``)."""

    def __init__(self, path: Path):
        self.path = path
        os.mkfifo(path)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def drain(self, timeout: float = 30.0) -> bytes | None:
        got = b""
        while True:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                return None
            data = os.read(self.fd, 4096)
            if not data:
                return got
            got += data


# A daemon that leaves its unit's process group and keeps trying to rewrite the published
# result (and its own outbox, once it exists) until it is killed; it holds the fifo open while
# it lives. It never creates either: a file a unit's own process writes before the unit is
# judged is the unit's result, however it was written.
DAEMON = textwrap.dedent("""
    import os, sys, time
    fifo, targets = sys.argv[1], sys.argv[2:]
    if os.fork():                    # a double fork: the daemon's parent is gone at once
        os._exit(0)
    os.setsid()
    out = os.open(fifo, os.O_WRONLY)
    os.write(out, b"x")
    open(fifo + ".held", "w").close()  # the unit waits for this before it ends
    while True:
        time.sleep(0.05)
        for t in targets:
            try:             # only a file that exists: one prun published, or an outbox
                fd = os.open(t, os.O_WRONLY | os.O_APPEND)
            except OSError:  # (creating the outbox would be the unit's own result)
                continue
            os.write(fd, b"rewritten by a process the unit left behind\\n")
            os.close(fd)
""")

LEAVE_A_DAEMON = """
    import os, subprocess, sys
    state = os.environ["PRUN_STATE_DIR"]
    published = os.path.join(os.path.dirname(os.path.dirname(state)), "results", "{pid}.1.md")
    subprocess.Popen([sys.executable, "-c", {daemon!r}, {fifo!r}, published,
                      os.environ["PRUN_RESULT_FILE"], "{token}"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    import time
    while not os.path.exists({fifo!r} + ".held"):   # until the daemon holds the fifo
        time.sleep(0.01)
    print("the unit's own result, long enough to be published as it is")
"""


@pytest.mark.parametrize("sandbox", ["on", "off"])
def test_a_daemon_left_behind_never_rewrites_a_published_result(repo, tmp_path, sandbox,
                                                                request):
    if sandbox == "on":
        request.getfixturevalue("bwrap")
    fifo = Fifo(tmp_path / "daemon.fifo")
    token = f"prun-escape-{uuid.uuid4().hex}"
    code = LEAVE_A_DAEMON.format(pid="leaver", daemon=DAEMON, fifo=str(fifo.path), token=token)
    r, run_id, att, events = _run(repo, [_py("leaver", code)], sandbox=sandbox)
    assert r.returncode == 0, r.stdout + r.stderr
    assert fifo.drain() == b"x", "the daemon outlived its unit"
    result = Path(att["leaver"]["result_path"])
    assert result.read_text() == "the unit's own result, long enough to be published as it is\n"
    outcome = json.loads((Path(att["leaver"]["state_dir"]) / "outcome.json").read_text())
    assert outcome["sandboxed"] is (sandbox == "on")
    assert att["leaver"]["sandboxed"] == (1 if sandbox == "on" else 0)
    if sandbox == "off":  # the keeper, a subreaper, ended it and says so
        assert outcome["escaped"] and any(e["kind"] == "escaped" for e in events)
    rec = prun("reconcile", run_id)
    assert rec.returncode == 0, rec.stdout
    gather = prun("gather", str(result), "--timeout", "5")
    assert gather.stdout.splitlines()[-1] == f"DONE {result}"


def test_gather_monitor_and_reconcile_see_a_result_changed_after_publication(repo, tmp_path):
    _r, run_id, att, _ = _run(repo, [_py("plain", "print('a result long enough to be kept')")])
    result = Path(att["plain"]["result_path"])
    with open(result, "a") as f:                      # in place: the same file, new bytes
        f.write("changed afterwards\n")
    gather = prun("gather", str(result), "--timeout", "5")
    assert gather.returncode == 1
    assert gather.stdout.splitlines()[-1] == f"CHANGED {result} reason=result-changed"
    monitor = prun("monitor", att["plain"]["state_dir"], "--timeout", "5")
    assert monitor.returncode != 0 and "result-changed" in monitor.stdout
    rec = prun("reconcile", run_id)
    assert rec.returncode == 1 and "reason=result-changed" in rec.stdout


def test_a_forced_push_and_writes_never_reach_the_real_repository(repo, tmp_path, bwrap):
    refs = _git(repo, "for-each-ref")
    head = _git(repo, "rev-parse", "HEAD")
    report = tmp_path / "report.json"
    push = f"""
        import json, os, subprocess
        git = {REAL_GIT!r}          # the real git, by its path: past prun's wrapper
        def run(*args):
            p = subprocess.run([git, *args], capture_output=True, text=True)
            return p.returncode
        open("made.txt", "w").write("a change")
        codes = {{
            "commit": run("-c", "core.hooksPath=/dev/null", "-c", "user.email=w@x",
                          "-c", "user.name=w", "commit", "-q", "--no-verify", "--allow-empty",
                          "-m", "a worker's commit"),
            "push": run("-c", "protocol.allow=always", "push", "--no-verify",
                        "file://{repo}", "HEAD:refs/heads/x"),
            "force": run("-c", "protocol.allow=always", "push", "--force", "--no-verify",
                         "file://{repo}", "HEAD:refs/heads/main"),
        }}
        for target in ("{repo}/escaped-write.txt", "{repo}/.git/hooks/pre-commit",
                       "{repo}/.prun/ledger.sqlite"):
            try:
                open(target, "a").write("escaped")
                codes[target] = 0
            except OSError as e:
                codes[target] = e.errno
        json.dump(codes, open({str(report)!r}, "w"))
        print("the unit tried everything it should not")
    """
    look = f"""
        import json, os
        codes = {{}}
        snapshot = os.environ["PRUN_REPO_SNAPSHOT"]
        for target in (os.path.join(snapshot, "README"), os.path.join(snapshot, "new.txt"),
                       "{repo}/escaped-write.txt"):
            try:
                open(target, "a").write("escaped")
                codes[target] = 0
            except OSError as e:
                codes[target] = e.errno
        json.dump(codes, open({str(report)!r} + ".look", "w"))
        print("the read-only unit tried to write where it must not")
    """
    r, run_id, _att, _ = _run(repo, [_py("pusher", push, kind="code", owns=["made.txt"]),
                                    _py("looker", look)], sandbox="on")
    assert r.returncode == 0, r.stdout + r.stderr
    codes = json.loads(report.read_text())
    assert codes["commit"] == 0                    # a commit lands in the throwaway clone ...
    assert codes["push"] != 0 and codes["force"] != 0   # ... and never leaves it
    assert all(codes[t] != 0 for t in codes if t.startswith(str(repo)))
    looked = json.loads(Path(f"{report}.look").read_text())
    assert all(code != 0 for code in looked.values()), looked
    assert _git(repo, "for-each-ref") == refs and _git(repo, "rev-parse", "HEAD") == head
    assert not (repo / "escaped-write.txt").exists()
    rec = prun("reconcile", run_id)
    assert "REJECTED pusher reason=worker-committed" in rec.stdout   # and it is rejected
    assert "ACCEPTED looker" in rec.stdout                          # the snapshot is whole


DESTRUCTIVE = ("echo an edit >> README; echo new > untracked.txt; git reset --hard; "
               "git clean -fd; git checkout -- .; git restore README; git stash drop; "
               "git stash clear; git commit -am sneaky; git push; git branch x; git tag t; "
               "git status --short")


@pytest.mark.parametrize("executor", ["command", "agy", "gemini", "claude"])
def test_destructive_git_is_refused_for_every_executor(repo, tmp_path, monkeypatch, executor):
    packet = {"id": "edit", "kind": "code", "prompt": "edit the README",
              "owns": ["README", "untracked.txt"]}
    if executor == "command":
        packet.update(executor="command",
                      command=["sh", "-c", f"{DESTRUCTIVE}; echo done with every command"])
    else:
        source = {"agy": "fake_agy.py", "gemini": "fake_gemini.py", "claude": "fake_claude.py"}
        path = make_fake_cli(tmp_path / "bin", executor, FAKES / source[executor])
        monkeypatch.setenv(f"PRUN_{executor.upper()}_BIN", str(path))
        monkeypatch.setenv("IS_SANDBOX", "1")
        if executor == "claude":  # past its PreToolUse guard: git from a script, not Bash
            monkeypatch.setenv("FAKE_CLAUDE_SCENARIO", "bash")
            script = tmp_path / "edit.sh"
            script.write_text(DESTRUCTIVE + "\n")
            monkeypatch.setenv("FAKE_CLAUDE_BASH", f"sh {script}")
        else:
            monkeypatch.setenv(f"FAKE_{executor.upper()}_SCENARIO", "shell")
            monkeypatch.setenv(f"FAKE_{executor.upper()}_SHELL", DESTRUCTIVE)
        packet["executor"] = executor
    r, _run_id, att, _ = _run(repo, [packet])
    assert r.returncode == 0, r.stdout + r.stderr
    clone = Path(att["edit"]["workspace"])
    assert (clone / "README").read_text().endswith("an edit\n")     # the edit survived
    assert (clone / "untracked.txt").read_text() == "new\n"
    assert _git(clone, "rev-list", "--count", "HEAD") == "1\n"       # no commit
    assert _git(clone, "branch", "--list", "x") == "" and _git(clone, "tag") == ""
    log = (Path(att["edit"]["state_dir"]) / "guard.log").read_text()
    refused = [json.loads(line)["refused"] for line in log.splitlines()]
    for word in ("reset --hard", "clean", "commit", "push", "branch", "tag"):
        assert any(word in why for why in refused), (word, refused)


def _bin_without_bwrap(tmp_path) -> str:
    """A PATH with what a run needs (git, sh, env) but no bwrap: no sandbox can be made."""
    folder = tmp_path / "nobwrap"
    folder.mkdir()
    for tool in ("git", "sh", "env", "true"):
        os.symlink(shutil.which(tool), folder / tool)
    return str(folder)


def test_sandbox_on_refuses_where_none_can_be_made_and_auto_says_so_once(repo, tmp_path):
    plan = write_plan(repo / "plan.yaml", [_py("a", "print('a result long enough to keep')"),
                                           _py("b", "print('a result long enough to keep')")],
                      sandbox="on")
    env = {"PATH": _bin_without_bwrap(tmp_path)}
    r = prun("run", str(plan), env=env)
    assert r.returncode == 2 and r.stdout == ""
    assert "asks for sandbox: on, but no sandbox can be made here: no bwrap on PATH" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    with Ledger.open() as led:
        assert led.runs() == []                          # nothing frozen
    auto = write_plan(repo / "auto.yaml", [_py("a", "print('a result long enough to keep')"),
                                           _py("b", "print('a result long enough to keep')")])
    r = prun("run", str(auto), env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    said = [line for line in r.stderr.splitlines() if "units run unsandboxed" in line]
    assert said == ["prun: units run unsandboxed: no bwrap on PATH (Debian package bubblewrap)"]
    prompt = tmp_path / "p.md"
    prompt.write_text("say something long enough\n")
    d = prun("dispatch", "--executor", "command", "--command", "echo a result long enough",
             "--prompt-file", str(prompt), "--result-file", str(tmp_path / "r.md"),
             "--unit-id", "u", "--sandbox", "on", env=env)
    assert d.returncode == 2 and d.stdout == "" and not (tmp_path / "r.md").exists()
    assert "sandbox: on, but no sandbox can be made here" in d.stderr


def test_a_standalone_dispatch_is_sandboxed_too(repo, tmp_path, bwrap):
    prompt = tmp_path / "p.md"
    prompt.write_text("try to write into the repository you were started from\n")
    code = (f"import os; p = {str(repo / 'escaped.txt')!r}\n"
            "try:\n    open(p, 'w').write('x'); print('wrote into the real repository!')\n"
            "except OSError as e:\n    print('refused as it should be:', e.strerror)")
    r = prun("dispatch", "--executor", "command", "--command",
             f"{sys.executable} -c {shlex.quote(code)}", "--prompt-file", str(prompt),
             "--result-file", str(tmp_path / "r.md"), "--unit-id", "u", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "r.md").read_text().startswith("refused as it should be")
    assert not (repo / "escaped.txt").exists()
    state = Path(r.stdout.split()[1])
    assert json.loads((state / "unit.json").read_text())["sandbox"] is True


def test_the_setup_command_sees_the_unit_and_its_ports(repo, tmp_path):
    seen = tmp_path / "setup.json"
    plan = write_plan(repo / "plan.yaml", [_py("s", "print('a result long enough to keep')",
                                                state=["port:web"])],
                      setup=[sys.executable, "-c", "import json, os; json.dump(dict(os.environ), "
                             f"open({str(seen)!r}, 'w'))"])
    r = prun("run", str(plan))
    assert r.returncode == 0, r.stdout + r.stderr
    env = json.loads(seen.read_text())
    assert env["PRUN_UNIT_ID"] == env["PRUN_PACKET_ID"] == "s"
    assert int(env["PRUN_PORT_BASE"]) and int(env["PRUN_PORT_WEB"])


def test_a_sandboxed_code_unit_uses_git_in_its_clone(repo, tmp_path, bwrap):
    """The clone borrows its objects from the run's store, which the sandbox mounts
    read-only: everything a worker does with git in its clone works there."""
    report = tmp_path / "git.json"
    before = (repo / "README").read_bytes()
    work = f"""
        import json, subprocess
        def run(*args):
            p = subprocess.run(["git", *args], capture_output=True, text=True)
            return [p.returncode, p.stdout.strip()[:200], p.stderr.strip()[-200:]]
        with open("README", "a") as f:
            f.write("more\\n")
        out = {{"status": run("status", "--short"), "diff": run("diff", "--stat"),
               "log": run("log", "--oneline", "-1"), "show": run("show", "HEAD:README"),
               "add": run("add", "README"), "stash": run("stash"),
               "pop": run("stash", "pop"), "fsck": run("fsck", "--connectivity-only")}}
        json.dump(out, open({str(report)!r}, "w"))
        print("the unit used git in its clone")
    """
    r, _run_id, _att, _ = _run(repo, [_py("gitter", work, kind="code", owns=["README"])],
                               sandbox="on")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(report.read_text())
    assert all(code == 0 for code, _, _ in out.values()), out
    assert "README" in out["status"][1] and out["show"][1]
    assert (repo / "README").read_bytes() == before     # the real repository's own, unchanged
