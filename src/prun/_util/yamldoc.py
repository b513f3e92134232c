"""YAML documents that remember where each value came from.

Plans and packet front matter are YAML written by hand, so every error must name the file and
the line. ``load`` parses one document and keeps PyYAML's node tree beside the data; ``line_of``
maps a path of keys and indexes (as a JSON Schema error reports it) back to a line number.
Duplicate keys are refused (plain PyYAML keeps the last one silently).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml
from yaml.nodes import MappingNode, SequenceNode

from ..errors import UsageError
from .quoting import quote

if TYPE_CHECKING:
    from yaml.nodes import Node


@dataclass(frozen=True)
class Doc:
    """Parsed YAML: ``data`` (plain Python) and ``node`` (its PyYAML node tree)."""

    data: Any
    node: Node | None
    source: str
    offset: int = 0  # lines before the YAML text in its file (front matter: 1)

    def line_of(self, path: Sequence[str | int] = ()) -> int:
        """1-based line in ``source`` of the value at ``path`` (or its nearest known parent)."""
        return line_of(self.node, path) + self.offset

    def key_line(self, path: Sequence[str | int], key: str) -> int:
        """1-based line of the key ``key`` in the mapping at ``path``."""
        node = _walk(self.node, path)
        if isinstance(node, MappingNode):
            for k, _v in node.value:
                if k.value == key:
                    line: int = k.start_mark.line
                    return line + 1 + self.offset
        return self.line_of(path)

    def where(self, path: Sequence[str | int] = ()) -> str:
        return f"{self.source}:{self.line_of(path)}"


def load(text: str, source: str, *, offset: int = 0) -> Doc:
    """Parse ``text`` (one YAML document) from ``source``; UsageError names file and line.

    Before anything is built from it, a document is refused (one line) when it holds a
    character YAML does not allow (NUL, other control characters), nests deeper than
    ``MAX_DEPTH``, or expands through aliases to more than ``MAX_NODES`` nodes or uses more
    than ``MAX_ALIASES`` aliases (a billion laughs never gets built)."""
    _refuse_characters(text, source, offset)
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is not None:  # libyaml: ten times faster on a plan of a thousand packets
        loader = fast(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_shape(node, source, offset)
                _refuse_duplicate_keys(node, source, offset)
                return Doc(_plain(loader.construct_document(node)), node, source, offset)
        except (yaml.YAMLError, RecursionError):
            pass  # parse it again below: the pure-Python parser's messages name the problem
        finally:
            loader.dispose()
    try:
        loader = yaml.SafeLoader(text)
    except yaml.YAMLError as e:
        raise UsageError(f"{source}:{offset + 1}: bad YAML: {e}", hint="fix the YAML syntax")
    try:
        node = loader.get_single_node()
        if node is None:
            return Doc(None, None, source, offset)
        _check_shape(node, source, offset)
        _refuse_duplicate_keys(node, source, offset)
        data = loader.construct_document(node)
    except RecursionError:
        raise UsageError(f"{source}:{offset + 1}: the YAML nests deeper than {MAX_DEPTH} levels",
                         hint="a plan is a few levels deep: flatten the nested lists") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = (mark.line + 1 + offset) if mark else offset + 1
        what = " ".join(x for x in (e.context, e.problem) if x)
        if e.context_mark and mark and e.context_mark.line != mark.line:
            what += f" (the construct opened at line {e.context_mark.line + 1 + offset})"
        raise UsageError(f"{source}:{line}: bad YAML: {what}",
                         hint="fix the syntax there; quote values that contain ': ' or start "
                         "with a special character such as '*', '&', '!', '{' or '['")
    except yaml.YAMLError as e:
        raise UsageError(f"{source}:{offset + 1}: bad YAML: {e}", hint="fix the YAML syntax")
    finally:
        loader.dispose()
    return Doc(_plain(data), node, source, offset)


MAX_DEPTH = 64          # levels of nested mappings and lists
MAX_ALIASES = 100       # uses of an anchor (*name) in one document
MAX_NODES = 200_000     # values in the document once every alias is expanded
# what YAML allows in a document (YAML 1.1, as PyYAML's reader): tab, line breaks, printable
# characters; NUL, the other C0 controls, DEL and the C1 controls but NEL are not
_NOT_YAML = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd"
                       "\U00010000-\U0010ffff]")


def _refuse_characters(text: str, source: str, offset: int) -> None:
    bad = _NOT_YAML.search(text)
    if bad:
        line = text.count("\n", 0, bad.start()) + 1 + offset
        raise UsageError(f"{source}:{line}: the character {quote(bad.group(), always=True)} is "
                         "not allowed in YAML", hint="remove it; in a double-quoted string an "
                         "escape such as \\t can stand for it")


def _check_shape(root: Node, source: str, offset: int) -> None:
    """Refuse a node tree deeper than MAX_DEPTH, with more than MAX_ALIASES aliases, that
    expands to more than MAX_NODES values, or that contains itself (a recursive alias).
    Each distinct node is looked at once (its expanded size remembered), so a document built
    to expand exponentially is refused in time linear in its text."""
    size: dict[int, int] = {}
    refs: dict[int, int] = {}   # how many times each node is reached: more than once is an alias
    open_: set[int] = set()

    def where(node: Node) -> str:
        return f"{source}:{node.start_mark.line + 1 + offset}"

    # iterative depth-first walk: (node, depth, children done)
    stack: list[tuple[Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_NODES:
                raise UsageError(f"{where(root)}: the YAML expands to more than {MAX_NODES} "
                                 "values", hint="write the plan out without aliases, or split it")
            continue
        refs[key] = refs.get(key, 0) + 1
        if refs[key] > 1:
            if key in open_:
                raise UsageError(f"{where(node)}: a YAML alias refers to a value that holds it",
                                 hint="remove the recursive alias")
            if sum(n - 1 for n in refs.values()) > MAX_ALIASES:
                raise UsageError(f"{where(node)}: more than {MAX_ALIASES} YAML aliases",
                                 hint="write the values out, or use the plan's defaults:")
            if key in size:
                continue
        if depth > MAX_DEPTH:
            raise UsageError(f"{where(node)}: the YAML nests deeper than {MAX_DEPTH} levels",
                             hint="a plan is a few levels deep: flatten the nested lists")
        if isinstance(node, MappingNode | SequenceNode):
            open_.add(key)
            stack.append((node, depth, True))
            stack.extend((k, depth + 1, False) for k in _children(node))
        else:
            size[key] = 1


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def _plain(value: Any) -> Any:
    """YAML timestamps become ISO strings, so schemas and code see only JSON types."""
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    return value


def _refuse_duplicate_keys(node: Node, source: str, offset: int) -> None:
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, MappingNode):
            seen: dict[str, int] = {}
            for k, v in n.value:
                key = str(k.value)
                line = k.start_mark.line + 1 + offset
                if key in seen and k.tag != "tag:yaml.org,2002:merge":
                    raise UsageError(f"{source}:{line}: duplicate key {key!r} "
                                     f"(first at line {seen[key]})",
                                     hint="keep one of them")
                seen[key] = line
                stack.append(v)
        elif isinstance(n, SequenceNode):
            stack.extend(n.value)


def _walk(node: Node | None, path: Sequence[str | int]) -> Node | None:
    for step in path:
        if node is None:
            return None
        if isinstance(node, MappingNode):
            node = next((v for k, v in node.value if k.value == str(step)), None)
        elif isinstance(node, SequenceNode) and isinstance(step, int) and \
                0 <= step < len(node.value):
            node = node.value[step]
        else:
            return None
    return node


def line_of(node: Node | None, path: Sequence[str | int] = ()) -> int:
    """1-based line (within the YAML text) of the deepest node on ``path`` that exists."""
    if node is None:
        return 1
    best = node
    for i in range(len(path) + 1):
        found = _walk(node, path[:i])
        if found is None:
            break
        best = found
    line: int = best.start_mark.line
    return line + 1
