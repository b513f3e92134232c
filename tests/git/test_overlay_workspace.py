"""The checkout itself as an overlay, through the real `prun run` (real git, real bubblewrap,
real overlayfs): where a unit's sandbox can mount an overlay, a code unit's workspace is one
over the run's single read-only checkout of the base; its change (added, deleted, renamed,
binary and mode changes) is reconciled and integrated like a clone's; siblings do not see each
other's writes; the checkout never changes; a follow-up resumes in the same upper layer; `prun
clean` removes the layers and the checkout; with PRUN_OVERLAY=off each unit gets a clone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import last_attempt, poll, prun, seen, working_repo, write_plan
from prun.ledger import Ledger

BINARY = bytes(range(256)) * 4
RENAMED = "".join(f"line {i} of a file long enough to be found renamed\n" for i in range(40))
FILES = {"keep.txt": "keep\n", "gone.txt": "gone\n", "old.txt": RENAMED, "bin.dat": BINARY,
         "tool.sh": "#!/bin/sh\necho tool\n", "README": "r\n"}

# Changes every kind of thing a diff must see, checks the unit's own git sees its base, and
# that the run's checkout below it cannot be written from inside.
EDITS = """
    import os, subprocess
    base = subprocess.run(['git', 'rev-parse', 'HEAD'], capture_output=True, text=True,
                          check=True).stdout.strip()
    lower = os.path.join(os.path.dirname(os.getcwd()), 'checkout-' + base[:12], 'keep.txt')
    try:
        open(lower, 'a').write('x')
        raise SystemExit('the run checkout was writable: ' + lower)
    except OSError:
        pass
    open('keep.txt', 'w').write('kept and changed\\n')
    os.remove('gone.txt')
    os.rename('old.txt', 'new.txt')
    open('bin.dat', 'wb').write(bytes(reversed(range(256))) * 4)
    open('added.bin', 'wb').write(bytes([0, 1, 2, 255]) * 64)
    os.chmod('tool.sh', 0o755)
    os.makedirs('deep/er', exist_ok=True)
    open('deep/er/added.txt', 'w').write('added\\n')
    status = subprocess.run(['git', 'status', '--porcelain'], capture_output=True, text=True,
                            check=True).stdout
    assert ' D gone.txt' in status and ' M keep.txt' in status, status
"""

# Two siblings: each writes its own file and finds nothing of the other's.
SIBLING = """
    import os
    other = {other!r}
    assert not os.path.exists(other + '.txt'), 'saw the sibling write'
    assert open('keep.txt').read() == 'keep\\n'
    open('{pid}.txt', 'w').write('{pid}')
    open('keep.txt', 'w').write('changed by {pid}\\n')
    os.remove('README')
