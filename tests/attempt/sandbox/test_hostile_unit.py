"""A hostile unit inside a real `prun run`, sandboxed: everything it tries outside its own places
fails and leaves no trace, and its own places (workspace, result, tmp, home) work. Its packet
does not allot subdispatch, so it can start no other agent either.

The person's home is one the test made (the sandbox keeps it visible, read-only), with fake agent
CLIs installed in it the way people install them: a file in ``~/.local/bin`` and an npm launcher
(a link to a ``.js`` file) in ``~/.npm-global/bin``."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from helpers import prun, seen, working_repo, write_plan
from prun.ledger import Ledger

AGENT = """#!{python}
import os, sys
open(os.path.join(os.environ.get("TMPDIR", "/tmp"), "agent-ran-{name}"), "w").close()
print("{name} ran", sys.argv[1:])
"""

HOSTILE = r"""
import errno, json, os, subprocess, sys
home, plan = sys.argv[1], sys.argv[2]
token = open(os.path.join(home, "token")).read().strip()
state = os.environ["PRUN_STATE_DIR"]
report, runs = {}, {}

def attempt(name, fn):
    try:
        fn()
        report[name] = "done"
    except OSError as e:
        report[name] = errno.errorcode.get(e.errno, str(e.errno))

def append(path):
    with open(path, "a") as f:
        f.write(token + "\n")

def create(path):
    with open(path, "x") as f:
        f.write(token + "\n")

# the person's files
attempt("bashrc", lambda: append(os.path.join(home, ".bashrc")))
attempt("authorized_keys", lambda: create(os.path.join(home, ".ssh", "authorized_keys")))
attempt("claude_settings", lambda: create(os.path.join(home, ".claude", "settings.json")))
attempt("claude_json", lambda: append(os.path.join(home, ".claude.json")))
attempt("agent_binary", lambda: append(os.path.join(home, ".local", "bin", "claude")))
# outside the unit: the machine's /tmp, the test's own folder
attempt("tmp_file", lambda: create("/tmp/" + token))
attempt("beside_home", lambda: create(os.path.join(os.path.dirname(home), token)))
attempt("interpreter", lambda: create(os.path.join(sys.prefix, token)))   # outside any /tmp
# the sibling unit, whose paths its result names
sibling = json.load(open(json.loads(os.environ["PRUN_PREDECESSOR_RESULTS"])["sibling"]))
attempt("sibling_clone_read", lambda: open(os.path.join(sibling["workspace"], "secret.txt")).read())
attempt("sibling_clone_write", lambda: append(os.path.join(sibling["workspace"], "secret.txt")))
attempt("sibling_clone_create", lambda: create(os.path.join(sibling["workspace"], "new.txt")))
attempt("sibling_state_read", lambda: open(os.path.join(sibling["state"], "unit.json")).read())
attempt("sibling_state_write", lambda: append(os.path.join(sibling["state"], "outcome.json")))
report["workspaces_seen"] = sorted(os.listdir(os.path.dirname(os.getcwd())))
# its own records
attempt("unit_json", lambda: append(os.path.join(state, "unit.json")))
attempt("outcome_json", lambda: create(os.path.join(state, "outcome.json")))
attempt("dispatch_pid", lambda: append(os.path.join(state, "dispatch-pid")))
attempt("prompt", lambda: append(os.path.join(state, "prompt")))
attempt("state_new_file", lambda: create(os.path.join(state, "forged")))
attempt("stdin_reopened", lambda: append("/proc/self/fd/0"))  # lands in its own copy
attempt("marker_write", lambda: append("/dev/prun-unit"))
attempt("marker_remove", lambda: os.unlink("/dev/prun-unit"))
# other agents: prun, by name and through the interpreter (its subdispatch variable unset)
bare = {k: v for k, v in os.environ.items() if k != "PRUN_SUBDISPATCH"}
prompt = os.path.join(os.environ["TMPDIR"], "p.md")
open(prompt, "w").write("do something\n")
dispatch = ["dispatch", "--executor", "command", "--command", "echo a nested unit ran",
            "--prompt-file", prompt, "--result-file", os.path.join(os.environ["TMPDIR"], "r.md"),
            "--unit-id", "nested", "--sandbox", "off"]
