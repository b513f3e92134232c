"""Properties of the glob engine, on globs and paths drawn from a small alphabet: the overlap
test, the containment test and the matcher agree."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from prun.globs import covers, matches, overlap

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
@given(globs_, globs_, st.lists(paths, min_size=1, max_size=30))
def test_covers_agrees_with_the_matcher(wide, narrow, drawn):
    if covers(wide, narrow):
        assert all(matches(wide, p) for p in drawn if matches(narrow, p))
        example = overlap(narrow, narrow)
        assert example is None or matches(wide, example)
    if matches(narrow, "/".join(drawn)) and not matches(wide, "/".join(drawn)):
        assert not covers(wide, narrow)

