"""The packet template (``prun packet new``) and the placeholders it leaves for its author.

The template marks what its author must write with ``TODO:`` at the start of a value: the
``scope``, the data boundary's ``reachable``, ``prohibited`` and ``retention``, and the lines of
its body. A packet that still holds one of them, or whose body is the template's own text
unchanged, is half-written: ``prun check`` and ``prun run`` refuse it (``refuse``), naming the
file, the line and the field, before anything is made.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from importlib.resources import files

from .._util import yamldoc
from ..errors import UsageError
from .validation import dotted

MARK = "TODO:"
FRONT = "---"
# The fields where the template puts a placeholder (paths into the front matter).
FIELDS: tuple[tuple[str, ...], ...] = (("scope",), ("data", "reachable"), ("data", "prohibited"),
                                       ("data", "retention"))


@cache
def _source() -> str:
    return files("prun.plan").joinpath("templates/packet.md").read_text(encoding="utf-8")


def text(packet_id: str, *, kind: str | None = None) -> str:
    """The template for ``packet_id`` (its id checked by the caller), ``kind`` preset."""
    out = _source().replace("{id}", packet_id).replace("{{", "{").replace("}}", "}")
    if kind:
        out = out.replace("\nkind: read-only\n", f"\nkind: {kind}\n", 1)
    return out


def body() -> str:
    """The template's body: the text below its front matter."""
    lines = _source().splitlines(keepends=True)
    closing = next(i for i in range(1, len(lines)) if lines[i].strip() == FRONT)
    return "".join(lines[closing + 1:])


def found(doc: yamldoc.Doc, where: Sequence[str | int], raw: object, packet_body: str | None,
          body_line: int) -> tuple[str, ...]:
    """``file:line: field ...`` of each placeholder a packet still holds: a value of ``FIELDS``
    in its own front matter (``raw``) starting with ``TODO:``, a body line starting with it,
    or a body that is the template's unchanged."""
    out = []
    for path in FIELDS:
        value: object = raw
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        items = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
        for i, item in items:
            if isinstance(item, str) and item.strip().startswith(MARK):
                at = [*where, *path] + ([] if i is None else [i])
                out.append(f"{doc.source}:{doc.line_of(at)}: {dotted(at[len(where):])} starts with "
                           f"{MARK}")
    if packet_body is None:
        return tuple(out)
    if packet_body.split() == body().split():
        return (*out, f"{doc.source}:{body_line}: body is the template's text, unchanged")
    out += [f"{doc.source}:{body_line + k}: body starts a line with {MARK}" for k, line in
            enumerate(packet_body.splitlines()) if line.strip().startswith(MARK)]
    return tuple(out)


def refuse(placeholders: Iterable[str]) -> None:
    """Refuse (UsageError, exit 2) a plan whose packets still hold placeholders, naming the
    first and how many more there are."""
    left = list(placeholders)
    if not left:
        return
    more = f" (and {len(left) - 1} more)" if len(left) > 1 else ""
    raise UsageError(f"half-written packet: {left[0]}{more}",
                     hint=f"write the packet's own text where each {MARK} stands, or delete the "
                     "line")
