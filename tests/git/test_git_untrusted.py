"""Reading a unit's clone from the host (``prun.git.untrusted``, ``prun.git.scan``) and the
object stores clones borrow from (``prun.git.store``): real git, real files, no sandbox
needed (what the sandbox adds is in test_hostile_clone.py)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from gitrepo import g, gout, write

from prun.git import store, workspace
from prun.git.changes import read_change
from prun.git.clonefiles import NotRegular, append_inside, read_head, read_inside
from prun.git.diffs import text_diffs
from prun.git.scan import scan
from prun.git.setup import run_setup

HOSTILE = str(Path(__file__).with_name("hostile.py"))


@pytest.fixture
def clone(repo, tmp_path):
    base = gout(repo, "rev-parse", "HEAD")
    path = Path(workspace.make_clone(repo, base, tmp_path / "ws" / "u1"))
    return path, base


def codes(change) -> list[tuple[str, str | None]]:
    return [(f.code, f.path) for f in change.findings]


def test_a_clone_shares_no_file_and_names_nothing_of_the_repository(repo, clone, tmp_path):
    path, base = clone
    found = store.store_of(path, base)
    assert found == str(tmp_path / "ws" / f"objects-{base[:12]}.git")
    theirs = {(st.st_dev, st.st_ino) for root in (repo / ".git", Path(found))
              for p in root.rglob("*") if (st := p.lstat()) and stat.S_ISREG(st.st_mode)}
    mine = [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    assert mine
    for p in mine:
        st = p.lstat()
        assert st.st_nlink == 1 and (st.st_dev, st.st_ino) not in theirs, p
    assert (path / ".git/objects/info/alternates").read_text() == \
        os.path.join(os.path.realpath(found), "objects") + "\n"
    named = [p for p in path.joinpath(".git").rglob("*")
             if p.is_file() and str(repo).encode() in p.read_bytes()]
    assert named == []
    # the store is whole, read-only, and made once for every clone of the base
    assert workspace.make_clone(repo, base, tmp_path / "ws" / "u2")
    assert store.stores_in(str(tmp_path / "ws")) == [found]
    assert not os.stat(found).st_mode & 0o222


def test_planted_configuration_runs_nothing_when_prun_reads_the_clone(clone, tmp_path,
                                                                       monkeypatch):
    path, base = clone
    marks = tmp_path / "marks"
    marks.mkdir()
    subprocess.run([sys.executable, HOSTILE, "plant", str(marks), "src/app"], cwd=path,
                   check=True, capture_output=True)
    subprocess.run([sys.executable, HOSTILE, "nested", str(marks), "src/lib"], cwd=path,
                   check=True, capture_output=True)
    # prun's own environment pointing git elsewhere changes nothing either
    monkeypatch.setenv("GIT_DIR", str(path / ".git"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='touch {marks}/env'")
    change = read_change(path, base, with_patch=True)
    assert {f.path for f in change.files} >= {"src/app/main.py", "src/app/.gitattributes",
                                               "src/lib/main.py"}
    assert ("nested-repository", "src/lib/sub") in codes(change)
    assert b"WORK = 'plant'" in (change.patch or b"")   # no filter, no encoding applied
    diffs = text_diffs(path, base, change.files)
    assert "+WORK = 'plant'" in diffs["src/app/main.py"]
    run_setup(path, "true", base=base)
    assert sorted(os.listdir(marks)) == []


@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_an_index_that_is_a_device_or_a_fifo_is_never_read(clone, tmp_path, kind):
    path, base = clone
    subprocess.run([sys.executable, HOSTILE, f"index-{kind}", str(tmp_path), "src/app"],
                   cwd=path, check=True, capture_output=True)
    change = read_change(path, base)
    assert change.complete and [f.path for f in change.files] == ["src/app/main.py"]
    assert [f.as_dict() for f in change.findings] == [
        {"code": "broken-clone", "why": ".git/index is not a regular file"}]


def test_what_must_never_be_read_is_left_out_with_its_reason(repo, clone, tmp_path):
    path, base = clone
    subprocess.run([sys.executable, HOSTILE, "files", str(tmp_path), "src/app"], cwd=path,
                   check=True, capture_output=True)
    os.unlink(path / "src/app/util.py")
    os.mkfifo(path / "src/app/util.py")                 # a tracked file become a FIFO
    change = read_change(path, base, with_patch=True)
    assert codes(change) == [
        ("file-too-large", "src/app/big.bin"), ("link-outside", "src/app/etc"),
        ("special-file", "src/app/pipe"), ("special-file", "src/app/sock"),
        ("sparse-file", "src/app/sparse.bin"), ("link-outside", "src/app/up"),
        ("special-file", "src/app/util.py")]
    assert {f.path: f.status for f in change.files} == {"src/app/main.py": "modified",
                                                        "src/app/ok": "added"}
    assert change.links == {"src/app/ok": "main.py"}
    assert b"sparse" not in (change.patch or b"") and len(change.patch or b"") < 10_000


def test_what_is_ignored_is_not_a_finding(repo, tmp_path):
    write(repo, {".gitignore": ".venv/\n*.sock\n"})
    g(repo, "add", "-A")
    g(repo, "commit", "-qm", "ignore")
    base = gout(repo, "rev-parse", "HEAD")
    path = Path(workspace.make_clone(repo, base, tmp_path / "ws" / "u1"))
    (path / ".venv/bin").mkdir(parents=True)
    os.symlink("/usr/bin/python3", path / ".venv/bin/python")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path / "dev.sock"))
    write(path, {"src/app/new.py": "X = 1\n"})
    change = read_change(path, base)
    assert change.findings == () and [f.path for f in change.files] == ["src/app/new.py"]


def test_a_git_file_git_would_hang_on_stops_the_read(clone):
    path, base = clone
    os.mkfifo(path / ".gitattributes")
    started = time.monotonic()
    change = read_change(path, base)
    assert not change.complete and change.files == ()
    assert ("unsafe-git-file", ".gitattributes") in codes(change)
    assert time.monotonic() - started < 60


def test_past_the_bounds_the_tree_is_not_read(clone):
    path, base = clone
    for i in range(30):
        write(path, {f"many/f{i}": "x\n"})
    assert [f.code for f in scan(path, max_entries=20).findings] == ["too-many-files"]
    for i in range(205):
        os.mkfifo(path / f"pipe{i}")
    change = read_change(path, base)
    assert not change.complete and change.files == ()
    assert change.findings[0].as_dict() == {"code": "too-many-findings", "count": 205,
                                            "limit": 200}


def test_head_and_the_refs_it_names_are_bounded_reads(clone):
    path, base = clone
    hooks = ("-c", "core.hooksPath=/dev/null")
    write(path, {"src/app/main.py": "committed\n"})
    g(path, *hooks, "switch", "-q", "-c", "work")
    g(path, *hooks, "commit", "-qam", "against the rule")
    head = gout(path, "rev-parse", "HEAD")
    g(path, *hooks, "pack-refs", "--all")
    assert not (path / ".git/refs/heads/work").exists() and read_head(str(path)) == head
    change = read_change(path, base)
    assert change.commits == (head,) and not change.head_moved
    (path / ".git/objects/info/alternates").write_text("/nowhere/objects\n")
    change = read_change(path, base)
    assert [f.as_dict() for f in change.findings] == [
        {"code": "broken-clone", "why": "objects/info/alternates is not prun's"}]
    os.unlink(path / ".git/HEAD")
    os.mkfifo(path / ".git/HEAD")
    change = read_change(path, base)
    assert not change.complete
    assert change.findings[0].detail == {"why": "HEAD is not a regular file"}


def test_bounded_reads_and_appends_never_go_through_a_link(tmp_path):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub/file").write_text("x" * 10)
    assert read_inside(str(root), "sub/file", 10) == b"x" * 10
    assert read_inside(str(root), "sub/missing", 10) is None
    with pytest.raises(NotRegular):
        read_inside(str(root), "sub/file", 9)
    os.mkfifo(root / "fifo")
    with pytest.raises(NotRegular):
        read_inside(str(root), "fifo", 10)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "link")
    with pytest.raises(NotRegular):
        read_inside(str(root), "link/file", 10)
    with pytest.raises(NotRegular):
        append_inside(str(root), "link/exclude", "x\n")
    os.symlink(outside / "target", root / "sub/exclude")
    with pytest.raises(NotRegular):
        append_inside(str(root), "sub/exclude", "x\n")
    assert list(outside.iterdir()) == []
    append_inside(str(root), "info/exclude", "/made\n")
    assert (root / "info/exclude").read_text() == "/made\n"


def test_every_file_diff_comes_from_one_read(clone):
    path, base = clone
    write(path, {f"src/app/gen/m{i:03d}.py": f"N = {i}\n" for i in range(300)})
    write(path, {"src/app/main.py": "def main():\n    return 3\n"})
    change = read_change(path, base)
    diffs = text_diffs(path, base, change.files)
    assert len(diffs) == 301
    assert all(f"+N = {i}" in diffs[f"src/app/gen/m{i:03d}.py"] for i in range(300))
    assert "+    return 3" in diffs["src/app/main.py"]


def test_a_store_made_on_another_file_system_is_copied(repo, tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(repo).st_dev:
        pytest.skip("no other file system at /dev/shm (test_hostile_clone mounts one)")
    base = gout(repo, "rev-parse", "HEAD")
    folder = shm / f"prun-store-{os.getpid()}-{tmp_path.name}"
    try:
        path = Path(workspace.make_clone(repo, base, folder / "u1"))
        assert read_change(path, base).complete
    finally:
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_setup_runs_in_the_sandbox_and_what_it_made_is_left_out(repo, clone, bwrap):
    path, base = clone
    line = (f"touch {repo}/.git/escaped; mkdir -p deps/lib && git -C deps/lib init -q; "
            "echo built > build.out")
    result = run_setup(path, line, sandbox=True, read_only=[str(repo)], check=False,
                       base=base)
    assert result.ok and not (repo / ".git/escaped").exists()
    assert result.excluded == ("build.out", "deps/lib")
    write(path, {"src/app/new.py": "X = 1\n"})
    change = read_change(path, base)
    assert change.findings == () and [f.path for f in change.files] == ["src/app/new.py"]


def test_a_dependent_starts_from_a_commit_prun_made_in_a_store_of_its_own(repo, tmp_path):
    from prun.errors import Blocked
    from prun.run.dependents import Start, start_commit

    base = gout(repo, "rev-parse", "HEAD")
    folder = str(tmp_path / "ws")
    first = Path(workspace.make_clone(repo, base, tmp_path / "ws" / "a"))
    write(first, {"src/app/main.py": "A\n",
                  "src/app/.gitattributes": "* working-tree-encoding=UTF-16\n"})
    patch = read_change(first, base, with_patch=True).patch or b""
    commit = start_commit(folder, str(repo), base, Start({}, ("a",), (patch,)))
    assert commit
    dep = Path(workspace.make_clone(repo, commit, tmp_path / "ws" / "b",
                                    store=store.store_path(folder, commit), neutral=True))
    assert (dep / "src/app/main.py").read_text() == "A\n"      # no conversion on the way
    assert store.borrowed(dep, commit) == [store.store_path(folder, commit),
                                           store.store_path(folder, base)]
    assert read_change(dep, commit).files == ()
    with pytest.raises(Blocked, match="the accepted change of a does not apply"):
        start_commit(folder, str(repo), base, Start({}, ("a",), (b"not a patch\n",)))
    assert not [n for n in os.listdir(folder) if n.endswith(".making")]


def test_a_clone_whose_marker_its_unit_broke_is_still_prun_s_to_remove(clone, tmp_path):
    path, base = clone
    kept = store.store_of(path, base)
    assert kept and store.stat_cache(kept, str(path))[1] == base
    marker = path / ".git" / workspace.CLONE_MARKER
    marker.unlink()
    os.mkfifo(marker)
    assert workspace.marker(path) is None          # read without waiting on the FIFO
    assert workspace.made_by_prun(path) and workspace.remove(path) and not path.exists()
    assert store.stat_cache(kept, str(path))[1] is None
    stranger = tmp_path / "ws" / "stranger"
    stranger.mkdir()
    with pytest.raises(workspace.WorkspaceError):
        workspace.remove(stranger)
