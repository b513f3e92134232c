"""Shortening names for a narrow column: distinct names stay distinct, whatever the width."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prun._util.shorten import ELLIPSIS, MIN_WIDTH, shorten

IDS = st.text(alphabet="ab-._0123456789", min_size=1, max_size=60)
ANY = st.text(min_size=0, max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(IDS, unique=True, max_size=40), st.integers(MIN_WIDTH, 70))
def test_distinct_ids_stay_distinct_and_fit(names, width):
    short = shorten(names, width)
    assert len(short) == len(names)
    assert len(set(short)) == len(names)
    assert all(len(s) <= width for s in short)
    for n, s in zip(names, short, strict=True):
        assert s == n if len(n) <= width else ELLIPSIS in s


@settings(max_examples=200, deadline=None)
@given(st.lists(ANY, unique=True, max_size=30), st.integers(MIN_WIDTH, 30))
def test_any_text_even_with_ellipses_stays_distinct(names, width):
    short = shorten(names, width)
    assert len(set(short)) == len(names) and all(len(s) <= width for s in short)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 300), st.integers(MIN_WIDTH, 40), st.text("xyz-", min_size=0, max_size=8))
def test_a_long_shared_prefix_and_suffix(count, width, suffix):
    names = [f"{'p' * 40}-{i}{suffix}" for i in range(count)]
    short = shorten(names, width)
    assert len(set(short)) == count and all(len(s) <= width for s in short)


def test_the_middle_goes_and_the_ends_stay():
    names = ["review-the-parser-module-a", "review-the-parser-module-b", "lint"]
    assert shorten(names, 12) == ["revie…dule-a", "revie…dule-b", "lint"]
    assert shorten(names, 40) == names


def test_names_that_differ_only_in_the_middle_show_where():
    names = [f"aaaaaaaaaa-{i:03d}-zzzzzzzzzz" for i in range(3)]
    short = shorten(names, 12)
    assert len(set(short)) == 3
    assert all(f"{i:03d}"[-1] in s for i, s in enumerate(short))


def test_too_narrow_is_refused():
    with pytest.raises(ValueError):
        shorten(["abcdef"], MIN_WIDTH - 1)
