"""Reading packet files and plan files into ``Packet`` and ``Plan``.

Both are validated against the published JSON Schemas (``prun/schemas/*.schema.json``) and
then checked as a whole: unique ids, ``after`` and ``shared`` naming packets that exist, no
cycle in ``after``. The schemas take any executor name; the loader checks it against the
executor registry (``prun.executors``) and asks the executor what it can do. Every refusal is
a ``UsageError`` whose message starts with ``file:line`` and whose hint says how to fix it.
"""

from __future__ import annotations

import difflib
import glob as _glob
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from .._util import yamldoc
from .._util.timeparse import parse_duration
from ..errors import UsageError
from .model import DataBoundary, Packet, Plan

SCHEMA_DIR = Path(__file__).parent / "schemas"
FRONT = "---"


@cache
def schema(name: str) -> dict:
    """The published schema ``packet`` or ``plan`` (a dict)."""
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", hint="check the path")
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory", hint="give a file")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: not UTF-8 text ({e.reason})", hint="save it as UTF-8")
    except OSError as e:
        raise UsageError(f"{path}: cannot read ({e.strerror})", hint="check its permissions")


# ---------------------------------------------------------------------------------------------
# Schema validation with file:line messages

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
    """The schema ``name`` as a fastjsonschema function: ``f(data)`` is True if valid. The
    generated code is compiled once per schema and version and kept in the user's cache
    folder (compiling it takes longer than validating a thousand packets)."""
    import hashlib
    import marshal
    import sys

    import fastjsonschema

    text = json.dumps(schema(name), sort_keys=True)
    key = hashlib.sha256(f"{text}{fastjsonschema.VERSION}{sys.version}".encode()).hexdigest()
    path = os.path.join(_cache_dir(), f"schema-{name}-{key[:24]}.marshal")
    try:
        with open(path, "rb") as f:
            code = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        code = compile(fastjsonschema.compile_to_code(schema(name)), f"<{name} schema>", "exec")
        try:
            from .._util.fsutil import atomic_write

            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, marshal.dumps(code), durable=False)
        except OSError:
            pass  # no cache: compiled again next time
    namespace: dict = {}
    exec(code, namespace)
    # the root schema's function is the first the generated code defines ($refs follow it)
    check = next(v for k, v in namespace.items() if k.startswith("validate_"))

    def valid(data) -> bool:
        try:
            check(data)
        except fastjsonschema.JsonSchemaException:
            return False
        return True

    return valid


def _cache_dir() -> str:
    import platformdirs

    return platformdirs.user_cache_dir("prun", appauthor=False)


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


# ---------------------------------------------------------------------------------------------
# Packets

