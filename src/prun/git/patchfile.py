"""Reading a patch git wrote (``git diff``, ``--binary`` or not): its blocks, one per file,
each with the old and new path and mode its header names and where its text is.

Git's header format: ``diff --git a/OLD b/NEW``, then extended lines (``old mode``, ``new
mode``, ``deleted file mode``, ``new file mode``, ``rename from``/``to``, ``copy from``/``to``,
``similarity index``, ``index A..B [MODE]``), then ``--- a/OLD`` and ``+++ b/NEW`` (absent for a
binary file, a mode change or an empty file). A name that holds a special byte is C-quoted
(``"a/x\\ty"``). A block starts at a line that begins with ``diff --git ``: no line of a hunk
(``' '``, ``+``, ``-``, ``\\``) or of a binary patch (base85 holds no space) can. The first path
component of a ``---``/``+++``/``diff --git`` name is its prefix, stripped as ``git apply -p1``
strips it. Names are decoded as prun decodes every git output (UTF-8, undecodable bytes kept as
surrogates), so they compare equal to the names other git calls print.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

LINK_MODE = "120000"
_ESCAPES = {ord("a"): 7, ord("b"): 8, ord("t"): 9, ord("n"): 10, ord("v"): 11, ord("f"): 12,
            ord("r"): 13, ord('"'): 34, ord("\\"): 92}


@dataclass(frozen=True)
class Block:
    """One file's part of a patch."""

    old_path: str | None          # None: the file is created
    new_path: str | None          # None: the file is deleted
    old_mode: str | None          # "100644", "100755", "120000" (a link), None: not given
    new_mode: str | None
    start: int                    # byte offsets of the block in the patch
    end: int

    @property
    def path(self) -> str:
        """The path after the change (the deleted path for a deletion)."""
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))

    @property
    def makes_link(self) -> bool:
        """Its new side is a symbolic link."""
        return self.new_path is not None and self.new_mode == LINK_MODE

    @property
    def was_link(self) -> bool:
        """Its old side is a symbolic link."""
        return self.old_path is not None and self.old_mode == LINK_MODE


def blocks(patch: bytes) -> list[Block]:
    """The blocks of ``patch``, in order."""
    starts = [0] if patch.startswith(b"diff --git ") else []
    at = patch.find(b"\ndiff --git ")
    while at >= 0:
        starts.append(at + 1)
        at = patch.find(b"\ndiff --git ", at + 1)
    return [_block(patch, s, starts[i + 1] if i + 1 < len(starts) else len(patch))
            for i, s in enumerate(starts)]


def _lines(patch: bytes, start: int, end: int) -> Iterator[bytes]:
    """The lines of ``patch[start:end]``, one at a time (a block can be a large binary)."""
    while start < end:
        nl = patch.find(b"\n", start, end)
        stop = end if nl < 0 else nl
        yield patch[start:stop]
        start = stop + 1


def _block(patch: bytes, start: int, end: int) -> Block:
    lines = _lines(patch, start, end)
    first = next(lines)
    old = new = old_mode = new_mode = None
    created = deleted = False
    renamed_from = renamed_to = None
    for line in lines:
        if line.startswith((b"@@", b"GIT binary patch", b"Binary files ")):
            break
        word, _, rest = line.partition(b" ")
        if line.startswith(b"--- "):
            old = _name(line[4:], strip=True)
        elif line.startswith(b"+++ "):
            new = _name(line[4:], strip=True)
            break
        elif line.startswith(b"new file mode "):
            created, new_mode = True, _text(line[14:])
        elif line.startswith(b"deleted file mode "):
            deleted, old_mode = True, _text(line[18:])
        elif line.startswith(b"old mode "):
            old_mode = _text(line[9:])
        elif line.startswith(b"new mode "):
            new_mode = _text(line[9:])
        elif line.startswith((b"rename from ", b"copy from ")):
            renamed_from = _name(line.split(b" ", 2)[2], strip=False)
        elif line.startswith((b"rename to ", b"copy to ")):
            renamed_to = _name(line.split(b" ", 2)[2], strip=False)
        elif word == b"index":
            mode = rest.split(b" ")[1:2]
            if mode:
                old_mode = old_mode or _text(mode[0])
                new_mode = new_mode or _text(mode[0])
        elif word not in (b"similarity", b"dissimilarity"):
            break
    a, b = _header_names(first[len(b"diff --git "):])
    old_path = None if created else (renamed_from or old or a)
    new_path = None if deleted else (renamed_to or new or b)
    return Block(old_path, new_path, old_mode, new_mode, start, end)


def _header_names(line: bytes) -> tuple[str | None, str | None]:
    """The two names of a ``diff --git`` line, prefixes stripped. Unquoted names may hold
    spaces: then both are the same name (as git writes them for all but a rename or copy, whose
    names come from its own lines), so the line is cut where its halves match."""
    if line.startswith(b'"'):
        first, rest = _unquote(line)
        second = _name(rest.lstrip(b" "), strip=True)
        return _strip(first), second
    for i in (i for i, c in enumerate(line) if c == 0x20):
        a, b = _strip(_text(line[:i])), _name(line[i + 1:], strip=True)
        if a == b:
            return a, b
    return None, None


def _name(raw: bytes, *, strip: bool) -> str | None:
    """A name as git writes it on a header line: C-quoted or plain (a trailing tab git adds
    after a name with a space cut off), ``/dev/null`` for none."""
    if raw.startswith(b'"'):
        name, _ = _unquote(raw)
    else:
        name = _text(raw.split(b"\t", 1)[0])     # a plain name holds no tab: quoted then
    if name == "/dev/null":
        return None
    return _strip(name) if strip else name


def _strip(name: str | None) -> str | None:
    """The name without its first component (``a/``, ``b/``), as ``git apply -p1`` reads it."""
    if name is None:
        return None
    _, sep, rest = name.partition("/")
    return rest if sep else None


def _unquote(raw: bytes) -> tuple[str, bytes]:
    """A C-quoted name at the start of ``raw`` (its opening quote included): the name, and what
    follows its closing quote."""
    out = bytearray()
    i = 1
    while i < len(raw):
        c = raw[i]
        if c == ord('"'):
            return _text(bytes(out)), raw[i + 1:]
        if c == ord("\\") and i + 1 < len(raw):
            nxt = raw[i + 1]
            if ord("0") <= nxt <= ord("7"):
                out.append(int(raw[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return _text(bytes(out)), b""


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")
