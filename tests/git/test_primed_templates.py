"""Primed templates through the real `prun run` (real git, real bubblewrap): the plan's
`workspace:` prime runs once per key across units and runs, again when the key changes; each
code unit gets the shared paths copy-on-write (an overlay where the kernel mounts one, its
writes in its own upper layer beside its clone; a copy with PRUN_OVERLAY=off) at the path the
template was primed at; shared paths are never part of a change; a failed prime fails its
units and is not kept; `prun clean` removes a unit's upper layers, `prun clean --templates`
lists and removes templates."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import prun
from prun.ledger import Ledger
from runkit import write_plan

# The prime: counts itself, and writes a dependency folder that records where it was made.
PRIME = textwrap.dedent("""
    import os, sys
    with open(sys.argv[1], 'a') as f:
        f.write(os.getcwd() + '\\n')
    os.makedirs('deps/bin', exist_ok=True)
    open('deps/lib.txt', 'w').write('lib ' + open('lock.txt').read())
    open('deps/bin/where', 'w').write(os.path.join(os.getcwd(), 'deps'))
    sys.exit(int(os.environ.get('PRIME_EXIT', '0')))
""")


def _git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def _unit(pid: str, code: str, **fields) -> dict:
    body = textwrap.dedent(code) + "\nprint('the unit did its work and reports it in full')\n"
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", body],
            "prompt": f"unit {pid}", "kind": "code", **fields}


def _run(repo: Path, tmp_path: Path, packets: list[dict], env: dict | None = None, **settings):
    counter = tmp_path / "primes.log"
    plan = write_plan(repo / "plan.yaml", packets, parallel=4, **settings,
                      workspace={"prime": [sys.executable, "-c", PRIME, str(counter)],
                                 "key": ["lock.txt"], "share": ["deps"]})
    r = prun("run", str(plan), env=env, timeout=120)
    run_id = r.stdout.split()[1]
    with Ledger.open() as led:
        attempts = {a["packet_id"]: dict(a) for a in led.attempts(run_id)}
        status = {p["id"]: p["status"] for p in led.packets(run_id)}
    primes = counter.read_text().splitlines() if counter.exists() else []
    return r, run_id, attempts, status, primes


# Each unit: its deps are the template's, at the path the prime ran at (its working folder);
# it writes into its own copy and changes one tracked file.
SIBLING = """
    import os
    assert open('deps/lib.txt').read() == 'lib v1\\n', open('deps/lib.txt').read()
    assert open('deps/bin/where').read() == os.path.join(os.getcwd(), 'deps')
    open('deps/lib.txt', 'w').write('changed by {pid}')
    os.remove('deps/bin/where')
    open('{pid}.txt', 'w').write('{pid}')
