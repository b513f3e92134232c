"""Sizes as people write them (``prun._util.sizes``)."""

from __future__ import annotations

import pytest

from prun._util.sizes import format_size, parse_size
from prun.errors import UsageError


@pytest.mark.parametrize(("text", "n"), [("512M", 512 << 20), ("4G", 4 << 30), ("1.5G", 3 << 29),
                                         ("200k", 200 << 10), ("1T", 1 << 40), (4096, 4096),
                                         ("100", 100), ("2GiB", 2 << 30)])
def test_sizes_parse_as_binary_multiples(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["lots", "", "-1M", "0", "0K", "1X", True, "1" * 40])
def test_what_is_not_a_size_is_refused_naming_it(text):
    with pytest.raises(UsageError, match="--memfree"):
        parse_size(text, what="--memfree")


def test_sizes_are_written_back_short():
    assert [format_size(n) for n in (200 << 20, 3 << 29, 512 << 10, 100, 1 << 40)] == \
        ["200M", "1.5G", "512K", "100B", "1T"]
