"""Reconciliation on real clones: scope leaks, shared files, commits, hollow successes."""

from __future__ import annotations

import os

import pytest
from gitrepo import g, gout, make_unit_state, write

from prun.git import workspace
from prun.git.reconcile import (
    ACCEPTED,
    NEEDS_REVIEW,
    REJECTED,
    UnitInput,
    judge,
    reconcile,
    scope_reasons,
    section_reasons,
    sections,
)
from prun.plan import Packet, Plan
from prun.plan.independence import check
from prun.views.model import RunView

SUMMARY = "## Summary\n\nChanged the app.\n\n## Verification\n\nran pytest: 3 passed\n"


@pytest.fixture
def unit(repo, tmp_path):
    """Make a code unit: a clone at HEAD plus a finished attempt's state dir."""
    base = gout(repo, "rev-parse", "HEAD")

    def make(pid: str, *, owns=("src/app/**",), shared=None, requires=(), kind="code",
             status="succeeded", result=SUMMARY, **state):
        clone = workspace.make_clone(repo, base, tmp_path / "ws" / pid)
        sd, _ = make_unit_state(tmp_path, pid, outcome=status, result=result, **state)
        packet = Packet(id=pid, prompt="p", kind=kind, owns=tuple(owns), shared=shared or {},
                        requires=tuple(requires))
        u = UnitInput(packet=packet, attempt_id=f"{pid}-a1", status=status, state_dir=str(sd),
                      workspace=clone, base=base, executor=state.get("executor", "command"))
        return u, clone

    return make


def reasons(v):
    return [r.text() for r in v.reasons]


def test_change_inside_owned_paths_is_accepted(unit):
    u, clone = unit("p1")
    write(clone_path(clone), {"src/app/main.py": "def main():\n    return 2\n",
                              "src/app/new.py": "X = 1\n"})
    v = judge(u)
    assert v.verdict == ACCEPTED, reasons(v)
    assert v.lines() == ["ACCEPTED p1 files=2"]
    assert {f.path: f.status for f in v.change.files} == {"src/app/main.py": "modified",
                                                          "src/app/new.py": "added"}


def test_same_size_edit_right_after_checkout_is_seen(unit):
    # git trusts an index entry's stat data unless the file is as new as the index itself;
    # an edit of the same size in the same second as the checkout must still be found.
    u, clone = unit("p1")
    write(clone_path(clone), {"src/app/main.py": "def main():\n    return 9\n"})
    v = judge(u)
    assert [f.path for f in v.change.files] == ["src/app/main.py"]


def clone_path(clone):
    from pathlib import Path

    return Path(clone)


def test_scope_leak_is_named_file_by_file(unit):
    u, clone = unit("p1")
    write(clone_path(clone), {"src/app/main.py": "changed\n", "src/lib/core.py": "CORE = 2\n",
                              "notes/todo.txt": "new\n"})
    v = judge(u)
    assert v.verdict == REJECTED
    assert reasons(v) == ["reason=scope-leak path=notes/todo.txt",
                          "reason=scope-leak path=src/lib/core.py"]
    assert v.lines()[0] == "REJECTED p1 reason=scope-leak path=notes/todo.txt"


def test_shared_file_touched_by_a_unit_that_is_not_its_owner(unit):
    shared = {"pyproject.toml": "p2"}
    u1, c1 = unit("p1", shared=shared)
    u2, c2 = unit("p2", owns=("src/lib/**",), shared=shared)
    for c in (c1, c2):
        write(clone_path(c), {"pyproject.toml": "[project]\nname = 'y'\n"})
    v1, v2 = judge(u1), judge(u2)
    assert reasons(v1) == ["reason=shared-not-owner path=pyproject.toml owner=p2"]
    assert v1.verdict == REJECTED
    assert v2.verdict == ACCEPTED, reasons(v2)


