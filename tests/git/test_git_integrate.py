"""Integration on real repositories: order, conflicts by file and unit, the combined check."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from gitrepo import gout, make_unit_state, write

from prun.errors import UsageError
from prun.git import workspace
from prun.git.integrate import add_worktree, integrate, order
from prun.git.reconcile import UnitInput, reconcile
from prun.plan import Packet


@pytest.fixture
def units(repo, tmp_path):
    """Build code units from {packet id: (owned globs, files to write in its clone)}."""
    base = gout(repo, "rev-parse", "HEAD")

    def make(spec: dict, after: dict | None = None):
        inputs, packets = [], []
        for pid, (owns, files) in spec.items():
            clone = workspace.make_clone(repo, base, tmp_path / "ws" / pid)
            write(Path(clone), {k: v for k, v in files.items() if v is not None})
            for rel in (k for k, v in files.items() if v is None):
                os.unlink(Path(clone) / rel)
            sd, _ = make_unit_state(tmp_path, pid)
            packet = Packet(id=pid, prompt="p", kind="code", owns=tuple(owns),
                            after=tuple((after or {}).get(pid, ())))
            packets.append(packet)
            inputs.append(UnitInput(packet=packet, attempt_id=pid, status="succeeded",
                                    state_dir=str(sd), workspace=clone, base=base))
        return reconcile(inputs), packets

    return make


def test_accepted_changes_applied_unit_by_unit_and_never_committed(repo, units, tmp_path):
    head = gout(repo, "rev-parse", "HEAD")
    logo = bytes(range(255, -1, -1)) * 4
    report, packets = units({
        "p1": (["src/app/**"], {"src/app/main.py": "def main():\n    return 2\n",
                                "src/app/new.py": "NEW = 1\n"}),
        "p2": (["assets/**", "docs/**"], {"assets/logo.bin": logo, "docs/guide.md": None}),
    })
    result = integrate(report, packets, str(repo), patch_dir=str(tmp_path / "p"))
    assert result.conflicts == 0 and result.applied == 2
    lines = result.lines()
    assert "APPLIED p1 files=2 +2 -1" in lines
    assert "CHANGED p1 added src/app/new.py +1 -0" in lines
    assert "CHANGED p2 modified assets/logo.bin binary" in lines
    assert "CHANGED p2 deleted docs/guide.md +0 -1" in lines
    assert lines[-1].endswith("applied=2 conflicts=0 skipped=0 check=none committed=no")
    assert (repo / "assets" / "logo.bin").read_bytes() == logo
    assert (repo / "src/app/new.py").read_text() == "NEW = 1\n"
    assert not (repo / "docs" / "guide.md").exists()
    assert gout(repo, "rev-parse", "HEAD") == head                     # nothing committed
    assert gout(repo, "diff", "--cached", "--name-only") == ""         # nothing staged
    assert (tmp_path / "p" / "p1.patch").exists()


def test_two_units_that_conflict_are_named_by_file_and_unit(repo, units):
    report, packets = units({
        "a": (["src/app/**"], {"src/app/main.py": "def main():\n    return 'a'\n"}),
        "b": (["src/app/**"], {"src/app/main.py": "def main():\n    return 'b'\n"}),
    })
    result = integrate(report, packets, str(repo))
    assert [u.action for u in result.units] == ["applied", "conflict"]
    assert "CONFLICT b path=src/app/main.py with=a" in result.lines()
    assert (repo / "src/app/main.py").read_text().endswith("'a'\n")


def test_after_decides_the_order(repo, units):
    report, packets = units({
        "a": (["src/app/**"], {"src/app/main.py": "A\n"}),
        "b": (["src/app/**"], {"src/app/main.py": "B\n"}),
    }, after={"a": ["b"]})
    assert order(packets) == ["b", "a"]
    result = integrate(report, packets, str(repo))
    assert "CONFLICT a path=src/app/main.py with=b" in result.lines()
    assert (repo / "src/app/main.py").read_text() == "B\n"


def test_a_failing_combined_check_is_reported_on_the_exact_result(repo, units):
    report, packets = units({"a": (["src/app/**"], {"src/app/main.py": "broken(\n"})})
    check = [sys.executable, "-c",
             "import ast,sys; ast.parse(open('src/app/main.py').read())"]
    result = integrate(report, packets, str(repo), check=check, culprits=False)
    assert result.check is not None and not result.check.ok
    assert result.check.exit_code == 1
    assert result.lines()[-2].startswith("CHECK failed exit=1")
    with open(result.check.log) as f:
        assert "SyntaxError" in f.read()
    ok = integrate(report, packets, str(repo), check="test -f src/app/main.py",
                   allow_dirty=True)
    assert ok.units[0].action == "conflict"        # already applied: the tree differs now
    assert ok.check.ok


def test_rejected_changes_are_applied_only_when_named(repo, units):
    report, packets = units({
        "good": (["src/app/**"], {"src/app/main.py": "good\n"}),
        "leaky": (["src/lib/**"], {"README.md": "leak\n"}),
    })
    assert report.verdict("leaky").verdict == "rejected"
    result = integrate(report, packets, str(repo))
    assert "SKIPPED leaky verdict=rejected" in result.lines()
    assert (repo / "README.md").read_text() == "readme\n"
    named = integrate(report, packets, str(repo), include=["leaky"], allow_dirty=True)
    assert any(line.startswith("APPLIED leaky") for line in named.lines())
    assert (repo / "README.md").read_text() == "leak\n"
    with pytest.raises(UsageError):
        integrate(report, packets, str(repo), include=["nope"])


def test_the_persons_decisions_are_honoured_as_include_and_rejection(repo, units):
    report, packets = units({
        "good": (["src/app/**"], {"src/app/main.py": "good\n"}),
        "leaky": (["src/lib/**"], {"README.md": "leak\n"}),
        "other": (["src/lib/**"], {"pyproject.toml": "other\n"}),
    })
    decided = integrate(report, packets, str(repo),
                        decisions={"good": "reject", "leaky": "include", "other": "accept"})
    lines = decided.lines()
    assert "SKIPPED good verdict=accepted decision=reject" in lines
    assert "APPLIED leaky files=1 +1 -1 verdict=rejected decision=include" in lines
    assert "APPLIED other files=1 +1 -2 verdict=rejected decision=accept" in lines
    assert (repo / "src/app/main.py").read_text().startswith("def main")
    assert (repo / "README.md").read_text() == "leak\n"
    assert [u.as_dict()["decision"] for u in decided.units] == ["reject", "include", "accept"]
    # a packet named with --include is applied whatever the person decided before
    named = integrate(report, packets, str(repo), include=["good"], decisions={"good": "reject"},
                      allow_dirty=True)
    assert "APPLIED good files=1 +1 -2" in named.lines()
    assert (repo / "src/app/main.py").read_text() == "good\n"


def test_uncommitted_local_change_in_the_target_is_a_conflict(repo, units):
    report, packets = units({"a": (["src/app/**"], {"src/app/util.py": "new\n"})})
    (repo / "src/app/util.py").write_text("local edit\n")
    result = integrate(report, packets, str(repo))
    assert "CONFLICT a path=src/app/util.py with=working-tree" in result.lines()
    assert (repo / "src/app/util.py").read_text() == "local edit\n"


def test_integration_into_a_separate_worktree_leaves_the_real_tree_alone(repo, units, tmp_path):
    report, packets = units({"a": (["src/app/**"], {"src/app/main.py": "in worktree\n"})})
    wt = add_worktree(str(repo), str(tmp_path / "integration"), "HEAD")
    result = integrate(report, packets, wt, check="grep -q worktree src/app/main.py")
    assert result.applied == 1 and result.check.ok
    assert (repo / "src/app/main.py").read_text().startswith("def main")