for name, argv in (("prun_run", ["prun", "run", plan]), ("prun_dispatch", ["prun", *dispatch]),
                   ("python_prun_run", [sys.executable, "-m", "prun", "run", plan]),
                   ("python_prun_dispatch", [sys.executable, "-m", "prun", *dispatch])):
    p = subprocess.run(argv, capture_output=True, text=True, env=bare)
    runs[name] = [p.returncode, p.stderr.strip().splitlines()]
lib = ("import sys\nfrom prun.attempt.dispatch import Request, run_sync\ntry:\n"
       "    run_sync(Request(executor='command', prompt_file=sys.argv[1], unit_id='lib',\n"
       "                     result_file=sys.argv[2], command='echo hi', sandbox='off'))\n"
       "    print('a nested unit ran')\nexcept Exception as e:\n"
       "    print(type(e).__name__, e)\n")
p = subprocess.run([sys.executable, "-c", lib, prompt, os.path.join(os.environ["TMPDIR"], "l.md")],
                   capture_output=True, text=True, env=bare)
runs["library"] = [p.returncode, p.stdout.strip().splitlines()]
# other agent CLIs: by name, by their full path, through an interpreter
npm = os.path.join(home, ".npm-global")
for name, argv in (
        ("claude", ["claude", "--version"]), ("gemini", ["gemini", "--version"]),
        ("agy", ["agy", "--version"]), ("codex", ["sh", "-c", "codex --version"]),
        ("claude_path", [os.path.join(home, ".local", "bin", "claude")]),
        ("agy_path", [os.path.join(home, ".local", "bin", "agy")]),
        ("gemini_path", [os.path.join(npm, "bin", "gemini")]),
        ("gemini_target", [os.path.join(npm, "lib", "gemini-cli", "bundle", "gemini.js")]),
        ("claude_interpreted", [sys.executable, os.path.join(home, ".local", "bin", "claude")])):
    p = subprocess.run(argv, capture_output=True, text=True)
    runs[name] = [p.returncode, p.stderr.strip().splitlines()[-1:]]
report["agents_ran"] = sorted(f for f in os.listdir(os.environ["TMPDIR"]) if f.startswith("agent-ran"))
# its own places
attempt("own_workspace", lambda: create("hostile.txt"))
attempt("own_tmp", lambda: create("/tmp/own.txt"))
attempt("own_tmpdir", lambda: create(os.path.join(os.environ["TMPDIR"], "own2.txt")))
attempt("own_var_tmp", lambda: create("/var/tmp/own3.txt"))
attempt("own_home", lambda: append(os.path.join(os.environ["HOME"], ".bashrc")))
json.dump({"report": report, "runs": runs}, open(os.environ["PRUN_RESULT_FILE"], "w"))
"""

SIBLING = r"""
import json, os
open("secret.txt", "w").write("the sibling's own work\n")
json.dump({"workspace": os.getcwd(), "state": os.environ["PRUN_STATE_DIR"]},
          open(os.environ["PRUN_RESULT_FILE"], "w"))
"""


def person_home(tmp_path: Path, token: str) -> Path:
    """A home as a person has it: a shell profile, ssh and Claude folders, agent CLIs."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".claude").mkdir()
    (home / ".bashrc").write_text("# the person's own profile\n")
    (home / ".claude.json").write_text('{"the person": "their own settings"}\n')
    (home / "token").write_text(token + "\n")
    local = home / ".local" / "bin"
    local.mkdir(parents=True)
    for name in ("claude", "agy"):
        (local / name).write_text(AGENT.format(python=sys.executable, name=name))
        (local / name).chmod(0o755)
    target = home / ".npm-global" / "lib" / "gemini-cli" / "bundle" / "gemini.js"
    target.parent.mkdir(parents=True)
    target.write_text(AGENT.format(python=sys.executable, name="gemini"))
    target.chmod(0o755)
    (home / ".npm-global" / "bin").mkdir()
    (home / ".npm-global" / "bin" / "gemini").symlink_to(
        "../lib/gemini-cli/bundle/gemini.js")
    return home


