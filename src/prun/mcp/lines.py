"""Reading prun's terse lines: ``WORD [positional ...] key=value ...``, where a value with
blanks, quotes or ``=`` is written as a JSON string (``cause="run finished"``)."""

from __future__ import annotations

import json
from typing import Any


def words(line: str) -> list[str]:
    """Split a line on blanks outside JSON-quoted values."""
    out: list[str] = []
    cur: list[str] = []
    quoted = escaped = False
    for ch in line:
        if quoted:
            cur.append(ch)
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
        elif ch == '"':
            quoted = True
            cur.append(ch)
        elif ch in " \t":
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _value(text: str) -> str:
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    return text


def parse(line: str) -> dict[str, Any]:
    """One line as ``{"word": WORD, "args": [positional...], key: value, ...}``."""
    parts = words(line)
    if not parts:
        return {"word": "", "args": []}
    record: dict[str, Any] = {"word": parts[0], "args": []}
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if eq and key and '"' not in key:
            record[key] = _value(value)
        else:
            record["args"].append(part)
    return record


def first(lines: list[str], word: str) -> dict[str, Any] | None:
    """The first line that starts with ``word``, parsed."""
    for line in lines:
        if line.split(" ", 1)[0] == word:
            return parse(line)
    return None
