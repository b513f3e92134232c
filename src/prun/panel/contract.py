"""The panel's structured contract: the question, the JSON Schema every answer must pass, what
each panelist is told, and how an answer is read back and judged.

The rule for where an answer is: the last fenced block marked ``json`` in the panelist's
result (```` ```json ... ``` ````), else the whole result, if it is one JSON document. Prose
around the block (the panelist's reasoning and evidence) is kept as evidence and never read as
the answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import exceptions, validators

from .._util.regular import read_regular
from ..errors import UsageError

MAX_ERRORS = 10           # validation errors named (in a follow-up, in the evidence)
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.M)


@dataclass(frozen=True)
class Contract:
    """The question and the schema the panel answers it under (``schema`` as parsed)."""

    question: str
    schema: dict[str, Any]
    question_file: str
    schema_file: str


def load(question_file: str, schema_file: str) -> Contract:
    """Read and check the question and the schema; a bad one is a ``UsageError`` (exit 2),
    before anything is made."""
    question = _read(question_file, "question file")
    if not question.strip():
        raise UsageError(f"{question_file}: the question file is empty",
                         hint="write the question the panel is to answer")
    return Contract(question=question, schema=load_schema(schema_file),
                    question_file=str(Path(question_file).resolve()),
                    schema_file=str(Path(schema_file).resolve()))


def load_schema(path: str) -> dict[str, Any]:
    """A JSON Schema file, parsed and checked against its own metaschema."""
    text = _read(path, "schema file")
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}:{e.lineno}: the schema is not valid JSON ({e.msg}, column "
                         f"{e.colno})", hint="fix the JSON of the schema file")
    if not isinstance(schema, dict):
        raise UsageError(f"{path}: a JSON Schema is a JSON object (got {type(schema).__name__})",
                         hint='write {"type": "object", "properties": {...}}')
    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "the top level"
        raise UsageError(f"{path}: not a valid JSON Schema at {where}: "
                         f"{_first_line(e.message)}",
                         hint="fix the schema (its metaschema is named by $schema, "
                         "else the latest draft)")
    return schema


FILE_MAX_BYTES = 8 * 1024 * 1024   # a question or a schema file


def _read(path: str, what: str) -> str:
    """A question or schema file: a regular file of at most FILE_MAX_BYTES, UTF-8 text."""
    if not Path(path).exists():
        raise UsageError(f"{path}: no such {what}", hint="check the path")
    data = read_regular(path, FILE_MAX_BYTES, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason})", hint="save it as UTF-8")


def prompt(contract: Contract) -> str:
    """What every panelist is told after its brief's contract: the question, then the
    answer contract with the schema."""
    schema = json.dumps(contract.schema, indent=2, ensure_ascii=False)
    return (f"{contract.question.strip()}\n\n"
            "## Answer contract\n\n"
            "You are one panelist of several, from different model families, answering the "
            "same question independently. Answer with one JSON document that this JSON Schema "
            "validates:\n\n"
            f"```json\n{schema}\n```\n\n"
            "Put your answer in your result as a fenced block marked json (```json, then the "
            "document, then ```); the last such block is the one read. Reasoning and evidence "
            "(the files and lines you read, what you checked) may come before it, as plain "
            "text. Do not guess: where the schema allows it, say what you could not establish.\n")


def fix_prompt(errors: list[str]) -> str:
    """The follow-up sent once to a panelist whose answer did not validate."""
    named = "\n".join(f"- {e}" for e in errors[:MAX_ERRORS])
    more = f"\n- ... and {len(errors) - MAX_ERRORS} more" if len(errors) > MAX_ERRORS else ""
    return ("Your answer does not pass the answer contract's JSON Schema:\n\n"
            f"{named}{more}\n\n"
            "Reply with the corrected answer only: one JSON document that the same schema "
            "validates, in a fenced block marked json (```json ... ```).\n")


@dataclass(frozen=True)
class Judged:
    """One answer read back: the document (when one was found), whether the schema passes
    it, and what is wrong with it (no document, or the validation errors)."""

    answer: Any = None
    found: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.found and not self.errors


def judge(text: str | None, schema: dict[str, Any]) -> Judged:
    """Read the answer out of a result's ``text`` and validate it against ``schema``."""
    if text is None or not text.strip():
        return Judged(errors=["the result is empty: no JSON document"])
    found, answer, why = extract(text)
    if not found:
        return Judged(errors=[why])
    return Judged(answer=answer, found=True, errors=validate(answer, schema))


def extract(text: str) -> tuple[bool, Any, str]:
    """(found, document, why not): the last fenced ``json`` block that parses, else the whole
    text as one JSON document."""
    blocks = fenced_json(text)
    if blocks:
        try:
            return True, json.loads(blocks[-1]), ""
        except json.JSONDecodeError as e:
            return False, None, (f"the last ```json block is not valid JSON: {e.msg} "
                                 f"(line {e.lineno}, column {e.colno})")
    try:
        return True, json.loads(text), ""
    except json.JSONDecodeError:
        return False, None, "no JSON document: no ```json block, and the result is not JSON"


def fenced_json(text: str) -> list[str]:
    """The contents of every closed fenced block whose info string is ``json``."""
    out: list[str] = []
    pos = 0
    while (m := _FENCE.search(text, pos)) is not None:
        fence, info = m.group("fence"), m.group("info").strip().lower()
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M)
        end = close.search(text, m.end())
        if end is None:
            break
        if info.split()[:1] == ["json"]:
            out.append(text[m.end():end.start()].strip("\n"))
        pos = end.end()
    return out


def validate(answer: Any, schema: dict[str, Any]) -> list[str]:
    """The schema's complaints about ``answer``, one line each (``$.path: message``)."""
    cls = validators.validator_for(schema)
    errors = sorted(cls(schema).iter_errors(answer), key=lambda e: list(map(str, e.path)))
    return [f"{json_path(e.absolute_path)}: {_first_line(e.message)}" for e in errors]


def json_path(parts: Any) -> str:
    """``$`` then ``.key`` or ``[index]`` for each step."""
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else text
    return line if len(line) <= 300 else line[:297] + "..."
