"""Quoting names so that no line prun prints can be forged, and no terminal is driven by one.

A name a unit, a plan or a person could have chosen (a path, an id, a reason's detail, error
text that embeds one) may hold anything a file name can: a newline followed by a line prun
prints, a tab, an escape sequence that changes a terminal's title, clears its screen or writes
its clipboard, bytes that are not UTF-8. Two functions make it harmless:

- ``quote(name)``, for a token of a terse line: the name as it is when it is plain, else
  between double quotes in C style, as git writes a path under ``core.quotePath``: ``\\a \\b
  \\t \\n \\v \\f \\r \\" \\\\``, and ``\\ooo`` (three octal digits) for each byte of any other
  character that is not printable (C0, DEL, C1, format characters such as bidi overrides,
  line and paragraph separators, spaces other than the plain space) and for each byte that is
  not valid UTF-8. A name is plain when it is not empty and holds none of these, no
  whitespace, no ``"`` and no backslash. Printable characters of any script are kept as they
  are. So a token is one word with no byte below 0x20 nor from 0x7f to 0x9f, every line starts
  with the word prun put first, and ``unquote`` gives the name back exactly.
- ``printable(text)``, for what a person reads (tables, the live view, error messages): the
  text as it is, but every character ``quote`` would escape written as its escape instead of
  itself (no quotes added). A single line, with no control character.

Names that are not valid UTF-8 reach prun as Python strings decoded with ``surrogateescape``
(a byte ``b`` that is not part of valid UTF-8 is the lone surrogate ``U+DC00 + b``), as ``os``
and git's output are decoded here; ``quote`` writes such a byte as ``\\ooo`` and ``unquote``
gives the same string back. ``--json`` outputs carry the names raw, as JSON strings (such a
byte then as ``\\udcXX``).
"""

from __future__ import annotations

SHORT = {"\a": "a", "\b": "b", "\t": "t", "\n": "n", "\v": "v", "\f": "f", "\r": "r",
         '"': '"', "\\": "\\"}
_BACK = {v: k for k, v in SHORT.items()}


def _plain_char(c: str) -> bool:
    """True for a character that may stand for itself inside quotes."""
    return c.isprintable() and c not in SHORT


def _escape(c: str) -> str:
    """One character as its C-style escape (``\\n``, ``\\033``, ``\\342\\200\\256``)."""
    short = SHORT.get(c)
    if short is not None:
        return "\\" + short
    try:
        raw = c.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that stands for no byte (from JSON, say)
        raw = c.encode("utf-8", "surrogatepass")
    return "".join(f"\\{b:03o}" for b in raw)


def needs_quoting(name: str, special: str = "") -> bool:
    """True when ``name`` is not a plain token (see the module), or holds one of
    ``special`` (a line's own separators, such as ``=``)."""
    return (not name or any(not c.isprintable() or c in SHORT or c.isspace() or c in special
                            for c in name))


def quote(value: object, special: str = "", *, always: bool = False) -> str:
    """``value`` (a name: ``str()`` of anything else) as one token of a terse line: as it is
    when plain, else in double quotes with C-style escapes (see the module). ``special``:
    more characters that make a name be quoted (kept as they are inside the quotes);
    ``always``: quoted even when plain (a field documented as always quoted)."""
    name = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
    if not always and not needs_quoting(name, special):
        return name
    return '"' + "".join(c if _plain_char(c) else _escape(c) for c in name) + '"'


def rest_of_line(value: object) -> str:
    """A name that is the rest of its line (the seed's ``STATE-DIR <abs-path>`` and
    ``DONE <abs-path>``): as it is unless it holds what would break the line or could be
    read as quoted (a character ``quote`` escapes, a leading ``"``, a leading or trailing
    space), exactly as git leaves a path with inner spaces unquoted under
    ``core.quotePath``. A reader takes the text after the word, and unquotes it only when it
    starts with ``"``."""
    name = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
    if name and name == name.strip(" ") and not name.startswith('"') and all(
            c == " " or (c.isprintable() and c not in SHORT) for c in name):
        return name
    return quote(name, always=True)


def json_token(value: object, *, spaces: bool = False) -> str:
    """``value`` as one token holding compact JSON (a panel's answers): every whitespace or
    other character that is not printable written as its ``\\uXXXX`` escape, so the token
    stays one word with no control character and still parses as JSON (``spaces``: plain
    spaces kept, for the last value of a line)."""
    import json

    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return "".join(c if (c.isprintable() and not c.isspace()) or (spaces and c == " ")
                   else _json_escape(c) for c in text)


def _json_escape(c: str) -> str:
    code = ord(c)
    if code > 0xFFFF:   # (no such character is unprintable today, but stay JSON)
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def word(key: str, value: object) -> str:
    """A ``key=value`` token: ``value`` quoted (see ``quote``), and quoted too when it holds
    an ``=``, so a value never reads as a second key."""
    return f"{key}={quote(value, special='=')}"


def shell_word(arg: str) -> str:
    """``arg`` as one word of a command line to paste into a POSIX shell: ``shlex.quote``'s
    when it is printable, else bash's ``$'...'`` with ``quote``'s escapes (so the line holds
    no control character and stays one line)."""
    import shlex

    if arg.isprintable():
        return shlex.quote(arg)
    return "$'" + "".join("\\'" if c == "'" else c if _plain_char(c) else _escape(c)
                          for c in arg) + "'"


def printable(text: object, keep: str = "") -> str:
    """``text`` for a person's eyes: every character ``quote`` escapes written as its escape,
    except the plain space, double quotes and backslashes, which are kept, and the characters
    of ``keep`` (``"\\n\\t"`` for a document of several lines); nothing added."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(c if c.isprintable() or c in keep else _escape(c) for c in s)


def unquote(token: str) -> str:
    """The name ``token`` stands for: ``quote``'s inverse (a plain token is itself). A quoted
    token whose escapes are not ``quote``'s raises ``ValueError``."""
    if not (len(token) >= 2 and token[0] == '"' and token[-1] == '"'):
        return token
    out = bytearray()
    body, i = token[1:-1], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in _BACK:
            out += _BACK[nxt].encode()
            i += 2
        elif len(body) >= i + 4 and all(d in "01234567" for d in body[i + 1:i + 4]):
            out.append(int(body[i + 1:i + 4], 8) & 0xFF)
            i += 4
        else:
            raise ValueError(f"bad escape at {i} in {token!r}")
    return out.decode("utf-8", "surrogateescape")


def split(line: str) -> list[str]:
    """The tokens of a terse line (split at spaces outside quotes), each unquoted; a
    ``key=value`` token's value is unquoted after its ``=``."""
    words: list[str] = []
    i, n = 0, len(line)
    while i < n:
        if line[i] == " ":
            i += 1
            continue
        start, quoted = i, False
        while i < n and (quoted or line[i] != " "):
            if line[i] == "\\" and quoted:
                i += 2
                continue
            if line[i] == '"':
                quoted = not quoted
            i += 1
        word = line[start:i]
        key, eq, value = word.partition("=")
        if eq and not key.startswith('"') and value.startswith('"'):
            words.append(key + "=" + unquote(value))
        else:
            words.append(unquote(word))
    return words
