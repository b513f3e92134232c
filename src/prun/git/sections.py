"""A result's sections: the Markdown headings of a result file and the text under each, and
the required sections a result lacks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .verdict import Reason

_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")


def sections(text: str) -> dict[str, str]:
    """Markdown headings (ATX ``## Title`` or setext; lower-cased, trailing ':' dropped) ->
    the text under each, subsections included, up to the next heading of the same or a higher
    level. Headings inside code fences do not count."""
    lines = text.splitlines()
    heads: list[tuple[int, int, int, str]] = []   # (first line, body start, level, key)
    fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        elif not fence:
            m = _ATX.match(line)
            if m:
                heads.append((i, i + 1, len(m.group(1)), _heading_key(m.group(2))))
            elif line.strip() and i + 1 < len(lines) and _SETEXT.match(lines[i + 1]):
                level = 1 if lines[i + 1].strip().startswith("=") else 2
                heads.append((i, i + 2, level, _heading_key(line)))
                i += 1
        i += 1
    found: dict[str, str] = {}
    for n, (_, start, level, key) in enumerate(heads):
        end = next((h[0] for h in heads[n + 1:] if h[2] <= level), len(lines))
        found.setdefault(key, "\n".join(lines[start:end]).strip())
    return found


def _heading_key(title: str) -> str:
    title = re.sub(r"[*_`]", "", title).strip().rstrip(":").strip()
    return re.sub(r"\s+", " ", title).lower()


def section_reasons(text: str, required: Sequence[str]) -> list[Reason]:
    """Required sections missing or empty in the result text (a heading starting with the
    required name counts, case-insensitively: "Verification (commands run)")."""
    found = sections(text)
    reasons = []
    for name in required:
        key = _heading_key(name)
        body = next((b for h, b in found.items() if h == key or h.startswith(key + " ")
                     or h.startswith(key + ":") or h.startswith(key + " (")), None)
        if body is None:
            reasons.append(Reason("missing-section", {"section": name}))
        elif not body:
            reasons.append(Reason("empty-section", {"section": name}))
    return reasons