def test_globs_read_as_check_reads_them_so_one_file_is_never_accepted_twice(unit):
    # 'a' owns the Markdown files at the root, 'b' those in docs/: independent, says check.
    plan = Plan(packets=(Packet(id="a", prompt="p", kind="code", owns=("*.md",)),
                         Packet(id="b", prompt="p", kind="code", owns=("docs/*.md",))))
    assert check(plan, use_git=False).ok
    ua, ca = unit("a", owns=("*.md",))
    ub, cb = unit("b", owns=("docs/*.md",))
    for c in (ca, cb):
        write(clone_path(c), {"docs/guide.md": "# Edited\n"})
    write(clone_path(ca), {"README.md": "edited\n"})
    va, vb = judge(ua), judge(ub)
    assert reasons(va) == ["reason=scope-leak path=docs/guide.md"]
    assert vb.verdict == ACCEPTED, reasons(vb)


def test_a_shared_path_declared_by_another_packet_belongs_to_its_owner(repo, tmp_path):
    """p1 names p2 the integration owner of pyproject.toml; p2 does not repeat it. The run's
    view gives p2 the file and refuses it to p1 (and to p3, which owns it)."""
    base = gout(repo, "rev-parse", "HEAD")
    packets = [Packet(id="p1", prompt="p", kind="code", owns=("src/app/**",),
                      shared={"pyproject.toml": "p2"}),
               Packet(id="p2", prompt="p", kind="code", owns=("src/lib/**",)),
               Packet(id="p3", prompt="p", kind="code", owns=("pyproject.toml", "docs/**"))]
    attempts = {}
    for p in packets:
        clone = workspace.make_clone(repo, base, tmp_path / "ws" / p.id)
        write(clone_path(clone), {"pyproject.toml": "[project]\nname = 'y'\n"})
        sd, result = make_unit_state(tmp_path, p.id, result=SUMMARY)
        attempts[p.id] = [{"id": f"{p.id}-a1", "status": "succeeded", "state_dir": str(sd),
                           "workspace": clone, "base": base, "result_path": str(result),
                           "executor": "command"}]
    view = RunView({"id": "r1", "repo_root": str(repo)}, packets, attempts)
    inputs = {u.packet.id: u for u in view.unit_inputs()}
    assert inputs["p2"].may_write == ("src/lib/**", "pyproject.toml")
    assert inputs["p3"].shared == {"pyproject.toml": "p2"}
    got = {v.packet_id: reasons(v) for v in reconcile(inputs.values()).verdicts}
    assert got == {"p1": ["reason=shared-not-owner path=pyproject.toml owner=p2"],
                   "p2": [],
                   "p3": ["reason=shared-not-owner path=pyproject.toml owner=p2"]}


def test_scope_reasons_read_globs_as_prun_globs():
    p = Packet(id="p", prompt="p", kind="code", owns=("src/api", "docs/*.md", "notes.txt"),
               generates=("gen/**",), shared={"config/*.toml": "lead", "pyproject.toml": "p"})
    paths = ["src/api/v1/h.py",      # a plain name covers its folder
             "docs/a.md", "docs/sub/b.md",  # '*' stays in one folder
             "gen/x/y.json", "pyproject.toml", "config/app.toml",
             "notes.txt ",           # a path keeps its spaces: not the owned notes.txt
             "x/notes.txt"]          # globs are anchored at the root
    assert [r.text() for r in scope_reasons(p, paths)] == [
        "reason=shared-not-owner path=config/app.toml owner=lead",
        "reason=scope-leak path=docs/sub/b.md",
        'reason=scope-leak path="notes.txt "',
        "reason=scope-leak path=x/notes.txt"]
    # The plan's view, given explicitly: what the packet may write and every shared path.
    got = scope_reasons(p, ["src/api/x.py", "lock/uv.lock"], may_write=("lock/**",),
                        shared={"src/api/**": "other"})
    assert [r.text() for r in got] == ["reason=shared-not-owner path=src/api/x.py owner=other"]


