"""The published JSON Schemas of packets and plans, and validation against them with
``file:line`` messages: a refused document's first error is explained in one line (the field,
what is wrong) with a hint, at the line the field is on.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from .._util import yamldoc
from ..errors import UsageError

SCHEMA_DIR = Path(__file__).parent / "schemas"


@cache
def schema(name: str) -> dict:
    """The published schema ``packet`` or ``plan`` (a dict)."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


def validate(doc: yamldoc.Doc, schema_name: str) -> None:
    """Raise UsageError for the first schema error in ``doc``, with its line.

    A valid document (the common case) is passed by a compiled validator (fastjsonschema);
    only a document it refuses goes through jsonschema, whose errors carry what the message
    needs (the path, the failing keyword and subschema)."""
    if _compiled(schema_name)(doc.data):
        return
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match

    root = schema(schema_name)
    validator = Draft202012Validator(root, format_checker=Draft202012Validator.FORMAT_CHECKER)
    error = best_match(validator.iter_errors(doc.data))
    if error is None:
        return  # the compiled validator is stricter on a format jsonschema does not check
    where = list(error.absolute_path)
    message, hint, line = _explain(error, doc, where, root)
    raise UsageError(f"{doc.source}:{line}: {message}", hint=hint)


@cache
def _compiled(name: str):
    """The schema ``name`` as a fastjsonschema function, compiled once per process:
    ``f(data)`` is True if valid."""
    import fastjsonschema

    check = fastjsonschema.compile(schema(name))

    def valid(data) -> bool:
        try:
            check(data)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return valid


def _dotted(where: Sequence[str | int]) -> str:
    out = ""
    for step in where:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out or "(top level)"


def _explain(error, doc: yamldoc.Doc, where: list, schema_root) -> tuple[str, str, int]:
    """A one-line message, a hint and a line for a jsonschema error."""
    field = _dotted(where)
    line = doc.line_of(where)
    props = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
    v = error.validator
    if v == "additionalProperties" and isinstance(error.instance, dict):
        extra = sorted(set(error.instance) - set(props))
        key = extra[0] if extra else "?"
        line = doc.key_line(where, key)
        close = difflib.get_close_matches(key, list(props), n=1)
        hint = (f"did you mean {close[0]!r}?" if close
                else "allowed here: " + ", ".join(sorted(props)))
        return f"{field}: unknown field {key!r}", hint, line
    if v == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        desc = props.get(missing, {}).get("description", "")
        return (f"{field}: missing required field {missing!r}",
                f"add {missing}:" + (f" ({desc})" if desc else ""), line)
    if v == "anyOf" and all("required" in s for s in error.validator_value):
        names = " or ".join(s["required"][0] for s in error.validator_value)
        return f"{field}: needs {names}", f"add {names}", line
    if v == "enum":
        choices = ", ".join(str(c) for c in error.validator_value)
        return f"{field}: {error.instance!r} is not allowed", f"use one of: {choices}", line
    if v == "type" or (v == "anyOf" and not isinstance(error.instance, dict)):
        desc = error.schema.get("description", "") if isinstance(error.schema, dict) else ""
        want = _kinds(error.schema)
        hint = desc
        if "a string" in want and isinstance(error.instance, int | float | bool):
            hint = "quote it: YAML read it as a number or a boolean" + (f"; {desc}" if desc
                                                                         else "")
        return f"{field}: {error.instance!r} is not {want}", hint or "see docs/plans.md", line
    if v == "pattern":
        desc = error.schema.get("description", "")
        return (f"{field}: {error.instance!r} is not valid",
                desc or f"it must match {error.validator_value}", line)
    if v in ("minItems", "minLength"):
        return f"{field}: must not be empty", "give a value or remove the field", line
    if v == "uniqueItems":
        return f"{field}: lists an item twice", "remove the repeated item", line
    if v == "minimum":
        return (f"{field}: {error.instance!r} is below {error.validator_value}",
                "give a larger value", line)
    return f"{field}: {error.message}", "see the schema in prun/schemas", line


def _kinds(sch) -> str:
    if not isinstance(sch, dict):
        return "valid"
    if "type" in sch:
        t = sch["type"]
        return {"string": "a string", "array": "a list", "object": "a mapping",
                "boolean": "true or false", "integer": "an integer",
                "number": "a number"}.get(t, str(t))
    if "anyOf" in sch:
        return " or ".join(_kinds(s) for s in sch["anyOf"])
    return "valid"