def split_front_matter(text: str, source: str) -> tuple[str, str]:
    """(front matter YAML, body) of a packet file."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != FRONT:
        raise UsageError(f"{source}:1: a packet file starts with a '---' line (its front matter)",
                         hint="put '---', the YAML fields (id: ..., kind: ...), '---', then the "
                         "prompt; `prun packet new ID` writes a template")
    for i in range(1, len(lines)):
        if lines[i].strip() in (FRONT, "..."):
            return "".join(lines[1:i]), "".join(lines[i + 1:])
    raise UsageError(f"{source}:1: the front matter is not closed",
                     hint="add a line '---' after the YAML fields, before the prompt")


def load_packet(path: str | os.PathLike, *, defaults: Mapping | None = None) -> Packet:
    """Read one packet file (YAML front matter + Markdown prompt)."""
    p = Path(path)
    text = _read(p)
    front, body = split_front_matter(text, str(p))
    doc = yamldoc.load(front, str(p), offset=1)
    if not isinstance(doc.data, dict):
        raise UsageError(f"{p}:2: the front matter must be a mapping of fields",
                         hint="write 'id: my-packet' and the other fields, one per line")
    validate(doc, "packet")
    return _packet(doc, (), doc.data, body=body, base_dir=p.parent, defaults=defaults)


def _join_argv(value) -> str | None:
    if value is None:
        return None
    return shlex.join(value) if isinstance(value, list) else str(value)


def _packet(doc: yamldoc.Doc, where: Sequence[str | int], raw: Mapping[str, Any], *,
            body: str | None, base_dir: Path, defaults: Mapping | None) -> Packet:
    fields = {**(defaults or {}), **raw}
    where_s = doc.where(where)
    prompt = _prompt(doc, where, fields, body, base_dir)
    timeout = None
    if fields.get("timeout") is not None:
        try:
            timeout = parse_duration(fields["timeout"], what="timeout")
        except UsageError as e:
            raise UsageError(f"{doc.source}:{doc.line_of([*where, 'timeout'])}: {e.message}",
                             hint=e.hint)
    command = fields.get("command")
    executor = _executor(fields)
    if executor != "auto":
        from .. import executors
        from .routing import takes_session_tools

        _check_executor(doc, where, executor)
        ex = executors.get(executor)
        if fields.get("session_tools") and not takes_session_tools(ex):
            raise UsageError(f"{doc.source}:{doc.line_of([*where, 'session_tools'])}: packet "
                             f"{fields['id']!r} needs session tools but runs on "
                             f"{executor!r}, an outside process that cannot reach them",
                             hint="use executor: session (or auto), or drop session_tools")
        if ex.takes_command and not command:
            raise UsageError(f"{where_s}: packet {fields['id']!r} has executor: {executor} but "
                             "no command", hint="add command: [program, arg, ...] (the prompt "
                             "file's path is substituted for {prompt_file}, else the prompt is "
                             "on stdin)")
    return Packet(
        id=fields["id"],
        prompt=prompt,
        scope=fields.get("scope"),
        kind=fields.get("kind", "read-only"),
        executor=executor,
        command=tuple(command) if isinstance(command, list) else command,
        model=fields.get("model"),
        effort=fields.get("effort"),
        mode=fields.get("mode"),
        owns=tuple(fields.get("owns", ())),
        generates=tuple(fields.get("generates", ())),
        reads=tuple(fields.get("reads", ())),
        shared=dict(fields.get("shared", {})),
        state=tuple(fields.get("state", ())),
        after=tuple(fields.get("after", ())),
        base=fields.get("base"),
        timeout_s=timeout,
        data=_boundary(doc, where, raw, fields, f"packet {fields['id']!r}"),
        requires=tuple(fields.get("requires", ())),
        session_tools=bool(fields.get("session_tools", False)),
        subdispatch=bool(fields.get("subdispatch", False)),
        snapshot=bool(fields.get("snapshot", True)),
        sandbox=_sandbox(doc, [*where, "sandbox"], fields.get("sandbox")),
        source=doc.source,
        line=doc.line_of(where),
        lines={k: doc.key_line(where, k) for k in raw},
    )


def _executor(fields: Mapping[str, Any]) -> str:
    """The executor ``fields`` name; without one, ``command`` for a packet with a command (the
    packet format's rule), else ``auto`` (routing chooses)."""
    return fields.get("executor") or ("command" if fields.get("command") else "auto")


def _check_executor(doc: yamldoc.Doc, where: Sequence[str | int], name: str) -> None:
    """Refuse an executor name the registry does not know (or refuses: codex), at its line."""
    from .. import executors

    if name == "auto" or executors.known(name):
        return
    at = [*where, "executor"]
    prefix = f"{doc.source}:{doc.line_of(at)}: {_dotted(at)}"
    refused = executors.refusal(name)
    if refused:
        raise UsageError(f"{prefix}: {refused.message}", hint=refused.hint)
    choices = ["auto", *executors.names()]
    close = difflib.get_close_matches(name, choices, n=1)
    raise UsageError(f"{prefix}: unknown executor {name!r}",
                     hint=f"did you mean {close[0]!r}?" if close
                     else "choose one of " + ", ".join(choices))


def _boundary(doc: yamldoc.Doc, where: Sequence[str | int], raw: Mapping[str, Any],
              fields: Mapping[str, Any], who: str) -> DataBoundary:
    """The data boundary of ``fields``, checked (see ``prun.plan.boundary``): every ``may_go_to``
    entry an executor or a family, a ``keep`` retention with a good duration, and a named
    executor inside the boundary. Lines point at the packet's own fields (``raw``)."""
    from .. import executors
    from . import boundary

    data = fields.get("data") or {}
    raw_go = data.get("may_go_to")
    may_go_to = _strs(raw_go)
    bad = boundary.unknown(may_go_to)
    if bad is not None:
        at = [*where, "data", "may_go_to"] + ([may_go_to.index(bad)] if isinstance(raw_go, list)
                                              else [])
        raise UsageError(f"{doc.source}:{doc.line_of(at)}: {_dotted(at)}: {bad!r} is neither "
                         "an executor nor a provider family",
                         hint=f"use executors ({', '.join(executors.names())}) or families "
                         f"({', '.join(boundary.FAMILIES)})")
    try:
        boundary.parse_retention(data.get("retention"))
    except UsageError as e:
        raise UsageError(f"{doc.source}:{doc.line_of([*where, 'data', 'retention'])}: "
                         f"{e.message}", hint=e.hint)
    executor = _executor(fields)
    model = fields.get("model")
    if may_go_to and executor != "auto" and not boundary.allowed(may_go_to, executor, model):
        line = next((doc.line_of([*where, *path]) for path in
                     (("executor",), ("data", "may_go_to"), ("model",)) if path[0] in raw),
                    doc.line_of(where))
        raise boundary.outside(who, executor, model, may_go_to, f"{doc.source}:{line}")
    return DataBoundary(reachable=_strs(data.get("reachable")), may_go_to=may_go_to,
                        prohibited=_strs(data.get("prohibited")),
                        retention=data.get("retention"))


def _sandbox(doc: yamldoc.Doc, where: Sequence[str | int], value) -> str | None:
    """A ``sandbox:`` value as auto, on or off (YAML's unquoted on/off are booleans)."""
    if value is None:
        return None
    from ..settings import parse_sandbox

    try:
        return parse_sandbox(value)
    except UsageError as e:
        raise UsageError(f"{doc.source}:{doc.line_of(list(where))}: {e.message}", hint=e.hint)


def _strs(value) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _prompt(doc, where, fields, body, base_dir: Path) -> str:
    inline = fields.get("prompt")
    pfile = fields.get("prompt_file")
    body = body if body and body.strip() else None
    given = [x for x in (("the body", body), ("prompt", inline), ("prompt_file", pfile)) if x[1]]
    if len(given) > 1:
        raise UsageError(f"{doc.where(where)}: packet {fields['id']!r} has a prompt in both "
                         f"{given[0][0]} and {given[1][0]}", hint="keep one of them")
    if pfile:
        target = base_dir / pfile
        if not target.is_file():
            raise UsageError(f"{doc.source}:{doc.line_of([*where, 'prompt_file'])}: "
                             f"prompt_file {pfile!r} not found (looked at {target})",
                             hint="give a path relative to the file that names it")
        return _read(target)
    text = body or inline
    if not text or not text.strip():
        raise UsageError(f"{doc.where(where)}: packet {fields['id']!r} has no prompt",
                         hint="write the prompt below the front matter (or give prompt: or "
                         "prompt_file:)")
    return text.lstrip("\n")


# ---------------------------------------------------------------------------------------------
# Plans

_GLOB_CHARS = set("*?[")


def load_plan(path: str | os.PathLike) -> Plan:
    """Read a plan file and every packet it names; check ids, ``after`` and ``shared``."""
    p = Path(path)
    doc = yamldoc.load(_read(p), str(p))
    if not isinstance(doc.data, dict):
        raise UsageError(f"{p}:1: a plan is a YAML mapping with a 'packets' list",
                         hint="see docs/plans.md for an example")
    validate(doc, "plan")
    data = doc.data
    defaults = data.get("defaults") or {}
    if defaults:
        if defaults.get("executor"):
            _check_executor(doc, ("defaults",), defaults["executor"])
        _boundary(doc, ("defaults",), defaults, defaults, "defaults")
    packets: list[Packet] = []
    for i, entry in enumerate(data["packets"]):
        if isinstance(entry, str):
            for f in _expand(doc, i, entry, p.parent):
                packets.append(load_packet(f, defaults=defaults))
        else:
            packets.append(_packet(doc, ("packets", i), entry, body=None, base_dir=p.parent,
                                   defaults=defaults))
    deadline = data.get("deadline")
    if deadline is not None:
        deadline = _deadline(doc, deadline)
    plan = Plan(
        packets=tuple(packets),
        path=str(p.resolve()),
        name=data.get("name") or p.stem,
        deadline=deadline,
        cancel_owner=data.get("cancel_owner"),
        cancel_action=data.get("cancel_action", "cancel"),
        check=_join_argv(data.get("check")),
        parallel=data.get("parallel"),
        on_event=_join_argv(data.get("on_event")),
        setup=_join_argv(data.get("setup")),
        base=data.get("base"),
        sandbox=_sandbox(doc, ["sandbox"], data.get("sandbox")),
        lines={k: doc.key_line((), k) for k in data},
    )
    check_plan(plan)
    return plan


def _deadline(doc, value) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    try:
        parse_duration(value)
        return str(value)
    except UsageError:
        pass
    import datetime as dt

    try:
        dt.datetime.fromisoformat(str(value))
        return str(value)
    except ValueError:
        raise UsageError(f"{doc.source}:{doc.line_of(['deadline'])}: bad deadline {value!r}",
                         hint="give a duration from the start (90m, 2h) or an ISO time "
                         "(2026-12-01T18:00:00Z)")


def _expand(doc: yamldoc.Doc, i: int, entry: str, root: Path) -> list[Path]:
    where = doc.where(["packets", i])
    if _GLOB_CHARS & set(entry):
        found = sorted(Path(f) for f in _glob.glob(str(root / entry), recursive=True)
                       if os.path.isfile(f))
        if not found:
            raise UsageError(f"{where}: {entry!r} matches no packet file (relative to {root})",
                             hint="fix the glob, or write the packet files first "
                             "(`prun packet new ID`)")
        return found
    target = root / entry
    if target.is_dir():
        found = sorted(target.glob("*.md"))
        if not found:
            raise UsageError(f"{where}: folder {entry!r} holds no *.md packet file",
                             hint="add packet files or name them one by one")
        return found
    if not target.is_file():
        raise UsageError(f"{where}: packet file {entry!r} not found (looked at {target})",
                         hint="give a path relative to the plan file")
    return [target]


def check_plan(plan: Plan) -> None:
    """Ids unique; ``after`` and ``shared`` owners name packets of the plan; no ``after`` cycle."""
    seen: dict[str, Packet] = {}
    for pk in plan.packets:
        if pk.id in seen:
            first = seen[pk.id]
            raise UsageError(f"{_at(pk)}: duplicate packet id {pk.id!r} (also at {_at(first)})",
                             hint="give every packet its own id")
        seen[pk.id] = pk
    for pk in plan.packets:
        for dep in pk.after:
            if dep == pk.id:
                raise UsageError(f"{pk.where('after')}: packet {pk.id!r} comes after itself",
                                 hint="remove it from its own after list")
            if dep not in seen:
                raise UsageError(f"{pk.where('after')}: packet {pk.id!r} comes after unknown "
                                 f"packet {dep!r}", hint=_suggest(dep, seen))
        for path, owner in pk.shared.items():
            if owner not in seen:
                raise UsageError(f"{pk.where('shared')}: packet {pk.id!r} names unknown packet "
                                 f"{owner!r} as integration owner of {path!r}",
                                 hint=_suggest(owner, seen))
    cycle = find_cycle({pk.id: pk.after for pk in plan.packets})
    if cycle:
        raise UsageError(f"{seen[cycle[0]].where('after')}: the after lists form a cycle: "
                         + " -> ".join([*cycle, cycle[0]]),
                         hint="a dependency is a sequence: remove one of these after entries, "
                         "or group the packets into one")


def _at(pk: Packet) -> str:
    return pk.where()


def _suggest(name: str, seen: Mapping[str, Packet]) -> str:
    close = difflib.get_close_matches(name, list(seen), n=1)
    return f"did you mean {close[0]!r}?" if close else "known ids: " + ", ".join(sorted(seen))


def find_cycle(after: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A list of ids forming a cycle through ``after`` edges, or None."""
    color: dict[str, int] = {}
    for start in sorted(after):
        if color.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                color[node] = 1
                path.append(node)
            deps = [d for d in after.get(node, ()) if d in after]
            if i < len(deps):
                stack.append((node, i + 1))
                nxt = deps[i]
                if color.get(nxt) == 1:
                    return path[path.index(nxt):]
                if not color.get(nxt):
                    stack.append((nxt, 0))
            else:
                color[node] = 2
                path.pop()
    return None
