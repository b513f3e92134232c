"""Reading prun's terse lines: ``WORD [positional ...] key=value ...``, where a value with
blanks, quotes or ``=`` is written as a JSON string (``cause="run finished"``)."""

from __future__ import annotations

import json
from typing import Any

from .._util.quoting import unquote


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


def run_id_fields(lines: list[str]) -> dict[str, Any]:
    """``run_id`` from the ``RUN <id>`` line (run, panel)."""
    rec = first(lines, "RUN")
    return {"run_id": rec["args"][0]} if rec and rec["args"] else {}


def wait_fields(lines: list[str]) -> dict[str, Any]:
    """``run_id``, ``cursor`` and ``events`` from the lines of ``prun wait``."""
    fields = run_id_fields(lines)
    cursor = first(lines, "CURSOR")
    if cursor and cursor["args"]:
        try:
            fields["cursor"] = int(cursor["args"][0])
        except ValueError:
            fields["cursor"] = cursor["args"][0]
    events = []
    for line in lines:
        if line.startswith("EVENT "):
            rec = parse(line)
            args = rec.pop("args")
            rec.pop("word")
            event: dict[str, Any] = {"seq": int(args[0]) if args and args[0].isdigit() else None,
                                     "kind": args[1] if len(args) > 1 else None}
            event.update(rec)
            events.append(event)
    fields["events"] = events
    return fields


def dispatch_fields(lines: list[str]) -> dict[str, Any]:
    """The paths and receipt command a dispatcher's lines name (STATE-DIR, RESULT-FILE...)."""
    fields: dict[str, Any] = {}
    for line in lines:
        key, _, value = line.partition(" ")
        if key in ("STATE-DIR", "RESULT-FILE", "HANDOFF-FILE", "WORKSPACE"):
            fields[key.lower().replace("-", "_")] = (unquote(value) if value.startswith('"')
                                                     else value)
        elif key == "RECEIPT-CMD":
            fields["receipt_cmd"] = value
    return fields