def test_prun_s_own_folder_is_never_a_unit_s_to_change_whatever_it_owns():
    p = Packet(id="p", prompt="p", kind="code", owns=("**",))
    got = scope_reasons(p, [".prun/ledger.sqlite", ".prun/runs/r/results/x.md", ".prunx/a",
                            "src/.prun/b"])
    assert [r.text() for r in got] == ["reason=prun-folder path=.prun/ledger.sqlite",
                                       "reason=prun-folder path=.prun/runs/r/results/x.md"]


def test_a_dotted_name_that_is_a_folder_in_the_repository_is_the_folder(repo, tmp_path):
    packet = Packet(id="p", prompt="p", kind="code", owns=("conf.d",))
    (repo / "conf.d").mkdir()
    view = RunView({"id": "r1", "repo_root": str(repo)}, [packet])
    (u,) = view.unit_inputs()
    assert u.may_write == ("conf.d/**",)
    assert scope_reasons(packet, ["conf.d/app.conf"], may_write=u.may_write) == []
    assert scope_reasons(packet, ["conf.d/app.conf"])[0].code == "scope-leak"


def test_binary_files_renames_deletions_and_untracked_files(unit):
    """Untracked files count as added (whether the worker staged them is not asked: its index
    is never read)."""
    u, clone = unit("p1", owns=("src/app/**", "assets/**", "docs/**"))
    root = clone_path(clone)
    (root / "assets" / "logo.bin").write_bytes(bytes(range(255, -1, -1)) * 4)
    os.rename(root / "src/app/util.py", root / "src/app/helpers.py")
    (root / "docs/guide.md").unlink()
    write(root, {"src/app/fresh.py": "NEW = True\n", "assets/icon.bin": b"\x00\x01\xff" * 50})
    v = judge(u)
    assert v.verdict == ACCEPTED, reasons(v)
    files = {f.path: f for f in v.change.files}
    assert files["assets/logo.bin"].status == "modified" and files["assets/logo.bin"].binary
    assert files["assets/icon.bin"].status == "added" and files["assets/icon.bin"].binary
    assert files["src/app/helpers.py"].status == "renamed"
    assert files["src/app/helpers.py"].old_path == "src/app/util.py"
    assert files["docs/guide.md"].status == "deleted"
    assert files["src/app/fresh.py"].status == "added" and files["src/app/fresh.py"].added == 1
    assert gout(clone, "status", "--porcelain").count("??") == 3  # the clone's index untouched


def test_rename_out_of_scope_names_both_sides(unit):
    u, clone = unit("p1", owns=("src/app/**",))
    root = clone_path(clone)
    os.rename(root / "src/app/util.py", root / "src/moved.py")
    v = judge(u)
    assert reasons(v) == ["reason=scope-leak path=src/moved.py"]


def test_worker_that_committed_is_rejected_and_its_change_still_read(unit):
    u, clone = unit("p1")
    write(clone_path(clone), {"src/app/main.py": "committed\n"})
    g(clone, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "against the rule")
    v = judge(u)
    assert v.verdict == REJECTED
    assert len(v.change.commits) == 1
    assert reasons(v) == [f"reason=worker-committed commit={v.change.commits[0][:12]}"]
    assert [f.path for f in v.change.files] == ["src/app/main.py"]


def test_success_with_an_empty_diff_needs_review(unit):
    u, _ = unit("p1")
    v = judge(u)
    assert v.verdict == NEEDS_REVIEW
    assert reasons(v) == ["reason=hollow-empty-diff"]


def test_no_tool_use_while_the_result_claims_work_needs_review(unit):
    u, clone = unit("p1", executor="agy", tool_uses=0)
    write(clone_path(clone), {"src/app/main.py": "x\n"})
    v = judge(u)
    assert v.verdict == NEEDS_REVIEW
    assert "reason=hollow-no-tool-use tool_uses=0" in reasons(v)
    u2, clone2 = unit("p2", executor="agy", tool_uses=4)
    write(clone_path(clone2), {"src/app/main.py": "x\n"})
    assert judge(u2).verdict == ACCEPTED


