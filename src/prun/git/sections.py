"""A result's sections: the Markdown headings of a result file and the text under each, and
the required sections a result lacks (``section_reasons``, which takes the result's lines as
they are read: a result is never held whole to be judged).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

from .verdict import Reason

_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")


def _marks(lines: Iterable[str]) -> Iterator[tuple[int, int, int, str]]:
    """Each line that is not blank, in order, as (its index, where what is under it starts,
    level, key): a heading (ATX ``## Title`` or setext; level 1-6, its key lower-cased, a
    trailing ':' dropped; a setext underline is its heading's) or any other line (level 0,
    key ""). Headings inside code fences do not count."""
    fence = False
    it = enumerate(lines)
    at = next(it, None)
    while at is not None:
        i, line = at
        after = next(it, None)
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
            yield i, i + 1, 0, ""
        elif not fence and (m := _ATX.match(line)):
            yield i, i + 1, len(m.group(1)), _heading_key(m.group(2))
        elif not fence and line.strip() and after is not None and _SETEXT.match(after[1]):
            level = 1 if after[1].strip().startswith("=") else 2
            yield i, i + 2, level, _heading_key(line)
            after = next(it, None)
        elif line.strip():
            yield i, i + 1, 0, ""
        at = after


def sections(text: str) -> dict[str, str]:
    """Markdown headings (ATX ``## Title`` or setext; lower-cased, trailing ':' dropped) ->
    the text under each, subsections included, up to the next heading of the same or a higher
    level (the first heading of a key decides). Headings inside code fences do not count."""
    lines = text.splitlines()
    heads = [(i, start, level, key) for i, start, level, key in _marks(lines) if level]
    ends = [len(lines)] * len(heads)
    open_: list[int] = []    # the headings whose text has not ended, deepest last
    for n, (i, _, level, _) in enumerate(heads):
        while open_ and heads[open_[-1]][2] >= level:
            ends[open_.pop()] = i
        open_.append(n)
    found: dict[str, str] = {}
    for (_, start, _, key), end in zip(heads, ends, strict=True):
        found.setdefault(key, "\n".join(lines[start:end]).strip())
    return found


def _heading_key(title: str) -> str:
    title = re.sub(r"[*_`]", "", title).strip().rstrip(":").strip()
    return re.sub(r"\s+", " ", title).lower()


def _names(heading: str, key: str) -> bool:
    """A heading names the required section ``key`` ("Verification (commands run)" names
    "verification")."""
    return heading == key or heading.startswith((key + " ", key + ":"))


def section_reasons(text: str | Iterable[str], required: Sequence[str]) -> list[Reason]:
    """Required sections missing or empty in the result (its text, or its lines as they are
    read): a heading starting with the required name counts, case-insensitively ("Verification
    (commands run)"); the first one decides. A section is empty when the first line that is
    not blank under its heading is a heading of the same or a higher level, or there is none."""
    keys = [_heading_key(name) for name in required]
    has_text: dict[int, bool] = {}          # a required section seen -> it holds text
    waiting: list[tuple[int, int]] = []     # (required section, its level): no text yet
    lines = text.splitlines() if isinstance(text, str) else text
    for _, _, level, key in _marks(lines):
        for n, at in waiting:
            has_text[n] = not (level and level <= at)
        waiting = []
        if level:
            for n, wanted in enumerate(keys):
                if n not in has_text and _names(key, wanted):
                    waiting.append((n, level))
    for n, _ in waiting:
        has_text[n] = False
    reasons = []
    for n, name in enumerate(required):
        if n not in has_text:
            reasons.append(Reason("missing-section", {"section": name}))
        elif not has_text[n]:
            reasons.append(Reason("empty-section", {"section": name}))
    return reasons
