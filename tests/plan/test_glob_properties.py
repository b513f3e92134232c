"""Properties of the glob engine, on globs and paths drawn from a small alphabet: the overlap
test, the containment test and the matcher agree, and so do ``prun check`` and reconcile's
scope check, which both use it."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from prun.git.reconcile import scope_reasons
from prun.plan import Packet, Plan
from prun.plan.globs import covers, fixed_prefix, fixed_suffix, matches, overlap
from prun.plan.independence import check
from prun.views.model import RunView

# Segments a glob is made of: literals (file and folder names), wildcards, classes.
GLOB_SEGMENTS = ["a", "b", "ab", "x.md", "docs", "*", "?", "**", "*.md", "a*", "?b", "[ab]",
                 "[!a]", "[a-c]*", "x.*", "\\*"]
# Segments a path is made of: names the globs can and cannot match.
PATH_SEGMENTS = ["a", "b", "ab", "c", "x.md", "a.md", "docs", "bb", "*"]

FEW = settings(max_examples=300, deadline=None, derandomize=True, database=None)

globs_ = st.builds(lambda segs, slash: "/".join(segs) + ("/" if slash else ""),
                   st.lists(st.sampled_from(GLOB_SEGMENTS), min_size=1, max_size=3),
                   st.booleans())
paths = st.builds("/".join, st.lists(st.sampled_from(PATH_SEGMENTS), min_size=1, max_size=4))


@FEW
@given(globs_, globs_, st.lists(paths, min_size=1, max_size=30))
def test_overlap_agrees_with_the_matcher(g1, g2, drawn):
    example = overlap(g1, g2)
    if example is None:
        assert not [p for p in drawn if matches(g1, p) and matches(g2, p)]
    else:
        assert matches(g1, example) and matches(g2, example), example
    assert (overlap(g2, g1) is None) == (example is None)


@FEW
@given(globs_, st.lists(paths, min_size=1, max_size=30))
def test_every_match_has_the_fixed_prefix_and_suffix(glob, drawn):
    example = overlap(glob, glob)
    for path in [p for p in drawn if matches(glob, p)] + ([example] if example else []):
        assert path.startswith(fixed_prefix(glob)) and path.endswith(fixed_suffix(glob))


@FEW
@given(globs_, globs_, st.lists(paths, min_size=1, max_size=30))
def test_covers_agrees_with_the_matcher(wide, narrow, drawn):
    if covers(wide, narrow):
        assert all(matches(wide, p) for p in drawn if matches(narrow, p))
        example = overlap(narrow, narrow)
        assert example is None or matches(wide, example)
    if matches(narrow, "/".join(drawn)) and not matches(wide, "/".join(drawn)):
        assert not covers(wide, narrow)


def _packet(pid, owns, generates, shared):
    return Packet(id=pid, prompt="x", kind="code", owns=tuple(owns),
                  generates=tuple(generates), shared=shared)


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    """A repository root without folders: no dotted name is read as one."""
    return tmp_path_factory.mktemp("empty")


ids = st.sampled_from(["a", "b", "c"])
globs_list = st.lists(globs_, min_size=0, max_size=2)
shared_map = st.dictionaries(globs_, ids, max_size=2)


@FEW
@given(globs_list, globs_list, globs_list, globs_list, shared_map, shared_map,
       st.lists(paths, min_size=1, max_size=20))
def test_what_check_calls_independent_reconcile_never_accepts_twice(
        empty, owns_a, owns_b, gen_a, gen_b, shared_a, shared_b, drawn):
    """When check finds no ``files`` failure between a and b, no path is accepted for both
    by the scope check, with the plan-wide view a run gives it (``RunView.unit_inputs``)."""
    a, b = _packet("a", owns_a or ["a"], gen_a, shared_a), _packet("b", owns_b or ["b"], gen_b,
                                                                   shared_b)
    plan = Plan(packets=(a, b))
    report = check(plan, use_git=False, repo=empty)
    if any(f.rule == "files" for f in report.failures):
        event("check: not independent")
        return
    event("check: independent")
    ua, ub = RunView({"id": "r1", "repo_root": str(empty)}, [a, b]).unit_inputs()
    examples = [e for x in ua.may_write for y in ub.may_write if (e := overlap(x, y))]
    for path in [*drawn, *examples]:
        accepted = [u.packet.id for u in (ua, ub)
                    if not scope_reasons(u.packet, [path], may_write=u.may_write,
                                         shared=u.shared)]
        assert len(accepted) < 2, (path, accepted)
