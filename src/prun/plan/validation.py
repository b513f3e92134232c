"""The published JSON Schemas of packets and plans, and validation against them with
``file:line`` messages: a refused document's first error is explained in one line (the field,
what is wrong) with a hint, at the line the field is on.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import fastjsonschema

from .._util import yamldoc
from .._util.quoting import quote
from ..errors import UsageError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

SCHEMA_DIR = Path(__file__).parent / "schemas"


@cache
def schema(name: str) -> dict[str, object]:
    """The published schema ``packet`` or ``plan``."""
    loaded: dict[str, object] = json.loads(
        (SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    return loaded


def validate(doc: yamldoc.Doc, schema_name: str) -> None:
    """Raise UsageError for the first schema error in ``doc``, with its line.

    A valid document (the common case) is passed by a compiled validator (fastjsonschema);
    only a document it refuses goes through jsonschema, whose errors carry what the message
    needs (the path, the failing keyword and subschema)."""
    if _compiled(schema_name)(doc.data):
        check_text(doc)
        return

    # jsonschema (a tenth of a second to import) only for a document the compiled validator
    # refused: its errors say which field and why
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    root = schema(schema_name)
    validator = Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)
    error = best_match(validator.iter_errors(doc.data))
    if error is None:
        check_text(doc)
        return  # the compiled validator is stricter on a format jsonschema does not check
    message, hint, line = _explain(error, doc, list(error.absolute_path))
    raise UsageError(f"{doc.source}:{line}: {message}", hint=hint)


@cache
def _compiled(name: str) -> Callable[[object], bool]:
    """The schema ``name`` as a fastjsonschema function, compiled once per process:
    ``f(data)`` is True if valid."""
    check = fastjsonschema.compile(schema(name))

    def valid(data: object) -> bool:
        try:
            check(data)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return valid


# Fields whose values are names, paths, globs or revisions (their items and, for ``shared``,
# their keys too): no control character. Elsewhere (a prompt, a command, a scope) only NUL is
# refused, which no file, argument or environment can hold.
NAME_FIELDS = frozenset({
    "id", "kind", "executor", "model", "effort", "mode", "owns", "generates", "reads",
    "shared", "state", "after", "base", "timeout", "requires", "reachable", "may_go_to",
    "prohibited", "retention", "sandbox", "prompt_file", "name", "deadline", "cancel_owner",
    "cancel_action", "cluster", "address", "worker_lost"})


def check_text(doc: yamldoc.Doc) -> None:
    """Refuse (UsageError at its line) a NUL anywhere in ``doc``'s values, and a control
    character in a name field (``NAME_FIELDS``) or in a key; a name field's value must not
    start with ``-`` either (a revision or a name, never an option)."""
    stack: list[tuple[list[str | int], object, bool]] = [([], doc.data, False)]
    while stack:
        where, value, named = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                key = str(k)
                _check_string(doc, [*where, key], key, True, key=True)
                stack.append(([*where, key], v, named or key in NAME_FIELDS))
        elif isinstance(value, list):
            packet_files = where == ["packets"]   # a plan's packet files: paths and globs
            stack.extend(([*where, i], v, named or (packet_files and isinstance(v, str)))
                         for i, v in enumerate(value))
        elif isinstance(value, str):
            _check_string(doc, where, value, named)


def _check_string(doc: yamldoc.Doc, where: list[str | int], text: str, named: bool,
                  key: bool = False) -> None:
    what = "key" if key else "value"
    if "\x00" in text:
        raise UsageError(f"{doc.where(where)}: {dotted(where)}: a NUL character in a {what}",
                         hint="remove it: no file name, argument or variable can hold one")
    if named and not key and not text.strip():
        raise UsageError(f"{doc.where(where)}: {dotted(where)}: is blank",
                         hint="give a value or remove the field")
    if named and not text.isprintable():
        raise UsageError(f"{doc.where(where)}: {dotted(where)}: {quote(text)} holds a control "
                         "character", hint="names, paths and revisions are plain text")
    if named and not key and text.startswith("-") and where[-1:] != ["deadline"]:
        raise UsageError(f"{doc.where(where)}: {dotted(where)}: {text!r} starts with '-'",
                         hint="a name, a path or a revision never starts with '-'")


def dotted(where: Sequence[str | int]) -> str:
    """``packets[3].data.may_go_to``: a path into a document as a message names it."""
    out = ""
    for step in where:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(top level)"


def _explain(error: ValidationError, doc: yamldoc.Doc,
             where: list[str | int]) -> tuple[str, str, int]:
    """A one-line message, a hint and a line for a jsonschema error."""
    field = dotted(where)
    line = doc.line_of(where)
    sub = _mapping(error.schema)
    props = _mapping(sub.get("properties"))
    v = error.validator
    instance: object = error.instance
    value: object = error.validator_value
    desc = _text(sub.get("description"))
    if v == "additionalProperties" and isinstance(instance, dict):
        message, hint, key = _unknown_field(instance, props)
        return f"{field}: {message}", hint, doc.key_line(where, key)
    if v == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        about = _text(_mapping(props.get(missing)).get("description"))
        return (f"{field}: missing required field {missing!r}",
                f"add {missing}:" + (f" ({about})" if about else ""), line)
    alternatives = _required_alternatives(value) if v == "anyOf" else None
    if alternatives is not None:
        names = " or ".join(alternatives)
        return f"{field}: needs {names}", f"add {names}", line
    if v == "enum":
        choices = ", ".join(str(c) for c in _items(value))
        return f"{field}: {instance!r} is not allowed", f"use one of: {choices}", line
    if v == "type" or (v == "anyOf" and not isinstance(instance, dict)):
        want = _kinds(sub)
        hint = desc
        if "a string" in want and isinstance(instance, int | float | bool):
            hint = "quote it: YAML read it as a number or a boolean" + (f"; {desc}" if desc
                                                                         else "")
        return f"{field}: {instance!r} is not {want}", hint or "see docs/plans.md", line
    if v == "pattern":
        return f"{field}: {instance!r} is not valid", desc or f"it must match {value}", line
    return (*_plain(field, error.message, v, instance, value), line)


def _unknown_field(instance: dict[object, object],
                   props: Mapping[str, object]) -> tuple[str, str, str]:
    """The message, the hint and the offending key for an ``additionalProperties`` error."""
    extra = sorted(str(k) for k in set(instance) - set(props))
    key = extra[0] if extra else "?"
    close = difflib.get_close_matches(key, list(props), n=1)
    hint = f"did you mean {close[0]!r}?" if close else "allowed here: " + ", ".join(sorted(props))
    return f"unknown field {key!r}", hint, key


def _required_alternatives(value: object) -> list[str] | None:
    """For an ``anyOf`` whose every alternative requires a field: the first field each one
    requires; else None."""
    names = []
    for alternative in _items(value):
        required = _items(_mapping(alternative).get("required"))
        if not required:
            return None
        names.append(str(required[0]))
    return names


def _plain(field: str, message: str, v: object, instance: object,
           value: object) -> tuple[str, str]:
    """The message and the hint for the keywords that need no detail from the schema."""
    if v in ("minItems", "minLength"):
        return f"{field}: must not be empty", "give a value or remove the field"
    if v == "uniqueItems":
        return f"{field}: lists an item twice", "remove the repeated item"
    if v == "minimum":
        return f"{field}: {instance!r} is below {value}", "give a larger value"
    if v == "exclusiveMinimum":
        return f"{field}: {instance!r} is not more than {value}", "give a larger value"
    if v in ("maximum", "exclusiveMaximum"):
        return f"{field}: {instance!r} is more than {value} allows", f"give at most {value}"
    return f"{field}: {message}", "see the schema in prun/plan/schemas"


_KINDS = {"string": "a string", "array": "a list", "object": "a mapping",
          "boolean": "true or false", "integer": "an integer", "number": "a number"}


def _kinds(sch: object) -> str:
    if not isinstance(sch, Mapping):
        return "valid"
    if "type" in sch:
        t = sch["type"]
        return _KINDS.get(t, t) if isinstance(t, str) else str(t)
    if "anyOf" in sch:
        return " or ".join(_kinds(s) for s in _items(sch["anyOf"]))
    return "valid"


def _mapping(value: object) -> Mapping[str, object]:
    """``value`` when it is a mapping (a schema or part of one), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def _items(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
