"""How each limit is held on this machine (``prun.run.limits``: what ``prun doctor`` prints),
cgroup delegation detected from files only read, and a tree measured."""

from __future__ import annotations

import os
import subprocess
import sys

from prun.run.limits import Watch, delegated_cgroup, enforcement, tree


def test_enforcement_names_each_limit_and_how_it_is_held_here():
    got = {e.name: e for e in enforcement()}
    assert list(got) == ["memory", "pids", "cpus"]
    assert got["memory"].how == got["pids"].how == "keeper"
    assert got["cpus"].how == "none" and "--allow-unenforced" in got["cpus"].detail


def test_only_a_writable_non_root_cgroup_v2_counts_as_delegated(tmp_path):
    root = tmp_path / "cg"
    (root / "user" / "prun").mkdir(parents=True)
    (root / "cgroup.controllers").write_text("memory pids\n")
    control = root / "user" / "prun" / "cgroup.subtree_control"
    control.write_text("")
    own = tmp_path / "self-cgroup"
    own.write_text("0::/\n")
    assert delegated_cgroup(str(own), str(root)) is None            # the root: never ours
    own.write_text("1:name=systemd:/user\n")
    assert delegated_cgroup(str(own), str(root)) is None            # cgroup v1 only
    own.write_text("0::/user/prun\n")
    assert delegated_cgroup(str(own), str(root)) == str(root / "user" / "prun")
    control.chmod(0o444)
    if os.geteuid() != 0:
        assert delegated_cgroup(str(own), str(root)) is None        # not writable: not ours


def test_a_tree_is_measured_and_its_first_limit_passed_is_named():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        count, rss = tree([os.getpid()])
        assert count >= 2 and rss > 1 << 20
        assert Watch(memory=None, pids=1).measure([os.getpid()]).limit == "pids"
        breach = Watch(memory=1 << 20, pids=None).measure([os.getpid()])
        assert breach.limit == "memory" and breach.peak > breach.max == 1 << 20
        assert Watch(memory=1 << 40, pids=10_000).measure([os.getpid()]) is None
    finally:
        child.kill()
        child.wait()