def test_required_sections_missing_or_empty_reject(unit):
    u, clone = unit("p1", requires=("Summary", "Verification", "Open items"),
                    result="# Result\n\n## Summary\nok\n\n## Verification\n\n## Other\nx\n")
    write(clone_path(clone), {"src/app/main.py": "x\n"})
    v = judge(u)
    assert v.verdict == REJECTED
    assert reasons(v) == ["reason=empty-section section=Verification",
                          'reason=missing-section section="Open items"']


def test_missing_result_is_recovered_from_the_tail_and_flagged(unit):
    u, clone = unit("p1", result=None, tail="the whole output of the unit, salvaged\n")
    write(clone_path(clone), {"src/app/main.py": "x\n"})
    v = judge(u)
    assert v.verdict == NEEDS_REVIEW
    assert v.recovered and os.path.exists(v.recovered)
    with open(v.recovered) as f:
        assert f.readline().startswith("FALLBACK reason=recovered-from-tail")
    u2, _ = unit("p2", result=None, tail="")
    v2 = judge(u2)
    assert v2.verdict == REJECTED and reasons(v2)[0].startswith("reason=no-result")


def test_failed_and_undispatched_units_are_rejected(unit, tmp_path):
    u, _ = unit("p1", status="failed")
    v = judge(u)
    assert v.verdict == REJECTED and "reason=not-succeeded status=failed" in reasons(v)
    never = UnitInput(packet=Packet(id="p9", prompt="p", kind="read-only"))
    assert reasons(judge(never)) == ["reason=not-dispatched"]


def test_report_lines_and_completeness(unit):
    u1, c1 = unit("a")
    write(clone_path(c1), {"src/app/main.py": "x\n"})
    u2, c2 = unit("b")
    write(clone_path(c2), {"README.md": "leak\n"})
    report = reconcile([u2, u1], run_id="r1")
    assert report.lines() == ["ACCEPTED a files=1",
                              "REJECTED b reason=scope-leak path=README.md",
                              "RECONCILE run=r1 packets=2 accepted=1 rejected=1 review=0 "
                              "complete=no"]
    assert report.as_dict()["counts"] == {"accepted": 1, "rejected": 1, "needs-review": 0}


def test_sections_parser():
    text = ("Intro\n\n# Summary:\nDone\n\n```\n# not a heading\n```\n"
            "Verification (commands run)\n------------\nran it\n\n## Open items\n### Later\n"
            "something\n\n## Risks\n\n")
    found = sections(text)
    assert found["summary"].startswith("Done")
    assert "# not a heading" in found["summary"]
    assert found["verification (commands run)"].startswith("ran it")
    assert found["open items"] == "### Later\nsomething"
    got = section_reasons(text, ["summary", "Open Items", "Verification", "Risks", "Tests"])
    assert [r.text() for r in got] == ["reason=empty-section section=Risks",
                                       "reason=missing-section section=Tests"]


def test_outcome_json_decides_when_the_ledger_has_not_caught_up(unit):
    u, clone = unit("p1")
    write(clone_path(clone), {"src/app/main.py": "x\n"})
    stale = UnitInput(**{**u.__dict__, "status": "running"})
    v = judge(stale)
    assert v.verdict == ACCEPTED and v.status == "succeeded", reasons(v)


def test_a_failed_unit_is_rejected_for_failing_not_for_its_fallback_text(unit):
    u, _ = unit("p1", status="failed", requires=("Summary",),
                result="FALLBACK reason=exit-nonzero unit=p1\n\nno sections here\n")
    assert reasons(judge(u)) == ["reason=not-succeeded status=failed"]
