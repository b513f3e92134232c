"""The cross-check: per field of the schema, the valid answers grouped by value within each
family and across families, and a verdict.

Fields are the schema's ``properties``, followed into nested objects that declare
``properties`` of their own (``a.b``); anything else (an array, an object without declared
properties, a scalar) is one field compared whole. A schema without ``properties`` is one
field, ``$``: the whole answer. A field whose subschema says ``"x-compare": false`` (free
text: a summary, the reasoning) is kept with the answers but not cross-checked.

Values are compared normalised: strings trimmed and case-folded, a whole float equal to the
integer, objects by their keys, arrays as sets where the schema says ``uniqueItems`` (else in
order). A valid answer without the field counts as the value *absent*.

Verdicts: ``agree`` (every valid answer gives the same value), ``split-within`` (some family
gives more than one value), ``disagree`` (each family is of one mind, the families differ),
``missing`` (no valid answer gives the field, or no answer is valid).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._util.quoting import json_token

AGREE, DISAGREE, SPLIT, MISSING = "agree", "disagree", "split-within", "missing"
VERDICTS = (AGREE, DISAGREE, SPLIT, MISSING)
ABSENT = "(absent)"          # how a valid answer without the field is shown
_NONE = object()
NOT_COMPARED = "x-compare"  # a field whose subschema says "x-compare": false is not compared
SHOWN_CHARS = 60             # strings longer than this are cut in the lines (never in --json)


@dataclass(frozen=True)
class Voice:
    """One panelist as the cross-check sees it: its id, its family, its valid answer (None
    when it has none)."""

    panelist: str
    family: str
    answer: Any = None
    valid: bool = False


@dataclass
class Group:
    """The panelists that gave one (normalised) value."""

    value: Any                          # the first of them's value as given; ABSENT: no value
    absent: bool
    panelists: list[str] = field(default_factory=list)
    families: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"value": None if self.absent else self.value, "absent": self.absent,
                "panelists": self.panelists, "families": self.families}


@dataclass
class FieldCheck:
    """One field's cross-check."""

    path: tuple[str, ...]
    verdict: str
    groups: list[Group]                          # across families, largest first
    by_family: dict[str, list[Group]]            # within each family, largest first
    answers: dict[str, int]                      # family -> its valid answers
    split: list[str] = field(default_factory=list)   # families that disagree with themselves

    @property
    def name(self) -> str:
        return ".".join(self.path) if self.path else "$"

    def line(self) -> str:
        words = ["FIELD", self.name, self.verdict]
        if self.verdict == AGREE:
            words.append(f"value={shown(self.groups[0])}")
            words += [f"{fam}={self.groups[0].families.get(fam, 0)}/{n}"
                      for fam, n in self.answers.items() if n]
        elif self.verdict != MISSING:
            if self.split:
                words.append("split=" + ",".join(self.split))
            words += [f"{fam}=" + ",".join(f"{shown(g)}x{len(g.panelists)}" for g in groups)
                      for fam, groups in self.by_family.items() if groups]
        return " ".join(words)

    def to_json(self) -> dict[str, Any]:
        return {"field": self.name, "path": list(self.path), "verdict": self.verdict,
                "split": self.split, "answers": self.answers,
                "groups": [g.to_json() for g in self.groups],
                "families": {fam: [g.to_json() for g in gs]
                             for fam, gs in self.by_family.items()}}


def fields(schema: dict[str, Any]) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The fields of ``schema`` (each path with its subschema), in the schema's order."""
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return [((), schema)]
    return list(_leaves((), schema))


def _leaves(path: tuple[str, ...], schema: dict[str, Any]
            ) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    props = schema.get("properties")
    if path and not (isinstance(props, dict) and props):
        yield path, schema
        return
    assert isinstance(props, dict)
    for key, sub in props.items():
        sub = sub if isinstance(sub, dict) else {}
        if sub.get(NOT_COMPARED) is not False:
            yield from _leaves((*path, str(key)), sub)


def cross_check(schema: dict[str, Any], voices: Sequence[Voice],
                families: Sequence[str]) -> list[FieldCheck]:
    """The cross-check of every field over the valid answers in ``voices``; ``families``:
    the panel's families in the order to show them."""
    return [check_field(path, sub, voices, families) for path, sub in fields(schema)]


def check_field(path: tuple[str, ...], sub: dict[str, Any], voices: Sequence[Voice],
                families: Sequence[str]) -> FieldCheck:
    valid = [v for v in voices if v.valid]
    answers = {fam: sum(1 for v in valid if v.family == fam) for fam in families}
    across: dict[str, Group] = {}
    within: dict[str, dict[str, Group]] = {fam: {} for fam in families}
    for v in valid:
        value = value_at(v.answer, path)
        absent = value is _NONE
        key = ABSENT if absent else canonical(value, sub)
        for groups in (across, within.setdefault(v.family, {})):
            g = groups.setdefault(key, Group(value=None if absent else value, absent=absent))
            g.panelists.append(v.panelist)
            g.families[v.family] = g.families.get(v.family, 0) + 1
    order = _largest_first(across)
    by_family = {fam: _largest_first(gs) for fam, gs in within.items()}
    split = [fam for fam, gs in by_family.items() if len(gs) > 1]
    if not order or all(g.absent for g in order):
        verdict = MISSING
    elif len(order) == 1:
        verdict = AGREE
    else:
        verdict = SPLIT if split else DISAGREE
    return FieldCheck(path=path, verdict=verdict, groups=order, by_family=by_family,
                      answers=answers, split=split)


def _largest_first(groups: dict[str, Group]) -> list[Group]:
    return sorted(groups.values(), key=lambda g: -len(g.panelists))  # stable: first seen first


def value_at(answer: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in ``answer``, or the marker of an absent value."""
    for key in path:
        if not isinstance(answer, dict) or key not in answer:
            return _NONE
        answer = answer[key]
    return answer


def canonical(value: Any, schema: dict[str, Any] | None = None) -> str:
    """``value`` normalised (see the module's docstring), as JSON text to compare."""
    return json.dumps(normalise(value, schema or {}), sort_keys=True, ensure_ascii=False)


def normalise(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return value.strip().casefold()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        props = _sub(schema.get("properties"))
        return {k: normalise(v, _sub(props.get(k))) for k, v in value.items()}
    if isinstance(value, list):
        items = _sub(schema.get("items"))
        out = [normalise(v, items) for v in value]
        if schema.get("uniqueItems") is True:
            out = sorted(out, key=lambda v: json.dumps(v, sort_keys=True, ensure_ascii=False))
        return out
    return value


def _sub(schema: Any) -> dict[str, Any]:
    return schema if isinstance(schema, dict) else {}


def shown(g: Group) -> str:
    """A group's value on a line: compact JSON (long strings cut), no spaces."""
    if g.absent:
        return ABSENT
    value = g.value
    if isinstance(value, str) and len(value) > SHOWN_CHARS:
        value = value[:SHOWN_CHARS - 3] + "..."
    return json_token(value)
