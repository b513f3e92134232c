"""Every MCP tool argument is data: checked before anything runs, and handed to the child so
that it can never become a flag.

The rules (each is in the tool's input schema too, and in docs/coordinators.md):

    id        a run id or unique prefix, an attempt id (RUN:PACKET:N): 1-200 letters, digits,
              '.', '_', ':' and '-', the first a letter or digit, no '..'
    packet    a packet id, a unit id: as a plan's, 1-120 letters, digits, '.', '_' and '-', the
              first a letter or digit, no '..'
    name      an executor, a model, an effort, a quota group: 1-100 letters, digits, '.', '_',
              ':', '@', '+' and '-', the first a letter or digit
    receipt   an identifier another runtime returned: 1-200 characters, no blank, no control
              character, not starting with '-'
    duration  a duration or an ISO time (90m, 600, 2026-12-01T10:00:00Z): 1-64 letters,
              digits, '.', ':', '+', '-' and blanks, the first a letter or digit
    line      a reason, a name of who decides: at most 4,000 characters on one line
    note      at most 4,000 characters; newlines and tabs, no other control character
    command   shell words: 1-8,000 characters; newlines and tabs, no other control character
    path      1-4,096 characters, no control character; relative to ``cwd``. A file the
              command reads must exist and be a regular file of at most 16 MiB (never a
              FIFO, a device or a folder); a folder must exist
    list      at most 200 items, each by its own rule
    all       at most 100,000 bytes together (as JSON), the command line the child gets

Blank is never an id: an empty ``run`` is refused, never read as "the latest run". Leaving
``run`` out (where a tool allows it) is the only way to mean the latest.

``Argv`` builds a child's command line: each option one word (``--flag=value``), positionals
after ``--``. A value that broke a rule above never gets there; a value that passed cannot be
read as a flag either.
"""

# No ``from __future__ import annotations``: the SDK reads these types at run time.

import json
import os
import stat
import unicodedata
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import AfterValidator, Field

ID_MAX = 200
PACKET_MAX = 120
NAME_MAX = 100
DURATION_MAX = 64
TEXT_MAX = 4000
COMMAND_MAX = 8000
PATH_MAX = 4096
FILE_MAX = 16 * 1024 * 1024
LIST_MAX = 200
ARGV_MAX = 100_000       # bytes of one command line, all its words as JSON (one word may be
                         # 128 KiB at most on Linux; prun.cli.capture takes them as one)
SHOWN = 40               # characters of a refused value quoted back

_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


class Refused(ToolError):
    """An argument refused before anything ran: ``<argument> <value>: <what is wrong> (<how to
    fix it>)``; the server puts ``prun: <tool>: `` before it."""