"""


def _unit(pid: str, code: str, **fields) -> dict:
    body = textwrap.dedent(code) + "\nprint('the unit did its work and reports it in full')\n"
    return {"id": pid, "executor": "command", "command": [sys.executable, "-c", body],
            "prompt": f"unit {pid}", "kind": "code", **fields}


def _run(repo: Path, packets: list[dict], env: dict | None = None):
    plan = write_plan(repo / "plan.yaml", packets, parallel=4)
    r = prun("run", str(plan), env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    with Ledger.open() as led:
        attempts = {a["packet_id"]: dict(a) for a in led.attempts(run_id)}
        status = {p["id"]: p["status"] for p in led.packets(run_id)}
    return r, run_id, attempts, status


def _files(run_id: str) -> dict[str, dict[str, dict]]:
    rec = prun("reconcile", run_id, "--json", timeout=120)
    assert rec.returncode in (0, 1), rec.stdout + rec.stderr
    return {p["packet"]: {f["path"]: f for f in p["change"]["files"]}
            for p in json.loads(rec.stdout)["packets"]}


def _tree(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``folder`` (its ``.git`` aside) with its mode and bytes."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0] == ".git" or path.is_dir():
            continue
        out[str(rel)] = (path.stat().st_mode, path.read_bytes())
    return out


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return working_repo(tmp_path, monkeypatch, FILES)


def _lower(ws: str) -> Path:
    record = json.loads(Path(f"{ws}.overlay", "layer.json").read_text())
    return Path(record["lower"])


def test_an_overlay_unit_change_is_reconciled_and_integrated_like_a_clone(repo, overlay):
    r, run_id, att, status = _run(repo, [_unit("edit", EDITS, owns=["**"])])
    assert status == {"edit": "succeeded"}, r.stdout + r.stderr
    ws = att["edit"]["workspace"]
    assert os.listdir(ws) == []                      # the host sees the mount point only
    upper = Path(f"{ws}.overlay", "ws", "upper")
    assert (upper / "gone.txt").is_char_device()     # the deletion: a whiteout
    assert not (upper / "README").exists()           # what it left alone is not copied
    lower = _lower(ws)
    assert _tree(lower) == {k: (os.stat(repo / k).st_mode, (repo / k).read_bytes())
                            for k in FILES}          # the checkout is the base, untouched
    files = _files(run_id)["edit"]
    assert {p: f["status"] for p, f in files.items()} == {
        "added.bin": "added", "bin.dat": "modified", "deep/er/added.txt": "added",
        "gone.txt": "deleted", "keep.txt": "modified", "new.txt": "renamed",
        "tool.sh": "modified"}
    assert files["new.txt"]["old_path"] == "old.txt"
    assert files["bin.dat"]["binary"] and files["added.bin"]["binary"]
    done = prun("integrate", run_id, "--no-check", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "keep.txt").read_text() == "kept and changed\n"
    assert not (repo / "gone.txt").exists() and not (repo / "old.txt").exists()
    assert (repo / "new.txt").read_text() == RENAMED
    assert (repo / "bin.dat").read_bytes() == bytes(reversed(range(256))) * 4
    assert (repo / "added.bin").read_bytes() == bytes([0, 1, 2, 255]) * 64
    assert os.stat(repo / "tool.sh").st_mode & 0o111
    assert (repo / "deep/er/added.txt").read_text() == "added\n"
    # prun clean removes the unit's layers and, with the run's last workspace, its checkout
    cleaned = prun("clean", run_id, timeout=120)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    assert not os.path.exists(ws) and not os.path.exists(f"{ws}.overlay")
    assert not lower.exists()
    assert f"REMOVED - {lower}" in cleaned.stdout


def test_siblings_see_nothing_of_each_other_and_the_checkout_never_changes(repo, overlay):
    units = [_unit("a", SIBLING.format(pid="a", other="b"), owns=["a.txt", "keep.txt",
                                                                  "README"]),
             _unit("b", SIBLING.format(pid="b", other="a"), owns=["b.txt"])]
    r, run_id, att, status = _run(repo, units)
    assert status == {"a": "succeeded", "b": "succeeded"}, r.stdout + r.stderr
    lowers = {str(_lower(att[p]["workspace"])) for p in "ab"}
    assert len(lowers) == 1                          # one checkout for the run and base
    lower = Path(lowers.pop())
    assert (lower / "README").read_text() == "r\n" and (lower / "keep.txt").read_text() == "keep\n"
    assert not (lower / "a.txt").exists() and not (lower / "b.txt").exists()
    for p in "ab":
        with seen(att[p]["workspace"]) as tree:      # each sees its own writes only
            assert (tree / f"{p}.txt").read_text() == p
            assert not (tree / {"a": "b", "b": "a"}[p]).with_suffix(".txt").exists()
            assert (tree / "keep.txt").read_text() == f"changed by {p}\n"
    files = _files(run_id)
    assert {p: sorted(f) for p, f in files.items()} == {
        "a": ["README", "a.txt", "keep.txt"], "b": ["README", "b.txt", "keep.txt"]}
    assert files["a"]["README"]["status"] == "deleted"


def test_a_follow_up_resumes_in_the_same_upper_layer(repo, overlay):
    code = ("import os, sys; text = sys.stdin.read(); n = len([f for f in os.listdir('.')"
            " if f.startswith('turn-')]); open(f'turn-{n}.txt', 'w').write(text);"
            " print('a result long enough, turn', n)")
    plan = write_plan(repo / "plan.yaml", [{"id": "job", "executor": "command",
                                            "command": [sys.executable, "-c", code],
                                            "prompt": "Do the job.", "kind": "code",
                                            "owns": ["turn-*.txt"]}])
    r = prun("run", str(plan), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    with Ledger.open() as led:
        cursor = led.last_event_seq(run_id)
    request = repo.parent / "more.md"
    request.write_text("Do it once more.")
    said = prun("followup", "job", "--prompt-file", str(request), "--run", run_id)
    assert said.returncode == 0, said.stdout + said.stderr
    waited = prun("wait", run_id, "--since", str(cursor), "--timeout", "60")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    with Ledger.open() as led:
        first, second = (dict(a) for a in led.attempts(run_id))
    assert second["workspace"] == first["workspace"]
    upper = Path(f"{first['workspace']}.overlay", "ws", "upper")
    assert sorted(p.name for p in upper.glob("turn-*.txt")) == ["turn-0.txt", "turn-1.txt"]
    assert "Do it once more." in (upper / "turn-1.txt").read_text()
    files = _files(run_id)["job"]
    assert sorted(files) == ["turn-0.txt", "turn-1.txt"]


def test_with_overlays_off_each_unit_gets_a_clone(repo, overlay):
    r, run_id, att, status = _run(repo, [_unit("edit", EDITS)],
                                  env={**os.environ, "PRUN_OVERLAY": "off"})
    assert status == {"edit": "succeeded"}, r.stdout + r.stderr
    ws = Path(att["edit"]["workspace"])
    assert (ws / ".git").is_dir() and (ws / "new.txt").read_text() == RENAMED
    assert not Path(f"{ws}.overlay").exists()
    assert not list(ws.parent.glob("checkout-*"))
    assert sorted(_files(run_id)["edit"]) == ["added.bin", "bin.dat", "deep/er/added.txt",
                                              "gone.txt", "keep.txt", "new.txt", "tool.sh"]


def test_by_default_a_small_base_gets_a_clone_a_person_can_open(repo, overlay, monkeypatch):
    """Unless PRUN_OVERLAY=on, a code unit's checkout is overlaid only from MIN_FILES
    tracked files: a small repository's units get clones, readable on the host as they are."""
    monkeypatch.delenv("PRUN_OVERLAY")
    r, _, att, status = _run(repo, [_unit("edit", EDITS)])
    assert status == {"edit": "succeeded"}, r.stdout + r.stderr
    ws = Path(att["edit"]["workspace"])
    assert (ws / ".git").is_dir() and (ws / "new.txt").read_text() == RENAMED
    assert not Path(f"{ws}.overlay", "ws").exists()


