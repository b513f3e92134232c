"""Workspaces on real git repositories: clones that cannot commit, push or reach a remote."""

from __future__ import annotations

import os
import stat
import sys

import pytest
from gitrepo import commit_all, g, gone, gout, write

from prun.errors import SetupFailed
from prun.git import workspace
from prun.git.pushconfig import push_config, strip_push_config
from prun.git.setup import run_setup


def test_clone_is_detached_at_base_with_no_remote_and_guard_hooks(repo, tmp_path):
    base = gout(repo, "rev-parse", "HEAD")
    write(repo, {"later.txt": "after base\n"})
    commit_all(repo, "later")
    clone = workspace.make_clone(repo, base, tmp_path / "ws" / "u1")
    assert gout(clone, "rev-parse", "HEAD") == base
    assert g(clone, "symbolic-ref", "-q", "HEAD", check=False).returncode != 0  # detached
    assert not (tmp_path / "ws" / "u1" / "later.txt").exists()
    assert gout(clone, "remote") == ""
    assert push_config(clone) == []
    assert gout(clone, "config", "core.longpaths") == "true"
    hooks = gout(clone, "config", "core.hooksPath")
    assert os.path.samefile(hooks, workspace.hooks_dir())
    assert workspace.clone_base(clone) == base
    assert workspace.marker(clone)["kind"] == "clone"


def test_nothing_in_a_clone_names_the_real_repository(repo, tmp_path):
    clone = workspace.make_clone(repo, "HEAD", tmp_path / "ws" / "c1")
    needle = os.fsencode(os.path.realpath(repo))
    for folder, _dirs, files in os.walk(clone):
        for name in files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                continue
            with open(path, "rb") as f:
                assert needle not in f.read(), f"{path} names the source repository"
    assert workspace.clone_base(clone) == gout(repo, "rev-parse", "HEAD")


def test_worker_commit_is_refused_even_with_no_verify(repo, tmp_path):
    clone = workspace.make_clone(repo, "HEAD", tmp_path / "ws" / "u1")
    base = gout(clone, "rev-parse", "HEAD")
    write(tmp_path / "ws" / "u1", {"README.md": "changed\n"})
    for extra in ([], ["--no-verify"]):
        r = g(clone, "commit", "-q", "-am", "sneaky", *extra, check=False)
        assert r.returncode != 0
        assert b"refused" in r.stderr
    assert gout(clone, "rev-parse", "HEAD") == base
    r = g(clone, "branch", "feature", check=False)
    assert r.returncode != 0 and b"refused" in r.stderr
    r = g(clone, "tag", "v1", check=False)
    assert r.returncode != 0


def test_worker_push_is_refused_and_no_remote_is_reachable(repo, tmp_path):
    bare = tmp_path / "upstream.git"
    g(tmp_path, "init", "-q", "--bare", str(bare))
    g(repo, "remote", "add", "origin", str(bare))
    g(repo, "config", "remote.origin.pushurl", str(bare))
    g(repo, "config", f"url.{bare}.pushInsteadOf", "gh:")
    g(repo, "push", "-q", "origin", "main")          # the source can reach it
    before = gout(bare, "for-each-ref")
    clone = workspace.make_clone(repo, "HEAD", tmp_path / "ws" / "u1")
    assert gout(clone, "remote") == ""
    assert push_config(clone) == []
    for args in (["push", "origin", "HEAD:refs/heads/x"],
                 ["push", str(bare), "HEAD:refs/heads/x"],
                 ["push", "--no-verify", str(bare), "HEAD:refs/heads/x"],
                 ["push", "--no-verify", f"file://{bare}", "HEAD:refs/heads/x"],
                 ["push", "gh:", "HEAD:refs/heads/x"]):
        r = g(clone, *args, check=False)
        assert r.returncode != 0, args
    assert gout(bare, "for-each-ref") == before


