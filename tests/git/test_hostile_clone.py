"""A hostile worker against the real `prun run`, in the real sandbox: whatever a code unit
does to its clone, the real repository's objects stay as they were (`git fsck` clean), no
command it planted runs on the host through `prun run` (a dependent built on it), `prun
reconcile` (and `--json`), `prun integrate`, `prun review --json` or `prun pause`, and what it
left that must never be read is rejected with its reason and left out of its change."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gitrepo import commit_all, g, write

from helpers import prun, write_plan
from prun.ledger import Ledger

HOSTILE = str(Path(__file__).with_name("hostile.py"))
SETUP = "if [ -f src/plant/hook.sh ]; then sh src/plant/hook.sh || true; fi"


def unit(pid: str, mode: str, **fields) -> dict:
    folder = f"src/{pid}"
    return {"id": pid, "kind": "code", "executor": "command", "owns": [f"{folder}/**"],
            "prompt": f"unit {pid}", "timeout": "120s", **fields,
            "command": [sys.executable, HOSTILE, mode, "MARKS", folder]}


def objects_of(repo: Path) -> dict[str, str]:
    """Every file under the repository's .git/objects and its SHA-256."""
    out = {}
    for path in sorted((repo / ".git" / "objects").rglob("*")):
        if path.is_file():
            out[str(path.relative_to(repo))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def hostile_repo(repo):
    """The test repository with packed and loose objects, and a folder for the marks the
    planted commands would leave (in the real .git: no unit can write there)."""
    g(repo, "gc", "-q")
    write(repo, {"src/app/later.py": "LATER = 1\n"})
    commit_all(repo, "a loose commit")
    marks = repo / ".git" / "prun-marks"
    marks.mkdir()
    return repo, marks


def plan_of(repo: Path, marks: Path, packets: list[dict], **settings) -> Path:
    for p in packets:
        p["command"] = [str(marks) if a == "MARKS" else a for a in p["command"]]
    return write_plan(repo / "plan.json", packets, **settings)


def test_a_hostile_worker_changes_nothing_it_does_not_own(hostile_repo, bwrap):
    repo, marks = hostile_repo
    before = objects_of(repo)
    assert any("/pack/" in p for p in before) and any("/pack/" not in p for p in before)
    plan = plan_of(repo, marks, [
        unit("objects", "objects"), unit("plant", "plant"),
        unit("dep", "check-start", after=["plant"]), unit("nested", "nested"),
        unit("zero", "index-zero"), unit("fifo", "index-fifo"), unit("files", "files")],
        setup=SETUP)
    r = prun("run", str(plan), cwd=repo, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    with Ledger.open() as ledger:
        attempts = {a["packet_id"]: dict(a) for a in ledger.attempts(run_id)}
    assert {a["status"] for a in attempts.values()} == {"succeeded"}, attempts
    assert all(a["sandboxed"] for a in attempts.values())
    assert "rewritten=0 " in Path(attempts["objects"]["state_dir"], "tail").read_text()

    r = prun("reconcile", cwd=repo, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = set(r.stdout.splitlines())
    assert {"ACCEPTED dep files=1", "ACCEPTED objects files=1",
            "ACCEPTED plant files=3"} <= lines, r.stdout
    why = '".git/index is not a regular file"'
    assert {f"REJECTED zero reason=broken-clone why={why}",
            f"REJECTED fifo reason=broken-clone why={why}",
            "REJECTED nested reason=nested-repository path=src/nested/sub",
            "REJECTED nested reason=special-file path=src/nested/elsewhere/HEAD kind=fifo",
            "REJECTED files reason=special-file path=src/files/pipe kind=fifo",
            "REJECTED files reason=special-file path=src/files/sock kind=socket",
            f"REJECTED files reason=sparse-file path=src/files/sparse.bin size={2 * 1024 ** 3}"
            f" allocated=0",
            f"REJECTED files reason=file-too-large path=src/files/big.bin size={101 * 1024 ** 2}"
            f" limit={100 * 1024 ** 2}",
            "REJECTED files reason=link-outside path=src/files/etc target=/etc",
            "REJECTED files reason=link-outside path=src/files/up target=../../../outside",
            } <= lines, r.stdout
    assert r.stdout.splitlines()[-1] == (f"RECONCILE run={run_id} packets=7 accepted=3 "
                                         "rejected=4 review=0 complete=no")

    j = prun("reconcile", "--json", cwd=repo, timeout=300)
    assert j.returncode == 1 and "Traceback" not in j.stderr
    packets = {p["packet"]: p for p in json.loads(j.stdout)["packets"]}
    files = {f["path"]: f for f in packets["files"]["change"]["files"]}
    assert set(files) == {"src/files/main.py", "src/files/ok"}
    assert files["src/files/ok"]["link_target"] == "main.py"
    assert packets["zero"]["change"]["files"] == [{"path": "src/zero/main.py",
                                                   "status": "added", "binary": False,
                                                   "added": 1, "deleted": 0}]

    for args in (["review", "--json"], ["pause", "plant"],
                 ["integrate", "--include", "files", "--include", "nested"]):
        done = prun(*args, cwd=repo, timeout=300)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode in (0, 1), (args, done.stdout, done.stderr)
    assert (repo / "src/files/main.py").read_text() == "WORK = 'files'\n"
    assert os.readlink(repo / "src/files/ok") == "main.py"
    for left_out in ("pipe", "sock", "sparse.bin", "big.bin", "etc", "up"):
        assert not os.path.lexists(repo / "src/files" / left_out)
    assert not (repo / "src/nested/sub").exists()
    assert (repo / "src/dep/main.py").is_file() and (repo / "src/plant/hook.sh").is_file()

    assert sorted(os.listdir(marks)) == []          # nothing planted ever ran on the host
    fsck = g(repo, "fsck", "--full", "--strict", check=False)
    assert fsck.returncode == 0, fsck.stderr
    after = objects_of(repo)
    assert {p: h for p, h in after.items() if p in before} == before


@contextlib.contextmanager
def other_file_system(tmp_path: Path):
    """A folder on another file system than ``tmp_path``: a tmpfs mounted here where this
    process may mount, else /dev/shm when it is one; the test is skipped elsewhere."""
    mount = tmp_path / "other-fs"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode == 0:
        try:
            yield mount
        finally:
            subprocess.run(["umount", "-l", str(mount)], check=False)
        return
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and \
            os.stat(shm).st_dev != os.stat(tmp_path).st_dev:
        folder = shm / f"prun-test-{os.getpid()}-{tmp_path.name}"
        folder.mkdir()
        try:
            yield folder
        finally:
            subprocess.run(["rm", "-rf", str(folder)], check=False)
        return
    pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}) and /dev/shm is no "
                "other file system")


def test_a_workspace_root_on_another_file_system_runs_code_units(repo, tmp_path, monkeypatch):
    code = ("import pathlib; pathlib.Path('src/app/main.py').write_text('moved\\n'); "
            "print('rewrote src/app/main.py as asked')")
    with other_file_system(tmp_path) as root:
        assert os.stat(root).st_dev != os.stat(repo).st_dev
        monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(root / "ws"))
        plan = write_plan(repo / "plan.json", [
            {"id": "code", "kind": "code", "executor": "command", "owns": ["src/app/**"],
             "prompt": "p", "command": [sys.executable, "-c", code]},
            {"id": "read", "kind": "read-only", "executor": "command", "prompt": "p",
             "command": [sys.executable, "-c", "print('read the snapshot, wrote nothing')"]}])
        r = prun("run", str(plan), cwd=repo, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        r = prun("reconcile", cwd=repo, timeout=120)
        assert r.stdout.splitlines()[:2] == ["ACCEPTED code files=1", "ACCEPTED read"], r.stdout
        r = prun("clean", cwd=repo, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