def test_the_default_overlays_a_checkout_from_min_files_tracked(repo, overlay, monkeypatch):
    from prun.git import layered

    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()
    count = layered.tracked_files(str(repo), base)
    assert count == len(FILES)
    auto = {k: v for k, v in os.environ.items() if k != "PRUN_OVERLAY"}
    dest = str(repo.parent / "workspaces" / "u.1")
    monkeypatch.setattr(layered, "MIN_FILES", count + 1)
    assert not layered.wanted(dest, auto, sandbox=True, base=base, objects=str(repo))
    assert layered.wanted(dest, {**auto, "PRUN_OVERLAY": "on"}, sandbox=True,
                          base=base, objects=str(repo))
    monkeypatch.setattr(layered, "MIN_FILES", count)
    assert layered.wanted(dest, auto, sandbox=True, base=base, objects=str(repo))
    assert not layered.wanted(dest, {**auto, "PRUN_OVERLAY": "off"}, sandbox=True,
                              base=base, objects=str(repo))
    assert not layered.wanted(dest, auto, sandbox=False, base=base, objects=str(repo))


def test_the_merged_view_of_an_overlay_workspace_ends_with_its_holder(repo, overlay):
    _, _, att, _ = _run(repo, [_unit("edit", "open('x.txt', 'w').write('x')")])
    ws = att["edit"]["workspace"]
    with seen(ws) as tree:
        holder = tree.parts[2]
        assert (tree / "x.txt").read_text() == "x" and (tree / "keep.txt").exists()
        assert holder.isdigit() and os.path.exists(f"/proc/{holder}")
    assert not os.path.exists(f"/proc/{holder}")