def _show(value: str, limit: int = SHOWN) -> str:
    """``value`` quoted on one line (control characters escaped), past ``limit`` cut."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


# what a terminal or a line reader takes for more than text: C0 and C1 controls, DEL, line
# and paragraph separators, the marks and overrides that reorder text, lone surrogates
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                  "\u2066\u2067\u2068\u2069")


def _control(value: str, allowed: str = "") -> str | None:
    """The first control character of ``value`` not in ``allowed`` (escaped), or None."""
    for ch in value:
        if ch in allowed:
            continue
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp", "Cs") or ch in _BIDI:
            return ascii(ch)
    return None


def _word_rule(kind: str, extra: str, limit: int, rule: str, fix: str, *,
               no_dots: bool = True) -> Callable[[str], str]:
    """A validator for a word of ``kind``: letters, digits and ``extra``, the first a letter
    or digit, at most ``limit`` characters."""
    allowed = _ALNUM | frozenset(extra)

    def check(value: str) -> str:
        problem = None
        if not value.strip():
            problem = "is empty" if not value else "is blank"
        elif len(value) > limit:
            problem = f"is longer than {limit} characters"
        elif (bad := _control(value)) is not None:
            problem = f"holds a control character ({bad})"
        elif value.startswith("-"):
            problem = "starts with '-' (it would be read as a flag)"
        elif "/" in value or "\\" in value:
            problem = f"holds a path separator (a {kind} is not a path)"
        elif no_dots and ".." in value:
            problem = "holds '..'"
        elif (odd := next((c for c in value if c not in allowed), None)) is not None:
            problem = f"holds {odd!r}"
        elif value[0] not in _ALNUM:
            problem = "does not start with a letter or digit"
        if problem is not None:
            raise ValueError(f"{_show(value)} {problem}: {rule} ({fix})")
        return value

    return check


def _text_rule(limit: int, allowed: str, rule: str, fix: str, *,
               blank: bool = True) -> Callable[[str], str]:
    def check(value: str) -> str:
        problem = None
        if not blank and not value.strip():
            problem = "is empty" if not value else "is blank"
        elif len(value) > limit:
            problem = f"is {len(value):,} characters long"
        elif (bad := _control(value, allowed)) is not None:
            problem = f"holds a control character ({bad})"
        if problem is not None:
            raise ValueError(f"{_show(value)} {problem}: {rule} ({fix})")
        return value

    return check


def _receipt(value: str) -> str:
    problem = None
    if not value.strip():
        problem = "is empty" if not value else "is blank"
    elif len(value) > ID_MAX:
        problem = f"is longer than {ID_MAX} characters"
    elif (bad := _control(value)) is not None:
        problem = f"holds a control character ({bad})"
    elif any(c.isspace() for c in value):
        problem = "holds a blank"
    elif value.startswith("-"):
        problem = "starts with '-' (it would be read as a flag)"
    if problem is not None:
        raise ValueError(f"{_show(value)} {problem}: an identifier is 1-{ID_MAX} characters, "
                         "no blank or control character, not starting with '-' (give the id "
                         "the runtime returned for the subagent)")
    return value


def _schema(limit: int, pattern: str | None = None) -> Any:
    """The rule as the input schema shows it (the validator says what is wrong)."""
    extra: dict[str, Any] = {"maxLength": limit}
    if pattern:
        extra["pattern"] = pattern
    return Field(json_schema_extra=extra)


_ID_RULE = (f"an id is 1-{ID_MAX} letters, digits, '.', '_', ':' and '-', the first a letter "
            "or digit")
_PACKET_RULE = (f"a packet id is 1-{PACKET_MAX} letters, digits, '.', '_' and '-', the first "
                "a letter or digit, no '..'")
_packet = _word_rule("packet id", "._-", PACKET_MAX, _PACKET_RULE,
                     "give the packet's id as the plan or reconcile names it")


def rescoped(value: str) -> str:
    """``PACKET`` or ``PACKET=WHY``."""
    packet, eq, why = value.partition("=")
    _word_rule("packet id", "._-", PACKET_MAX, _PACKET_RULE,
               "give PACKET or PACKET=WHY")(packet)
    if eq:
        _text_rule(TEXT_MAX, "", f"WHY is at most {TEXT_MAX:,} characters on one line",
                   "shorten it")(why)
    return value


Id = Annotated[str, AfterValidator(_word_rule(
    "id", "._:-", ID_MAX, _ID_RULE, "give the id prun printed: RUN <id>, attempt=<id>")),
    _schema(ID_MAX, r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")]
PacketId = Annotated[str, AfterValidator(_packet),
                     _schema(PACKET_MAX, r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
Name = Annotated[str, AfterValidator(_word_rule(
    "name", "._:@+-", NAME_MAX, f"a name is 1-{NAME_MAX} letters, digits, '.', '_', ':', '@', "
    "'+' and '-', the first a letter or digit",
    "give the name as the tool's description lists it", no_dots=False)),
    _schema(NAME_MAX, r"^[A-Za-z0-9][A-Za-z0-9._:@+-]*$")]
Duration = Annotated[str, AfterValidator(_word_rule(
    "duration", "._:+- ", DURATION_MAX, f"a duration or time is 1-{DURATION_MAX} letters, "
    "digits, '.', ':', '+', '-' and blanks, the first a letter or digit",
    "give a duration such as 90m or 600, or an ISO time", no_dots=False)),
    _schema(DURATION_MAX, r"^[A-Za-z0-9][A-Za-z0-9.:+ -]*$")]
Receipt = Annotated[str, AfterValidator(_receipt), _schema(ID_MAX, r"^[^-\s][^\s]*$")]
Line = Annotated[str, AfterValidator(_text_rule(
    TEXT_MAX, "", f"this is at most {TEXT_MAX:,} characters on one line",
    "shorten it, on one line")), _schema(TEXT_MAX)]
Note = Annotated[str, AfterValidator(_text_rule(
    TEXT_MAX, "\n\t", f"a note is at most {TEXT_MAX:,} characters", "shorten it")),
    _schema(TEXT_MAX)]
Command = Annotated[str, AfterValidator(_text_rule(
    COMMAND_MAX, "\n\t", f"a command is 1-{COMMAND_MAX:,} characters of shell words",
    "shorten it, or put it in a script", blank=False)), _schema(COMMAND_MAX)]
PathText = Annotated[str, AfterValidator(_text_rule(
    PATH_MAX, "", f"a path is 1-{PATH_MAX:,} characters",
    "give the path of an existing file or folder", blank=False)), _schema(PATH_MAX)]
Rescoped = Annotated[str, AfterValidator(rescoped), _schema(PACKET_MAX + 1 + TEXT_MAX)]

# lists (at most LIST_MAX items, each by its rule)
PacketIds = Annotated[list[PacketId] | None, Field(max_length=LIST_MAX)]
Names = Annotated[list[Name] | None, Field(max_length=LIST_MAX)]
Paths = Annotated[list[PathText] | None, Field(max_length=LIST_MAX)]
Rescopes = Annotated[list[Rescoped] | None, Field(max_length=LIST_MAX)]


# -- paths, checked where they are: relative to the tool's folder -----------------------------

def _kinds(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _stat(arg: str, value: str, folder: str, wanted: str) -> os.stat_result:
    try:
        return os.stat(os.path.join(folder, value))
    except FileNotFoundError:
        where = "" if os.path.isabs(value) else f"relative paths start at cwd, {folder}; "
        raise Refused(f"{arg} {_shown(value)}: no such {wanted} ({where}check the "
                      "path)") from None
    except OSError as e:
        raise Refused(f"{arg} {_shown(value)}: cannot be read: {e.strerror} (check the "
                      "path and its permissions)") from None


def _shown(path: str) -> str:
    return _show(path, PATH_MAX)


def regular_file(arg: str, value: str, folder: str, *, limit: int = FILE_MAX) -> str:
    """``value`` when it names a regular file of at most ``limit`` bytes (Refused if not)."""
    st = _stat(arg, value, folder, "file")
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{arg} {_shown(value)}: is {_kinds(st.st_mode)}, not a regular "
                      "file (give the path of a file)")
    if st.st_size > limit:
        raise Refused(f"{arg} {_shown(value)}: {st.st_size:,} bytes, more than the "
                      f"{limit:,} a tool reads (make it smaller, or run the command from a "
                      "shell)")
    return value


def folder(arg: str, value: str, base: str) -> str:
    """``value`` when it names an existing folder (Refused if not)."""
    st = _stat(arg, value, base, "folder")
    if not stat.S_ISDIR(st.st_mode):
        raise Refused(f"{arg} {_shown(value)}: is {_kinds(st.st_mode)}, not a folder "
                      "(give an existing folder)")
    return value


# -- the child's argv ---------------------------------------------------------------------------

class Argv:
    """The words of one ``prun`` command: each option one word (``--flag=value``), positional
    arguments after ``--``, so nothing given as a value is ever read as a flag."""

    def __init__(self, command: str) -> None:
        self._options: list[str] = [command]
        self._positional: list[str] = []

    def flag(self, name: str, on: bool) -> "Argv":
        if on:
            self._options.append(name)
        return self

    def opt(self, name: str, value: Any) -> "Argv":
        """``name=value`` when given (a list: once per item)."""
        if value is None:
            return self
        for item in value if isinstance(value, list | tuple) else [value]:
            self._options.append(f"{name}={num(item)}")
        return self

    def pair(self, name: str, first: str, second: str) -> "Argv":
        """An option of two values (``--decide PACKET DECISION``): both already checked not to
        start with '-'."""
        for value in (first, second):
            if value.startswith("-"):
                raise Refused(f"{name} {_show(value)}: starts with '-' (it would be read as a "
                              "flag)")
        self._options += [name, first, second]
        return self

    def arg(self, value: str | None) -> "Argv":
        if value is not None:
            self._positional.append(value)
        return self

    @property
    def command(self) -> str:
        return self._options[0]

    def words(self) -> list[str]:
        words = [*self._options, "--", *self._positional] if self._positional \
            else list(self._options)
        size = len(json.dumps(words))
        if size > ARGV_MAX:
            raise Refused(f"arguments: {size:,} bytes together, more than the {ARGV_MAX:,} a "
                          "command line of this server holds (give fewer or shorter values)")
        return words


def num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
