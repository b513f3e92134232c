"""A full disk in the middle of `prun integrate`: the patch that could not be written whole is
put back at once (every file it touched byte-identical to before), its line names the reason,
and once space is freed the next integrate applies everything, with no false conflict.

The target's files live on a small tmpfs (mounting one needs root: as root on CI; elsewhere
the tests skip with the reason)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from gitrepo import commit_all, g, gout, write

from helpers import prun

SIZE = 2 << 20                     # the small file system: 2 MiB
BIG = 1536 << 10                   # the unit's new file: more than what is left free
SCRIPT = """
import json, os, pathlib, sys
job = json.loads(sys.argv[1])
for path, text in job["write"].items():
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(path).write_text(text)
pathlib.Path(job["big"]).write_bytes(os.urandom(job["size"]))
os.chmod(job["exec"], 0o755)
print("changed the files it was asked to change, and nothing else at all")
"""


@pytest.fixture
def small_fs(tmp_path):
    """Mounts a small tmpfs (2 MiB) on the folder it is given (unmounted after the test)."""
    mounted = []

    def mount(folder, size: int = SIZE):
        folder.mkdir(parents=True, exist_ok=True)
        why = None
        if os.geteuid() != 0:
            why = "mounting a small file system needs root"
        else:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                                str(folder)], capture_output=True, text=True)
            if r.returncode != 0:
                why = f"cannot mount a tmpfs here: {r.stderr.strip()}"
        if why:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI must run the full-disk test: {why}")
            pytest.skip(why)
        mounted.append(folder)
        return folder

    try:
        yield mount
    finally:
        for folder in mounted:
            subprocess.run(["umount", "-l", str(folder)], check=False)


def make_run(root, env=None):
    """A repository at ``root`` and a finished run of one unit that rewrites two files of
    ``data``, adds a big one there and one in new folders, and makes a script executable."""
    root.mkdir(parents=True, exist_ok=True)
    g(root, "init", "-q", "-b", "main")
    write(root, {"data/one.txt": "one\n" * 4000, "data/three.txt": "three\n" * 100,
                 "data/run.sh": "echo hi\n", "README.md": "readme\n"})
    (root / ".git" / "info" / "exclude").write_text("/plan.json\n/data/.filler\n/.filler\n")
    commit_all(root, "base")
    job = {"write": {"data/one.txt": "ONE\n" * 4000, "data/three.txt": "THREE\n",
                     "data/sub/dir/four.txt": "four\n"},
           "big": "data/two.bin", "size": BIG, "exec": "data/run.sh"}
    plan = {"packets": [{"id": "fill", "kind": "code", "executor": "command",
                         "owns": ["data/**"], "prompt": "p",
                         "command": [sys.executable, "-c", SCRIPT, json.dumps(job)]}]}
    (root / "plan.json").write_text(json.dumps(plan))
    r = prun("run", "plan.json", cwd=root, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr


PATHS = ["data/one.txt", "data/two.bin", "data/three.txt", "data/run.sh", "data/sub"]


def applied_after_space_is_freed(root, filler, env=None) -> None:
    filler.unlink()
    r = prun("integrate", "--no-check", cwd=root, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "CONFLICT" not in r.stdout and "FAILED" not in r.stdout, r.stdout
    assert "APPLIED fill files=5" in r.stdout, r.stdout
    assert (root / "data/sub/dir/four.txt").read_text() == "four\n"
    assert (root / "data/one.txt").read_text() == "ONE\n" * 4000
    assert (root / "data/three.txt").read_text() == "THREE\n"
    assert os.path.getsize(root / "data/two.bin") == BIG
    assert os.stat(root / "data/run.sh").st_mode & 0o111
    r = prun("integrate", "--no-check", cwd=root, env=env, timeout=120)   # once more: nothing twice
    assert r.returncode == 0 and "already=yes" in r.stdout, r.stdout + r.stderr


def fill(folder, leave: int):
    """A file in ``folder`` that takes all its free space but ``leave`` bytes."""
    st = os.statvfs(folder)
    filler = folder / ".filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def state(root, paths) -> dict:
    out = {}
    for p in paths:
        full = root / p
        out[p] = (None if not os.path.lexists(full) else "folder" if full.is_dir()
                  else (full.read_bytes(), os.stat(full).st_mode))
    return out


def test_a_full_disk_during_integrate_leaves_the_tree_as_it_was(small_fs, tmp_path):
    """The target's folder fills up half-way through the patch (its run folder elsewhere)."""
    root = tmp_path / "repo"
    small_fs(root / "data")
    make_run(root)
    before = state(root, PATHS)

    filler = fill(root / "data", leave=512 << 10)   # all but two.bin fit (written last)
    r = prun("integrate", "--no-check", cwd=root, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED fill reason=disk-full tree=restored" in r.stdout.splitlines(), r.stdout
    assert "APPLIED" not in r.stdout and "CONFLICT" not in r.stdout
    assert r.stdout.splitlines()[-1].endswith("applied=0 conflicts=0 skipped=0 failed=1 "
                                              "check=none committed=no")
    assert state(root, PATHS) == before                       # byte for byte, mode too
    assert gout(root, "status", "--porcelain") == ""
    applied_after_space_is_freed(root, filler)


def test_a_full_run_folder_changes_nothing(small_fs, tmp_path):
    """The run's folder (where the patch, the journal and the pre-images go) is the full file
    system: the patch cannot even be saved, and nothing in the tree is touched."""
    root = tmp_path / "repo"
    small_fs(root / ".prun", size=4 * SIZE)       # room for the patch once freed
    make_run(root)
    before = state(root, PATHS)

    filler = fill(root / ".prun", leave=64 << 10)
    r = prun("integrate", "--no-check", cwd=root, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "FAILED fill reason=disk-full tree=unchanged" in r.stdout.splitlines(), r.stdout
    assert state(root, PATHS) == before
    assert gout(root, "status", "--porcelain") == ""
    applied_after_space_is_freed(root, filler)