def test_a_dependent_gets_an_overlay_over_a_checkout_of_its_own_start(repo, overlay):
    r, run_id, att, status = _run(repo, [
        _unit("a", "open('a.txt', 'w').write('from a\\n')", owns=["a.txt"]),
        _unit("b", """
            assert open('a.txt').read() == 'from a\\n', 'b must start from a'
            open('b.txt', 'w').write('b saw: ' + open('a.txt').read())
        """, owns=["b.txt"], after=["a"])])
    assert status == {"a": "succeeded", "b": "succeeded"}, r.stdout + r.stderr
    start = att["b"]["base"]
    assert start != att["a"]["base"]
    assert _lower(att["a"]["workspace"]).name == f"checkout-{att['a']['base'][:12]}"
    assert _lower(att["b"]["workspace"]).name == f"checkout-{start[:12]}"
    assert {p: sorted(f) for p, f in _files(run_id).items()} == {"a": ["a.txt"], "b": ["b.txt"]}
    done = prun("integrate", run_id, "--no-check", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "b.txt").read_text() == "b saw: from a\n"


def test_pause_reads_a_live_overlay_unit(repo, overlay):
    code = ("import pathlib, time; pathlib.Path('keep.txt').write_text('half');"
            " pathlib.Path('extra.txt').write_text('X = 1\\n'); time.sleep(300)")
    plan = write_plan(repo / "plan.json", [{
        "id": "slow", "kind": "code", "executor": "command", "owns": ["*.txt"],
        "command": [sys.executable, "-c", code], "prompt": "p"}])
    r = prun("run", str(plan), "--detach")
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]

    a = poll(lambda: (x := last_attempt(run_id, "slow")) and x["status"] == "dispatched"
             and x["workspace"]
             and Path(f"{x['workspace']}.overlay", "ws", "upper", "extra.txt").exists() and x)
    r = prun("pause", "slow", timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith(f"PAUSED slow attempt={a['id']} stopped=stopped files=2 patch=")
    patch = Path(a["state_dir"], "paused.patch").read_text()
    assert "+half" in patch and "+X = 1" in patch
    assert poll(lambda: last_attempt(run_id, "slow")["status"] == "cancelled")
    with Ledger.open() as ledger:
        poll(lambda: ledger.run(run_id)["status"] != "running")
    cleaned = prun("clean", run_id)
    assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
    for path in (a["workspace"], a["workspace"] + ".quarantined"):
        assert not os.path.exists(path) and not os.path.exists(path + ".overlay")
    assert not list(Path(a["workspace"]).parent.glob("checkout-*"))


def test_a_link_out_of_an_overlay_workspace_is_found_as_in_a_clone(repo, overlay):
    code = """
        import os
        os.symlink('../../../etc', 'escape')
        os.symlink('keep.txt', 'inner')
        os.makedirs('sub')
        os.symlink('../inner', 'sub/chained')
        os.symlink('../escape', 'sub/through')
    """
    _, run_id, _, _ = _run(repo, [_unit("links", code, owns=["**"])])
    rec = prun("reconcile", run_id, "--json", timeout=120)
    (packet,) = json.loads(rec.stdout)["packets"]
    outside = sorted(r["path"] for r in packet["reasons"] if r["code"] == "link-outside")
    assert outside == ["escape", "sub/through"], packet["reasons"]
