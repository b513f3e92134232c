"""The read-only snapshot on real git repositories: one per base, no way out, no trace of its
source, read-only, and every change to it reported."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from gitrepo import commit_all, g, gout, write

from prun.errors import StateError, UsageError
from prun.git import workspace
from prun.git.pushconfig import push_config
from prun.git.snapshot import CHANGES_SHOWN, ensure_snapshot, remove_snapshot, snapshot_changes

WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


@pytest.fixture
def base(repo) -> str:
    return gout(repo, "rev-parse", "HEAD")


@pytest.fixture
def parent(tmp_path):
    """The run's folder of workspaces; its snapshots are removed after the test (pytest, not
    root, could not delete their read-only folders)."""
    folder = tmp_path / "ws" / "run1"
    yield folder
    for name in os.listdir(folder) if folder.exists() else ():
        if workspace.marker(folder / name):
            workspace.remove(folder / name)


def names(folder: Path) -> set[str]:
    return set(os.listdir(folder))


def every_entry(root: str):
    yield root
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            yield os.path.join(folder, name)


@contextlib.contextmanager
def loosened(*paths):
    """Give the owner write permission on ``paths`` for a while, as a non-root worker must
    before it can change a snapshot (root needs none); their modes are put back after."""
    modes = {p: stat.S_IMODE(os.lstat(p).st_mode) for p in map(str, paths)}
    for p, mode in modes.items():
        os.chmod(p, mode | stat.S_IWUSR)
    try:
        yield
    finally:
        for p, mode in modes.items():
            os.chmod(p, mode)


# One per base, made once ------------------------------------------------------------------

def test_eight_threads_get_one_snapshot(repo, base, parent):
    start = threading.Barrier(8)
    got = []

    def unit():
        start.wait()
        got.append(ensure_snapshot(str(parent), str(repo), base))

    threads = [threading.Thread(target=unit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1   # same path, base and fingerprint
    name = f"snapshot-{base[:12]}"
    assert got[0].path == str(parent / name) and got[0].base == base
    assert names(parent) == {name, f"{name}.json", f"{name}.stat"}


CHILD = """
import json, os, sys
from prun.git.snapshot import ensure_snapshot
sys.stdin.readline()                     # the parent says go to all three at once
snap = ensure_snapshot(*sys.argv[1:4])
print(json.dumps([snap.path, snap.base, snap.fingerprint, os.stat(snap.path).st_ino]))
"""


def test_three_processes_get_one_snapshot(repo, base, parent):
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(parent), str(repo), base],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.close()
    outputs = [json.loads(p.stdout.read()) for p in procs]
    for p in procs:
        p.wait(timeout=120)
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert len({tuple(o) for o in outputs}) == 1
    name = f"snapshot-{base[:12]}"
    assert outputs[0][0] == str(parent / name)
    assert names(parent) == {name, f"{name}.json", f"{name}.stat"}


def test_each_base_has_its_own_and_a_later_call_finds_it(repo, base, parent):
    first = ensure_snapshot(str(parent), str(repo), base)
    write(repo, {"later.txt": "after base\n"})
    later = commit_all(repo, "later")
    second = ensure_snapshot(str(parent), str(repo), later)
    assert second.path != first.path and (Path(second.path) / "later.txt").exists()
    assert ensure_snapshot(str(parent), str(repo), base) == first


def test_leftovers_of_a_dead_maker_are_cleared_or_recorded(repo, base, parent):
    name = f"snapshot-{base[:12]}"
    half_made = parent / f"{name}.making"
    write(half_made, {".git/objects/junk": "partial clone\n"})
    snap = ensure_snapshot(str(parent), str(repo), base)
    assert not half_made.exists()
    # a maker that died after the rename, before its record: the snapshot is whole
    os.unlink(parent / f"{name}.json")
    assert ensure_snapshot(str(parent), str(repo), base) == snap
    assert names(parent) == {name, f"{name}.json", f"{name}.stat"}


def test_a_base_that_is_not_a_frozen_commit_is_refused(repo, base, parent):
    with pytest.raises(UsageError, match="full commit id"):
        ensure_snapshot(str(parent), str(repo), "HEAD")
    with pytest.raises(workspace.WorkspaceError, match="not a commit"):
        ensure_snapshot(str(parent), str(repo), "0" * 40)
    assert names(parent) == set()
    with pytest.raises(workspace.WorkspaceError, match="outside the repository"):
        ensure_snapshot(str(repo / "inside"), str(repo), base)


# What it holds ----------------------------------------------------------------------------

def test_it_holds_the_base_not_the_live_tree(repo, base, parent):
    write(repo, {"later.txt": "after base\n"})
    commit_all(repo, "later")
    write(repo, {"README.md": "uncommitted edit\n", "untracked.txt": "new\n"})
    snap = Path(ensure_snapshot(str(parent), str(repo), base).path)
    assert (snap / "README.md").read_text() == "readme\n"
    assert (snap / "src/app/main.py").read_text() == "def main():\n    return 1\n"
    assert not (snap / "later.txt").exists() and not (snap / "untracked.txt").exists()
    assert gout(snap, "rev-parse", "HEAD") == base
    assert g(snap, "symbolic-ref", "-q", "HEAD", check=False).returncode != 0  # detached
    assert gout(snap, "status", "--porcelain") == ""


def test_it_has_no_way_out_and_no_trace_of_its_source(repo, base, parent, tmp_path):
    bare = tmp_path / "upstream.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    g(repo, "remote", "add", "origin", str(bare))
    g(repo, "config", "remote.origin.pushurl", str(bare))
    g(repo, "config", "branch.main.remote", "origin")
    snap = ensure_snapshot(str(parent), str(repo), base)
    assert gout(snap.path, "remote") == ""
    assert push_config(snap.path) == []
    assert gout(snap.path, "config", "protocol.allow") == "never"
    r = g(snap.path, "push", "--no-verify", str(bare), "HEAD:refs/heads/x", check=False)
    assert r.returncode != 0
    info = workspace.marker(snap.path)
    assert info["kind"] == "snapshot" and info["base"] == base and "source" not in info
    assert not os.path.exists(os.path.join(snap.path, ".git", "logs"))
    traces = {str(repo).encode(), os.path.realpath(repo).encode()}
    for p in [*every_entry(snap.path), f"{snap.path}.json", f"{snap.path}.stat"]:
        if os.path.islink(p):
            assert not any(t in os.readlink(p).encode() for t in traces), p
        elif os.path.isfile(p):
            data = Path(p).read_bytes()
            assert not any(t in data for t in traces), p


def test_every_entry_is_read_only_and_the_source_keeps_its_modes(repo, base, parent):
    g(repo, "gc", "-q")                 # packs, and files a local clone hard-links
    source_git = str(repo / ".git")
    before = {p: os.lstat(p).st_mode for p in every_entry(source_git)}
    snap = ensure_snapshot(str(parent), str(repo), base)
    entries = list(every_entry(snap.path))
    assert any("/.git/" in p for p in entries)
    for p in entries:
        st = os.lstat(p)
        assert stat.S_ISLNK(st.st_mode) or not st.st_mode & WRITE_BITS, p
    assert {p: os.lstat(p).st_mode for p in every_entry(source_git)} == before
    assert os.lstat(repo / "README.md").st_mode & stat.S_IWUSR


def test_remove_deletes_it_despite_its_modes(repo, base, parent):
    snap = ensure_snapshot(str(parent), str(repo), base)
    assert workspace.remove(snap.path) is True
    assert not os.path.exists(snap.path)
    snap = ensure_snapshot(str(parent), str(repo), base)
    assert remove_snapshot(snap.path) is True
    assert names(parent) == set()
    assert remove_snapshot(snap.path) is False


# The change check -------------------------------------------------------------------------

def test_an_untouched_snapshot_reports_nothing_after_git_reads_it(repo, base, parent):
    snap = ensure_snapshot(str(parent), str(repo), base)
    assert snapshot_changes(snap.path) == []
    for args in (["status"], ["log", "--stat"], ["diff", base], ["status", "--porcelain"]):
        g(snap.path, *args)
    for p in every_entry(snap.path):
        if os.path.isfile(p):
            Path(p).read_bytes()
    assert snapshot_changes(snap.path) == []


def test_clones_and_gc_of_the_source_are_not_changes_to_it(repo, base, parent, tmp_path):
    snap = ensure_snapshot(str(parent), str(repo), base)
    workspace.make_clone(repo, base, tmp_path / "ws" / "code-unit")  # links the objects again
    g(repo, "gc", "-q", "--prune=now")                               # unlinks the loose ones
    assert snapshot_changes(snap.path) == []


def test_git_freshening_a_shared_object_from_a_clone_is_not_a_change(repo, base, parent,
                                                                     tmp_path):
    tracked = gout(repo, "ls-files").split()[0]
    blob = gout(repo, "rev-parse", f"{base}:{tracked}")
    source_obj = Path(repo, ".git", "objects", blob[:2], blob[2:])
    if not source_obj.is_file():
        pytest.skip("the base's objects are packed: nothing loose to freshen")
    old = source_obj.stat().st_mtime_ns - 10**9   # an object older than this second
    os.utime(source_obj, ns=(old, old))
    snap = ensure_snapshot(str(parent), str(repo), base)
    clone = tmp_path / "ws" / "code-unit"
    workspace.make_clone(repo, base, clone)          # shares the snapshot's object files
    (clone / "copy-of-a-tracked-file").write_bytes((clone / tracked).read_bytes())
    g(clone, "add", "copy-of-a-tracked-file")        # the same blob written again: freshened
    obj = Path(snap.path, ".git", "objects", blob[:2], blob[2:])
    assert obj.stat().st_mtime_ns != old, "git did not freshen the shared object"
    assert snapshot_changes(snap.path) == []


def test_a_link_made_later_to_one_of_its_objects_is_not_a_change(repo, base, parent, tmp_path):
    g(repo, "gc", "-q", "--prune=now")       # packed: the snapshot's objects are its own
    snap = ensure_snapshot(str(parent), str(repo), base)
    objects = [p for p in every_entry(os.path.join(snap.path, ".git", "objects"))
               if os.path.isfile(p)]
    assert objects
    for i, p in enumerate(objects):
        os.link(p, tmp_path / f"linked-{i}")  # what a clone made from it does
    assert snapshot_changes(snap.path) == []


def add_file(snap: Path) -> None:
    with loosened(snap / "src/app"):
        (snap / "src/app/new.py").write_text("NEW = 1\n")


def add_folder(snap: Path) -> None:
    with loosened(snap / "src"):
        (snap / "src/extra").mkdir()


def remove_file(snap: Path) -> None:
    with loosened(snap / "src/app"):
        (snap / "src/app/main.py").unlink()


def rename_file(snap: Path) -> None:
    with loosened(snap / "src/app"):
        (snap / "src/app/main.py").rename(snap / "src/app/moved.py")


def rewrite_restoring_mtime(snap: Path) -> None:
    f = snap / "src/app/main.py"
    st = os.lstat(f)
    with loosened(f):
        f.write_text("def main():\n    return 2\n")   # the same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.lstat(f).st_size == st.st_size and os.lstat(f).st_mtime_ns == st.st_mtime_ns


def chmod_file(snap: Path) -> None:
    os.chmod(snap / "src/app/main.py", 0o644)


def chmod_folder(snap: Path) -> None:
    os.chmod(snap / "src", 0o755)


def add_tag(snap: Path) -> None:
    with loosened(snap / ".git/refs/tags"):
        g(snap, "update-ref", "refs/tags/v1", "HEAD")


@pytest.mark.parametrize("change, expected", [
    (add_file, ["src/app/new.py added"]),
    (add_folder, ["src/extra added"]),
    (remove_file, ["src/app/main.py removed"]),
    (rename_file, ["src/app/main.py removed", "src/app/moved.py added"]),
    (rewrite_restoring_mtime, ["src/app/main.py modified"]),
    (chmod_file, ["src/app/main.py mode 444->644"]),
    (chmod_folder, ["src mode 555->755"]),
    (add_tag, [".git/refs/tags/v1 added"]),
])
def test_each_kind_of_change_is_reported(repo, base, parent, change, expected):
    snap = ensure_snapshot(str(parent), str(repo), base)
    change(Path(snap.path))
    assert snapshot_changes(snap.path) == expected


def test_a_new_commit_moves_head_and_is_reported(repo, base, parent):
    snap = Path(ensure_snapshot(str(parent), str(repo), base).path)
    objects = snap / ".git/objects"
    with loosened(snap / ".git", objects, *objects.iterdir()):
        g(snap, "commit", "-q", "--allow-empty", "--no-verify", "-m", "sneaky")
    assert gout(snap, "rev-parse", "HEAD") != base
    changes = snapshot_changes(str(snap))
    assert ".git/HEAD modified" in changes and ".git/logs/HEAD added" in changes
    objects_from = next(i for i, c in enumerate(changes) if c.startswith(".git/objects/"))
    assert all(c.startswith((".git/objects/", "+")) for c in changes[objects_from:])  # last


def test_a_huge_change_is_capped_with_a_count(repo, base, parent):
    snap = Path(ensure_snapshot(str(parent), str(repo), base).path)
    with loosened(snap / "docs"):
        for i in range(CHANGES_SHOWN + 15):
            (snap / "docs" / f"n{i:03d}.md").write_text("x\n")
    changes = snapshot_changes(str(snap))
    assert len(changes) == CHANGES_SHOWN + 1
    assert changes[0] == "docs/n000.md added" and changes[-1] == "+15 more"


def test_a_missing_or_altered_record_is_an_error(repo, base, parent):
    snap = ensure_snapshot(str(parent), str(repo), base)
    listing = Path(f"{snap.path}.stat")
    listing.write_text(listing.read_text().replace('"README.md"', '"OTHER.md"'))
    with pytest.raises(StateError, match="does not match its record"):
        snapshot_changes(snap.path)
    with pytest.raises(StateError, match="no record"):
        snapshot_changes(str(parent / "never-made"))
