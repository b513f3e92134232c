"""`prun clean` keeps what is not integrated yet, and saves the change of every clone it
removes: reconcile, the review page and integrate read it as from the clone. Real runs of
command units through `prun`, real git."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from gitrepo import g, gout

from helpers import prun
from prun.ledger import Ledger

WORKER = """import json, os, sys
job = json.loads(sys.argv[1])
for path, text in job.get("write", {}).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    open(path, "w").write(text)
for path, n in job.get("binary", {}).items():
    open(path, "wb").write(bytes(range(256)) * n)
sys.stdout.write(job.get("result", "## Summary\\n\\nDid what the packet asked, nothing else.\\n"))
"""
MAIN = "def main():\n    return 2\n"


def unit(pid: str, owns: list[str] | None, job: dict, **extra) -> dict:
    kind = "code" if owns is not None else "read-only"
    return {"id": pid, "kind": kind, "executor": "command", "prompt": f"unit {pid}",
            "command": [sys.executable, "-c", WORKER, json.dumps(job)],
            **({"owns": owns} if owns is not None else {}), **extra}


def run_plan(repo: Path, packets: list[dict]) -> str:
    (repo / ".git" / "info" / "exclude").write_text("/plan.json\n")
    (repo / "plan.json").write_text(json.dumps({"packets": packets}))
    r = prun("run", "plan.json", cwd=repo, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()[1]


def attempts(run_id: str) -> dict[str, dict]:
    with Ledger.open() as ledger:
        return {a["packet_id"]: dict(a) for a in ledger.attempts(run_id)}


def verdicts(repo: Path, run_id: str) -> tuple[list[str], list[dict], list[str]]:
    """Reconcile's lines, its packets (where each change was read from left out) and where
    each was read from."""
    lines = prun("reconcile", run_id, cwd=repo).stdout.splitlines()
    packets = json.loads(prun("reconcile", run_id, "--json", cwd=repo).stdout)["packets"]
    read_from = []
    for p in packets:
        change = p["change"] or {}
        read_from.append(change.pop("read_from", None))
        change.pop("saved", None)
    return lines, packets, read_from


def page(repo: Path, run_id: str) -> list[dict]:
    """What `prun review --json` shows of each packet."""
    r = prun("review", run_id, "--json", cwd=repo, timeout=120)
    assert r.returncode == 0, r.stderr
    return [{k: p[k] for k in ("packet", "verdict", "reasons", "files", "diffs",
                               "diffs_not_shown", "sections")}
            for p in json.loads(r.stdout)["packets"]]


def test_clean_keeps_the_unintegrated_change_and_saves_the_others(repo):
    run_id = run_plan(repo, [
        unit("acc", ["src/app/**"], {"write": {"src/app/main.py": MAIN,
                                               "src/app/new.py": "NEW = 1\n"},
                                     "binary": {"src/app/data.bin": 3}}),
        unit("int", ["src/lib/**"], {"write": {"src/lib/core.py": "CORE = 2\n"}}),
        unit("rej", ["docs/**"], {"write": {"docs/guide.md": "# Guide\n\nMore.\n",
                                            "README.md": "leak\n"}}),
        unit("ro", None, {})])
    a = attempts(run_id)
    run_dir = Path(a["acc"]["result_path"]).parents[1]
    ws = {pid: a[pid]["workspace"] for pid in a}
    folder = Path(ws["acc"]).parent
    store = folder / f"objects-{a['acc']['base'][:12]}.git"
    snapshot = folder / f"snapshot-{a['ro']['base'][:12]}"

    # int is integrated; acc is not: the person's uncommitted edit of its file stops it
    (repo / "src/app/main.py").write_text("mine\n")
    r = prun("integrate", run_id, cwd=repo)
    assert r.returncode == 11, r.stdout + r.stderr
    assert "APPLIED int files=1 +1 -1" in r.stdout.splitlines()
    assert "CONFLICT acc path=src/app/main.py with=working-tree" in r.stdout.splitlines()
    assert "SKIPPED rej verdict=rejected" in r.stdout.splitlines()
    g(repo, "checkout", "--", "src/app/main.py")

    lines, packets, read_from = verdicts(repo, run_id)
    assert lines == ["ACCEPTED acc files=3", "ACCEPTED int files=1",
                     "REJECTED rej reason=scope-leak path=README.md", "ACCEPTED ro",
                     f"RECONCILE run={run_id} packets=4 accepted=3 rejected=1 review=0 "
                     "complete=no"]
    assert read_from == ["clone", "clone", "clone", None]
    shown = page(repo, run_id)
    assert "+NEW = 1\n" in shown[0]["diffs"]["src/app/new.py"]
    assert "Binary files /dev/null and b/src/app/data.bin differ" in \
        shown[0]["diffs"]["src/app/data.bin"]

    expected = [f"KEPT acc {ws['acc']} reason=not-integrated",
                f"SAVED int {run_dir / 'changes' / 'int.1.patch'}", f"REMOVED int {ws['int']}",
                f"SAVED rej {run_dir / 'changes' / 'rej.1.patch'}", f"REMOVED rej {ws['rej']}",
                f"REMOVED ro {ws['ro']}",
                # what reconcile finds in the read-only snapshot is saved with its unit first
                f"SAVED ro {run_dir / 'changes' / 'ro.1.json'}", f"REMOVED - {snapshot}",
                f"KEPT - {store} reason=not-integrated"]
    dry = prun("clean", run_id, "--dry-run", cwd=repo)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        *expected, f"CLEAN run={run_id} removed=4 kept=2 saved=3 dry-run=yes"]
    assert all(os.path.isdir(w) for w in ws.values())
    assert not (run_dir / "changes").exists()

    r = prun("clean", run_id, cwd=repo)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [*expected, f"CLEAN run={run_id} removed=4 kept=2 saved=3"]
    assert os.path.isdir(ws["acc"]) and store.is_dir()
    assert not any(os.path.exists(ws[p]) for p in ("int", "rej", "ro"))
    saved = json.loads((run_dir / "changes" / "int.1.json").read_text())
    assert saved["attempt"] == a["int"]["id"] and saved["base"] == a["int"]["base"]
    assert [f["path"] for f in saved["files"]] == ["src/lib/core.py"]
    j = json.loads(prun("clean", run_id, "--json", cwd=repo).stdout)   # kept on every clean
    assert [(k["packet"], k["path"], k["reason"]) for k in j["kept"]] == [
        ("acc", ws["acc"], "not-integrated"), ("-", str(store), "not-integrated")]
    assert j["removed"] == j["lost"] == j["saved"] == [] and j["refused"] == []

    # after the clean, reconcile and the review page say what they said before
    after = verdicts(repo, run_id)
    assert after[:2] == (lines, packets)
    assert after[2] == ["clone", "saved", "saved", None]
    assert page(repo, run_id) == shown

    forced = prun("clean", run_id, "--force", cwd=repo)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.splitlines() == [
        f"SAVED acc {run_dir / 'changes' / 'acc.1.patch'}",
        f"LOST acc {ws['acc']} reason=not-integrated", f"REMOVED - {store}",
        f"CLEAN run={run_id} removed=2 kept=0 saved=1 lost=1"]
    assert not os.path.exists(ws["acc"]) and not folder.exists()
    after = verdicts(repo, run_id)
    assert after[:2] == (lines, packets)
    assert after[2] == ["saved", "saved", "saved", None]
    assert page(repo, run_id) == shown

    # the accepted change was never lost: integrate applies it from the saved patch
    r = prun("integrate", run_id, "--json", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    units = {u["packet"]: u["action"] for u in json.loads(r.stdout)["units"]}
    assert units == {"acc": "applied", "int": "already", "rej": "skipped", "ro": "empty"}
    assert (repo / "src/app/main.py").read_text() == MAIN
    assert (repo / "src/app/new.py").read_text() == "NEW = 1\n"
    assert (repo / "src/app/data.bin").read_bytes() == bytes(range(256)) * 3
    assert (repo / "src/lib/core.py").read_text() == "CORE = 2\n"
    assert (repo / "README.md").read_text() == "readme\n"


def test_a_delete_retention_does_not_delete_an_unintegrated_change_without_force(repo):
    run_id = run_plan(repo, [unit("d", ["src/app/**"], {"write": {"src/app/main.py": MAIN}},
                                  data={"retention": "delete"})])
    d = attempts(run_id)["d"]
    run_dir = Path(d["result_path"]).parents[1]
    store = Path(d["workspace"]).parent / f"objects-{d['base'][:12]}.git"
    evidence = [str(run_dir / "prompts" / "d.1.md"), d["result_path"], d["state_dir"]]

    r = prun("clean", run_id, cwd=repo)
    assert r.returncode == 1
    assert r.stderr.startswith("prun: the retention of d is delete, but its change is not "
                               "integrated: its workspace and evidence are kept")
    lines = r.stdout.splitlines()
    assert lines[0] == f"KEPT d {d['workspace']} reason=not-integrated"
    assert set(evidence) <= {line.split()[2] for line in lines
                             if line.startswith("KEPT d ") and line.endswith("not-integrated")}
    assert lines[-2:] == [f"KEPT - {store} reason=not-integrated",
                          f"CLEAN run={run_id} removed=0 kept={len(lines) - 1}"]
    assert all(os.path.exists(p) for p in [d["workspace"], *evidence])
    assert json.loads(prun("clean", run_id, "--json", cwd=repo).stdout)["refused"] == ["d"]
    assert prun("reconcile", run_id, cwd=repo).stdout.splitlines()[0] == "ACCEPTED d files=1"

    r = prun("clean", run_id, "--force", cwd=repo)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"LOST d {d['workspace']} reason=not-integrated"   # the rule wins
    assert not any(line.startswith("SAVED") for line in lines)
    assert not any(os.path.exists(p) for p in [d["workspace"], *evidence])
    assert not (run_dir / "changes").exists()


def test_a_later_attempt_is_not_integrated_by_an_earlier_one(repo, tmp_path):
    from gitrepo import make_unit_state, write

    from prun.git import workspace
    from prun.plan import Packet

    base = gout(repo, "rev-parse", "HEAD")
    packet = Packet(id="a", prompt="do it", kind="code", owns=("src/app/**",))

    def attempt(seq: int, text: str) -> str:
        clone = workspace.make_clone(repo, base, tmp_path / "ws" / f"a.{seq}")
        write(Path(clone), {"src/app/main.py": text})
        sd, result = make_unit_state(tmp_path / f"s{seq}", "a")
        with Ledger.open() as ledger:
            ledger.record_attempt(f"a-{seq}", "test", run_id="run1", packet_id="a", seq=seq,
                                  executor="command", workspace=clone, base=base,
                                  state_dir=str(sd), result_path=str(result),
                                  receipt=f"a-{seq}", status="succeeded")
        return clone

    import dataclasses

    with Ledger.open() as ledger:
        ledger.record_run({"id": "run1", "repo_root": str(repo.resolve()), "base": base,
                           "run_dir": str(tmp_path / "run1")}, [dataclasses.asdict(packet)])
    first = attempt(1, "A\n")
    assert prun("integrate", "run1", cwd=repo).returncode == 0
    g(repo, "checkout", "--", ".")
    second = attempt(2, "B\n")      # a reassignment's successor decides now

    r = prun("clean", "run1", cwd=repo)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == [f"REMOVED a {first}",
                                         f"KEPT a {second} reason=not-integrated"]
    assert os.path.isdir(second)

    # the person rejects it: nothing waits any more; its change is saved, its clone removed
    assert prun("review", "run1", "--decide", "a", "reject", cwd=repo).returncode == 0
    r = prun("clean", "run1", cwd=repo)
    assert r.returncode == 0, r.stderr
    patch = tmp_path / "run1" / "changes" / "a.2.patch"
    assert r.stdout.splitlines()[:2] == [f"SAVED a {patch}", f"REMOVED a {second}"]
    assert prun("reconcile", "run1", cwd=repo).stdout.splitlines()[0] == "ACCEPTED a files=1"

    # a saved change that is not what was saved is never read as the change
    patch.write_bytes(patch.read_bytes().replace(b"+B", b"+C"))
    r = prun("reconcile", "run1", cwd=repo)
    assert r.stdout.splitlines()[0] == (
        f"REJECTED a reason=saved-change-broken path={patch.with_suffix('.json')} "
        "why=\"its patch is not the one saved\"")
    # and a clone gone with no saved change is what it always was
    patch.unlink()
    patch.with_suffix(".json").unlink()
    r = prun("reconcile", "run1", cwd=repo)
    assert r.stdout.splitlines()[0] == f"REJECTED a reason=no-workspace path={second}"


def test_a_changed_snapshot_still_rejects_its_read_only_unit_after_the_clean(repo):
    run_id = run_plan(repo, [unit("ro", None, {})])
    ro = attempts(run_id)["ro"]
    run_dir = Path(ro["result_path"]).parents[1]
    snapshot = Path(ro["workspace"]).parent / f"snapshot-{ro['base'][:12]}"
    os.chmod(snapshot, 0o755)                      # what a unit running as root could do
    (snapshot / "planted.txt").write_text("x\n")
    before = prun("reconcile", run_id, cwd=repo).stdout.splitlines()
    assert before[0].startswith("REJECTED ro reason=snapshot-modified snapshot=")

    r = prun("clean", run_id, cwd=repo)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1:3] == [f"SAVED ro {run_dir / 'changes' / 'ro.1.json'}",
                          f"REMOVED - {snapshot}"]
    assert not snapshot.exists()
    assert prun("reconcile", run_id, cwd=repo).stdout.splitlines() == before


def test_a_saved_change_keeps_its_findings_commits_renames_and_links(repo, tmp_path):
    import dataclasses

    from gitrepo import make_unit_state, write

    from prun.git import workspace
    from prun.plan import Packet

    base = gout(repo, "rev-parse", "HEAD")
    clone = Path(workspace.make_clone(repo, base, tmp_path / "ws" / "odd"))
    write(clone, {"src/app/main.py": "committed\n"})
    g(clone, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "against the rule")
    os.rename(clone / "src/app/util.py", clone / "src/app/helpers.py")
    os.symlink("main.py", clone / "src/app/link")
    os.mkfifo(clone / "src/app/pipe")
    (clone / "src/app/data.bin").write_bytes(bytes(range(256)))
    sd, result = make_unit_state(tmp_path, "odd")
    packet = Packet(id="odd", prompt="do it", kind="code", owns=("src/app/**",))
    with Ledger.open() as ledger:
        ledger.record_run({"id": "run1", "repo_root": str(repo.resolve()), "base": base,
                           "run_dir": str(tmp_path / "run1")}, [dataclasses.asdict(packet)])
        ledger.record_attempt("odd-1", "test", run_id="run1", packet_id="odd",
                              executor="command", workspace=str(clone), base=base,
                              state_dir=str(sd), result_path=str(result), receipt="odd-1",
                              status="succeeded")
    before = verdicts(repo, "run1")
    assert before[2] == ["clone"]
    change = before[1][0]["change"]
    assert before[1][0]["verdict"] == "rejected" and len(change["commits"]) == 1
    assert {f["path"]: f.get("link_target") for f in change["files"]}["src/app/link"] == "main.py"
    assert [f["code"] for f in change["findings"]] == ["special-file"]
    assert any(f["status"] == "renamed" for f in change["files"])

    r = prun("clean", "run1", cwd=repo)          # rejected: nothing waits, its change is saved
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == [f"SAVED odd {tmp_path / 'run1' / 'changes' / 'odd.1.patch'}",
                                         f"REMOVED odd {clone}"]
    after = verdicts(repo, "run1")
    assert after[:2] == before[:2] and after[2] == ["saved"]