"""


@pytest.fixture
def lock_repo(tmp_path, monkeypatch):
    from helpers import working_repo

    return working_repo(tmp_path, monkeypatch, {"lock.txt": "v1\n", "README": "r\n"})


def _upper(ws: Path) -> Path:
    """The unit's own upper layer over the template's deps."""
    return Path(f"{ws}.overlay") / "0" / "upper"


def test_prime_runs_once_units_get_own_copies_and_changes_leave_shared_paths_out(
        lock_repo, tmp_path, overlay):
    repo = lock_repo
    units = [_unit(p, SIBLING.format(pid=p), owns=[f"{p}.txt"]) for p in ("a", "b", "c")]
    r, run_id, att, status, primes = _run(repo, tmp_path, units)
    assert r.returncode == 0, r.stdout + r.stderr
    assert status == {"a": "succeeded", "b": "succeeded", "c": "succeeded"}
    assert len(primes) == 1
    primed_at = primes[0]
    # the template is untouched by what the units wrote in their copies
    assert Path(primed_at, "deps", "lib.txt").read_text() == "lib v1\n"
    assert Path(primed_at, "deps", "bin", "where").exists()
    for p in "abc":   # each unit's writes in its own upper layer, not a full copy
        ws = Path(att[p]["workspace"])
        upper = _upper(ws)
        assert (upper / "lib.txt").read_text() == f"changed by {p}"
        assert (upper / "bin" / "where").is_char_device()   # the deletion: a whiteout
        assert sorted(q.name for q in upper.rglob("*")) == ["bin", "lib.txt", "where"]
        # the workspace is an overlay too: the mount point is in its own layer, and the host
        # sees the workspace itself as an empty folder
        mount_point = Path(f"{ws}.overlay") / "ws" / "upper" / "deps"
        assert mount_point.is_dir() and not mount_point.is_symlink()
        assert list(mount_point.iterdir()) == [] and list(ws.iterdir()) == []
    rec = prun("reconcile", run_id, "--json", timeout=120)
    assert rec.returncode == 0, rec.stdout + rec.stderr
    files = {p["packet"]: [f["path"] for f in p["change"]["files"]]
             for p in json.loads(rec.stdout)["packets"]}
    assert files == {"a": ["a.txt"], "b": ["b.txt"], "c": ["c.txt"]}
    done = prun("integrate", run_id, "--no-check", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "a.txt").read_text() == "a" and not (repo / "deps").exists()
    # prun clean removes the clones and their upper layers
    cleaned = prun("clean", run_id, timeout=120)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    for p in "abc":
        ws = Path(att[p]["workspace"])
        assert not ws.exists() and not Path(f"{ws}.overlay").exists()
    # the next run reuses the template while its key holds
    r2, _, _, status2, primes2 = _run(repo, tmp_path, [_unit("d", SIBLING.format(pid="d"),
                                                              owns=["d.txt"])])
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert status2 == {"d": "succeeded"} and len(primes2) == 1
    # a changed key file primes a template of its own
    (repo / "lock.txt").write_text("v2\n")
    _git(repo, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-qam", "v2")
    r3, _, _, status3, primes3 = _run(repo, tmp_path, [_unit("e", """
        assert open('deps/lib.txt').read() == 'lib v2\\n'
        open('e.txt', 'w').write('e')
    """, owns=["e.txt"])])
    assert r3.returncode == 0, r3.stdout + r3.stderr
    assert status3 == {"e": "succeeded"} and len(primes3) == 2 and primes3[1] != primed_at
    # prun clean --templates lists both and removes them
    dry = prun("clean", "--templates", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    assert sum(line.startswith("REMOVED template ") and " share=deps " in line
               for line in lines) == 2
    assert lines[-1] == "CLEAN templates removed=2 dry-run=yes"
    gone = prun("clean", "--templates", "--json")
    assert json.loads(gone.stdout)["removed"] == 2
    assert not Path(primed_at).exists()


def test_a_failed_prime_fails_its_units_and_is_not_kept(lock_repo, tmp_path, bwrap):
    repo = lock_repo
    units = [_unit("a", "open('a.txt', 'w').write('a')", owns=["a.txt"]),
             _unit("b", "open('b.txt', 'w').write('b')", owns=["b.txt"]),
             _unit("r", "pass", kind="read-only")]   # needs no template
    r, _run_id, att, status, primes = _run(repo, tmp_path, units, env={"PRIME_EXIT": "3"})
    assert r.returncode == 1, r.stdout + r.stderr
    assert status == {"a": "failed", "b": "failed", "r": "succeeded"}
    assert len(primes) == 1   # its run's other units fail without priming again
    for p in "ab":
        assert att[p]["reason"] == "prime-failed"
        assert "exited with code 3" in att[p]["error"] and "prime-" in att[p]["error"]
    assert any("reason=prime-failed" in line for line in r.stdout.splitlines()), r.stdout
    listed = prun("clean", "--templates", "--dry-run", "--json")
    assert all(t.get("reason") == "not-primed" for t in json.loads(listed.stdout)["templates"])
    # not cached: the next run primes again
    r2, _, _, status2, primes2 = _run(repo, tmp_path, units[:1])
    assert r2.returncode == 0, r2.stdout + r2.stderr
    assert status2 == {"a": "succeeded"} and len(primes2) == 2


def test_a_unit_cannot_change_the_template_or_the_repository(lock_repo, tmp_path, monkeypatch,
                                                               bwrap):
    repo = lock_repo
    shown = tmp_path / "shown"    # the prime's counter: nothing else of the test is writable
    shown.mkdir()
    monkeypatch.setenv("PRUN_SANDBOX_WRITABLE", str(shown))
    hostile = _unit("h", """
        import glob, os
        here = os.getcwd()
        tried = []
        targets = [os.path.join(os.path.dirname(here), 'template.json'),
                   os.path.join(os.path.dirname(here), 'stores'),
                   os.environ['REPO'] + '/lock.txt', os.environ['REPO'] + '/deps']
        for t in targets:
            try:
                with open(t if not t.endswith(('stores', 'deps')) else t + '/x', 'w') as f:
                    f.write('hostile')
                tried.append(t)
            except OSError:
                pass
        assert not tried, tried
        open('deps/lib.txt', 'w').write('mine')   # its own copy
        open('lock.txt', 'w').write('v9')          # its change
    """, owns=["lock.txt"])
    counter = shown / "primes.log"
    plan = write_plan(repo / "plan.yaml", [hostile],
                      workspace={"prime": [sys.executable, "-c", PRIME, str(counter)],
                                 "key": ["lock.txt"], "share": ["deps"]})
    r = prun("run", str(plan), env={"REPO": str(repo)}, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    primed_at = Path(counter.read_text().split()[0])
    assert (primed_at / "deps" / "lib.txt").read_text() == "lib v1\n"
    assert (primed_at / "lock.txt").read_text() == "v1\n"
    assert json.loads((primed_at.parent / "template.json").read_text())["share"] == ["deps"]
    assert (repo / "lock.txt").read_text() == "v1\n" and not (repo / "deps").exists()
    assert _git(repo, "status", "--porcelain") == "?? plan.yaml\n"


def test_a_dependent_whose_predecessor_changed_the_key_gets_its_own_template(lock_repo,
                                                                             tmp_path, bwrap):
    units = [_unit("a", """
                 assert open('deps/lib.txt').read() == 'lib v1\\n'
                 open('lock.txt', 'w').write('v2\\n')
             """, owns=["lock.txt"]),
             _unit("b", """
                 assert open('lock.txt').read() == 'v2\\n'
                 assert open('deps/lib.txt').read() == 'lib v2\\n', open('deps/lib.txt').read()
                 open('b.txt', 'w').write('b')
             """, owns=["b.txt"], after=["a"])]
    r, _run_id, _att, status, primes = _run(lock_repo, tmp_path, units)
    assert r.returncode == 0, r.stdout + r.stderr
    assert status == {"a": "succeeded", "b": "succeeded"}
    assert len(primes) == 2 and primes[0] != primes[1]


def test_a_units_write_and_delete_in_an_overlay_are_invisible_to_a_later_sibling(
        lock_repo, tmp_path, overlay):
    units = [_unit("a", """
                 import os, subprocess
                 assert open('setup-saw.txt').read() == 'lib v1\\n'   # the setup saw the deps
                 gone = subprocess.run(['umount', 'deps'], capture_output=True)
                 assert gone.returncode != 0 and os.path.exists('deps/lib.txt')
                 open('deps/lib.txt', 'w').write('mine')
                 os.remove('deps/bin/where')
                 open('deps/new.txt', 'w').write('new')
                 open('a.txt', 'w').write('a')
             """, owns=["a.txt"]),
             _unit("b", """
                 import os
                 assert open('deps/lib.txt').read() == 'lib v1\\n', open('deps/lib.txt').read()
                 assert os.path.exists('deps/bin/where') and not os.path.exists('deps/new.txt')
                 assert open('a.txt').read() == 'a'
                 open('b.txt', 'w').write('b')
             """, owns=["b.txt"], after=["a"])]
    r, run_id, att, status, primes = _run(lock_repo, tmp_path, units,
                                          setup="cat deps/lib.txt > setup-saw.txt")
    assert r.returncode == 0, r.stdout + r.stderr
    assert status == {"a": "succeeded", "b": "succeeded"} and len(primes) == 1
    rec = prun("reconcile", run_id, "--json", timeout=120)
    files = {p["packet"]: [f["path"] for f in p["change"]["files"]]
             for p in json.loads(rec.stdout)["packets"]}
    assert files == {"a": ["a.txt"], "b": ["b.txt"]}
    assert sorted(q.name for q in _upper(Path(att["a"]["workspace"])).rglob("*")) == [
        "bin", "lib.txt", "new.txt", "where"]
    assert list(_upper(Path(att["b"]["workspace"])).iterdir()) == []
    template = Path(primes[0], "deps")
    assert (template / "lib.txt").read_text() == "lib v1\n"
    assert (template / "bin" / "where").exists() and not (template / "new.txt").exists()


def test_with_prun_overlay_off_each_unit_gets_a_copy(lock_repo, tmp_path, bwrap):
    units = [_unit(p, SIBLING.format(pid=p), owns=[f"{p}.txt"]) for p in ("a", "b")]
    r, _run_id, att, status, primes = _run(lock_repo, tmp_path, units,
                                           env={"PRUN_OVERLAY": "off"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert status == {"a": "succeeded", "b": "succeeded"} and len(primes) == 1
    primed_at = primes[0]
    assert Path(primed_at, "deps", "lib.txt").read_text() == "lib v1\n"
    for p in "ab":   # each unit's own copy, no link to the template, no overlay
        ws = Path(att[p]["workspace"])
        assert (ws / "deps" / "lib.txt").read_text() == f"changed by {p}"
        assert not (ws / "deps").is_symlink() and not Path(f"{ws}.overlay").exists()
        assert (ws / "deps" / "lib.txt").stat().st_ino != Path(primed_at, "deps",
                                                                "lib.txt").stat().st_ino


def test_a_shared_path_under_a_link_is_refused_never_written_through(tmp_path):
    # a tracked link (a predecessor's accepted change) on the way to a shared path would send
    # the copy or the overlay's mount point out of the clone
    from prun.errors import WorkspaceError
    from prun.git.template import Template, give

    tree, clone, outside = tmp_path / "ws", tmp_path / "clone", tmp_path / "outside"
    (tree / "frontend" / "node_modules").mkdir(parents=True)
    (tree / "frontend" / "node_modules" / "dep.js").write_text("dep\n")
    clone.mkdir()
    outside.mkdir()
    (clone / "frontend").symlink_to(outside)
    t = Template("k" * 64, str(tmp_path), str(tree), "true", ("frontend/node_modules",), 0.0,
                 "HEAD")
    with pytest.raises(WorkspaceError, match="is not a folder"):
        give(t, str(clone))
    assert list(outside.iterdir()) == []