def test_strip_push_config_removes_every_way_out(repo, tmp_path):
    clone = workspace.make_clone(repo, "HEAD", tmp_path / "ws" / "u1")
    g(clone, "remote", "add", "backup", str(tmp_path / "elsewhere.git"))
    g(clone, "config", "remote.backup.pushurl", "ssh://example.invalid/x")
    g(clone, "config", "url.ssh://example.invalid/.pushInsteadOf", "https://example.invalid/")
    g(clone, "config", "remote.pushDefault", "backup")
    assert len(push_config(clone)) >= 3
    removed = strip_push_config(clone)
    assert "remote.backup.pushurl" in removed
    assert push_config(clone) == []
    assert gout(clone, "remote") == ""


def test_clone_refuses_bad_base_existing_dest_and_dest_inside_repo(repo, tmp_path):
    with pytest.raises(workspace.WorkspaceError, match="not a commit"):
        workspace.make_clone(repo, "no-such-branch", tmp_path / "ws" / "a")
    (tmp_path / "ws" / "b").mkdir(parents=True)
    (tmp_path / "ws" / "b" / "f").write_text("x")
    with pytest.raises(workspace.WorkspaceError, match="already exists"):
        workspace.make_clone(repo, "HEAD", tmp_path / "ws" / "b")
    with pytest.raises(workspace.WorkspaceError, match="outside the repository"):
        workspace.make_clone(repo, "HEAD", repo / ".prun" / "c")
    assert not (repo / ".prun").exists()


def test_scratch_is_fresh_and_outside_any_repository(repo, tmp_path):
    a = workspace.make_scratch(tmp_path / "ws", "unit")
    b = workspace.make_scratch(tmp_path / "ws", "unit")
    assert a != b and os.path.isdir(a)
    assert workspace.marker(a)["kind"] == "scratch"
    with pytest.raises(workspace.WorkspaceError, match="outside any git work tree"):
        workspace.make_scratch(repo / "sub", "unit")


def test_snapshot_is_read_only_and_removable(repo, tmp_path):
    snap = workspace.snapshot_readonly(repo / "src", tmp_path / "ws" / "snap")
    f = os.path.join(snap, "app", "main.py")
    with open(f) as fh:
        assert fh.read().startswith("def main")
    for p in (f, os.path.join(snap, "app"), snap):
        assert not stat.S_IMODE(os.stat(p).st_mode) & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert os.access(repo / "src" / "app" / "main.py", os.W_OK)   # the original is untouched
    assert workspace.remove(snap) is True
    assert not os.path.exists(snap)


def test_remove_refuses_what_prun_did_not_make(repo, tmp_path):
    with pytest.raises(workspace.WorkspaceError, match="not a prun workspace"):
        workspace.remove(repo)
    assert (repo / "README.md").exists()
    assert workspace.remove(tmp_path / "never-made") is False


def test_setup_runs_in_the_clone_and_its_files_stay_out_of_the_diff(repo, tmp_path):
    clone = workspace.make_clone(repo, "HEAD", tmp_path / "ws" / "u1")
    res = run_setup(clone, "echo SECRET=1 > .env && mkdir -p deps && touch deps/x "
                              "&& echo prepared", timeout=30)
    assert res.ok and res.exit_code == 0 and "prepared" in res.tail
    assert set(res.excluded) == {".env", "deps"}
    assert gout(clone, "status", "--porcelain") == ""


def test_setup_failure_is_reported_with_its_exit_code_and_output(tmp_path):
    scratch = workspace.make_scratch(tmp_path / "ws", "u")
    with pytest.raises(SetupFailed) as err:
        run_setup(scratch, "echo cannot link deps >&2; exit 3", timeout=30)
    assert err.value.returncode == 3
    assert "cannot link deps" in err.value.message
    res = run_setup(scratch, [sys.executable, "-c", "raise SystemExit(4)"], check=False)
    assert not res.ok and res.exit_code == 4


def test_setup_timeout_ends_its_whole_process_group(tmp_path):
    scratch = workspace.make_scratch(tmp_path / "ws", "u")
    pidfile = tmp_path / "child.pid"
    cmd = f"sleep 60 & echo $! > {pidfile}; wait"
    res = run_setup(scratch, cmd, timeout=0.5, check=False)
    assert res.timed_out and not res.ok and res.exit_code is None
    assert gone(int(pidfile.read_text()))