def files_holding(root: Path, token: str, allowed: list[Path]) -> list[str]:
    """Every file under ``root`` whose bytes hold ``token``, outside the ``allowed`` places."""
    found = []
    needle = token.encode()
    for folder, _dirs, files in os.walk(root):
        if any(Path(folder).is_relative_to(a) for a in allowed):
            continue
        for name in files:
            path = Path(folder, name)
            try:
                if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("overlays", [False, True], ids=["clones", "overlay-workspaces"])
def test_a_hostile_unit_writes_only_its_own_places_and_starts_no_agent(bwrap, tmp_path,
                                                                       monkeypatch, request,
                                                                       overlays):
    if overlays:   # each code unit's workspace an overlay over the run's checkout
        request.getfixturevalue("overlay")
    monkeypatch.delenv("PRUN_SANDBOX_WRITABLE", raising=False)   # nothing granted
    token = f"prun-hostile-{uuid.uuid4().hex}"
    home = person_home(tmp_path, token)
    bashrc, claude_json = (home / ".bashrc").read_bytes(), (home / ".claude.json").read_bytes()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", os.pathsep.join([str(home / ".local" / "bin"),
                                                str(home / ".npm-global" / "bin"),
                                                os.environ["PATH"]]))
    repo = working_repo(tmp_path, monkeypatch, {"README": "a project\n"})
    plan = write_plan(repo / "plan.json", [
        {"id": "sibling", "executor": "command", "kind": "code", "owns": ["secret.txt"],
         "command": [sys.executable, "-c", SIBLING], "prompt": "do your own work"},
        {"id": "hostile", "executor": "command", "kind": "code", "owns": ["hostile.txt"],
         "after": ["sibling"], "prompt": "attack everything",
         "command": [sys.executable, "-c", HOSTILE, str(home), str(repo / "plan.json")]},
    ], sandbox="on")
    r = prun("run", str(plan), "--plain", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    with Ledger.open() as led:
        att = {a["packet_id"]: dict(a) for a in led.attempts(run_id)}
        assert [x["id"] for x in led.runs()] == [run_id]       # no run was started inside
    assert att["hostile"]["sandboxed"] == 1
    got = json.loads(Path(att["hostile"]["result_path"]).read_text())
    report, runs = got["report"], got["runs"]

    # every attempt outside its places failed ...
    planted = Path(sys.prefix, token)
    if planted.exists():                                       # (a broken sandbox let it in)
        planted.unlink()
        raise AssertionError(f"the unit wrote {planted}")
    for name in ("bashrc", "authorized_keys", "claude_settings", "claude_json", "agent_binary",
                 "interpreter",
                 "sibling_clone_read", "sibling_clone_write", "sibling_clone_create",
                 "sibling_state_read", "sibling_state_write", "unit_json", "outcome_json",
                 "dispatch_pid", "prompt", "state_new_file", "marker_write", "marker_remove"):
        assert report[name] != "done", (name, report)
    sibling_ws, hostile_ws = Path(att["sibling"]["workspace"]), Path(att["hostile"]["workspace"])
    # no other workspace, not even named; only the object stores its clone borrows from
    others = [n for n in report["workspaces_seen"] if n != hostile_ws.name]
    assert all(n.startswith("objects-") and n.endswith(".git") for n in others), report
    assert hostile_ws.name in report["workspaces_seen"]
    for name in ("prun_run", "prun_dispatch", "python_prun_run", "python_prun_dispatch"):
        code, err = runs[name]
        assert code == 2 and len(err) == 1 and "subdispatch" in err[0], (name, runs[name])
    (said,) = runs["library"][1]                              # the library refuses too
    assert said.startswith("UsageError subdispatch is off for unit hostile"), runs["library"]
    for name in ("claude", "gemini", "agy", "codex", "claude_path", "agy_path", "gemini_path",
                 "gemini_target", "claude_interpreted"):
        assert runs[name][0] != 0, (name, runs[name])
    assert runs["claude"][1] == ["prun: claude cannot start here: this unit may not start other "
                                 "agents (subdispatch is off; a packet allots it with "
                                 "subdispatch: true). Report back to the coordinator instead."]
    assert report["agents_ran"] == []
    # ... and its own places worked
    for name in ("own_workspace", "own_tmp", "own_tmpdir", "own_var_tmp", "own_home",
                 "tmp_file", "beside_home", "stdin_reopened"):   # the last three: its own tmp
        assert report[name] == "done", (name, report)
    state = Path(att["hostile"]["state_dir"])
    with seen(hostile_ws) as tree:
        assert (tree / "hostile.txt").read_text() == token + "\n"
    assert (state / "tmp" / "own.txt").exists() and (state / "tmp" / "own2.txt").exists()
    assert (state / "tmp" / token).exists()

    # nothing outside its places changed
    assert (home / ".bashrc").read_bytes() == bashrc
    assert (home / ".claude.json").read_bytes() == claude_json
    assert not (home / ".ssh" / "authorized_keys").exists()
    assert not (home / ".claude" / "settings.json").exists()
    assert not Path("/tmp", token).exists() and not (tmp_path / token).exists()
    with seen(sibling_ws) as tree:
        assert (tree / "secret.txt").read_text() == "the sibling's own work\n"
        assert not (tree / "new.txt").exists()
    unit = json.loads((state / "unit.json").read_text())
    assert unit["worker"]["pid"] and unit["home"] == str(state / "home")
    assert json.loads((state / "outcome.json").read_text())["outcome"] == "succeeded"
    allowed = [hostile_ws, Path(f"{hostile_ws}.overlay"),   # (an overlay's own layer)
               state / "tmp", state / "home", state / "outbox"]
    assert files_holding(tmp_path, token, allowed) == [str(home / "token")]
    assert [p for p in Path("/tmp").iterdir() if token in p.name] == []
    rec = prun("reconcile", run_id)
    assert "ACCEPTED hostile" in rec.stdout and "ACCEPTED sibling" in rec.stdout, rec.stdout


def test_a_unit_allotted_subdispatch_may_start_agents(bwrap, tmp_path, monkeypatch):
    home = person_home(tmp_path, "unused")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", os.pathsep.join([str(home / ".local" / "bin"),
                                                os.environ["PATH"]]))
    repo = working_repo(tmp_path, monkeypatch, {"README": "a project\n"})
    code = textwrap.dedent(r"""
        import json, os, shutil, subprocess, sys
        tmp = os.environ["TMPDIR"]
        open(os.path.join(tmp, "p.md"), "w").write("say hi\n")
        env = {**os.environ, "PRUN_STATE_ROOT": os.path.join(tmp, "state"), "PRUN_LEDGER": "off"}
        p = subprocess.run([sys.executable, "-m", "prun", "dispatch", "--executor", "command",
                            "--command", "echo a nested unit ran fine", "--prompt-file",
                            os.path.join(tmp, "p.md"), "--result-file",
                            os.path.join(tmp, "r.md"), "--unit-id", "nested", "--sandbox", "off"],
                           capture_output=True, text=True, env=env)
        agent = subprocess.run(["claude", "--version"], capture_output=True, text=True)
        json.dump({"dispatch": p.returncode, "err": p.stderr, "agent": agent.stdout,
                   "marker": open("/dev/prun-unit").read()},
                  open(os.environ["PRUN_RESULT_FILE"], "w"))
    """)
    plan = write_plan(repo / "plan.json", [
        {"id": "fan", "executor": "command", "subdispatch": True, "prompt": "fan out",
         "command": [sys.executable, "-c", code]}], sandbox="on")
    r = prun("run", str(plan), "--plain", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    with Ledger.open() as led:
        (att,) = [dict(a) for a in led.attempts(r.stdout.split()[1])]
    got = json.loads(Path(att["result_path"]).read_text())
    assert got["dispatch"] == 0, got["err"]
    assert got["agent"].startswith("claude ran")
    assert json.loads(got["marker"])["subdispatch"] is True
