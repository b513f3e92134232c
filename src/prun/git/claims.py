"""A result's claims checked against what the worker did: the commands its ``Verification``
section says were run, against the shell commands its executor's stream shows
(``Executor.tool_calls``), and the files its ``Changes`` (or ``Files changed``) section says
changed, against its diff. Deterministic, by the rules below (docs/reconcile.md quotes them
with examples); no model judges anything.

Claimed commands: under each heading that names ``Verification`` (as a required section is
named: "Verification (commands run)" counts), every inline code span, and every command line of
a fenced code block. In a block where some line starts with ``$ ``, only those lines are
commands (the prompt dropped; the other lines are output); in any other block, every line that
is not blank and does not start with ``#``. A line ending with ``\\`` goes on on the next.
A claim is kept with its runs of whitespace made one space.

Matching: a command is cut into words: runs of characters other than whitespace and the shell's
control operators ``&& || ; | & ( )``, each of which is a word of its own (quotes are not read:
``'a b'`` is two words). A claim matches a run command when its words appear in the run
command's words, consecutively and in order: ``pytest -q`` matches ``cd w && pytest -q tests``,
not ``pytest -x -q``.

Claimed paths: under each heading that names ``Changes``, ``Files changed`` or ``Changed
files``, every inline code span with no whitespace and no parenthesis that holds a ``/`` or a
``.`` (``src/a.py``, ``README.md``; not ``foo()`` nor ``make``), a leading ``./`` or the clone's
own path dropped. A claimed path is changed when the diff touches it (either side of a rename)
or touches a path below it (a folder).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..executors.records import ToolCalls
from .sections import _names, sections
from .verdict import Reason

VERIFICATION = "verification"
CHANGES = ("changes", "files changed", "changed files")
CLAIMS_READ = 1 << 20     # bytes of a result read for its claims (its beginning)
REASONS = ("unverified-claim", "no-tool-calls", "claimed-not-changed")   # what ``reasons`` gives

_SPAN = re.compile(r"(`+)(.+?)\1")
_WORD = re.compile(r"&&|\|\||[;|&()]|[^\s;|&()]+")
_FENCE = ("```", "~~~")


@dataclass(frozen=True)
class CommandClaim:
    command: str
    matched: str | None       # the first run command it matches, None: no run matches it

    def as_dict(self) -> dict[str, Any]:
        return {"claim": self.command, "matched": self.matched is not None, "run": self.matched}


@dataclass(frozen=True)
class PathClaim:
    path: str
    changed: bool

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "changed": self.changed}


@dataclass(frozen=True)
class Claims:
    """A result's claims, each with whether what the worker did bears it out."""

    tool_calls: int
    commands_recorded: bool           # the stream records the shell commands run
    commands: tuple[CommandClaim, ...] = ()
    paths: tuple[PathClaim, ...] = ()

    def reasons(self) -> list[Reason]:
        """``no-tool-calls`` when commands are claimed and the stream shows no tool call at all
        (instead of one ``unverified-claim`` per command), else one ``unverified-claim`` per
        claim no run matches (where the stream records commands); one ``claimed-not-changed``
        per claimed path the diff does not touch."""
        found: list[Reason] = []
        if self.commands and not self.tool_calls:
            found.append(Reason("no-tool-calls"))
        elif self.commands_recorded:
            found += [Reason("unverified-claim", {"claim": c.command})
                      for c in self.commands if c.matched is None]
        found += [Reason("claimed-not-changed", {"path": p.path})
                  for p in self.paths if not p.changed]
        return found

    def as_dict(self) -> dict[str, Any]:
        return {"tool_calls": self.tool_calls, "commands_recorded": self.commands_recorded,
                "commands": [c.as_dict() for c in self.commands],
                "paths": [p.as_dict() for p in self.paths]}


def words(command: str) -> tuple[str, ...]:
    """A command's words, as the matching rule cuts them."""
    return tuple(_WORD.findall(command))


def matches(claim: str, run: str) -> bool:
    """The claim's words appear in the run command's words, consecutively and in order."""
    want, have = words(claim), words(run)
    if not want:
        return False
    return any(have[i:i + len(want)] == want for i in range(len(have) - len(want) + 1))


def _under(text: str, names: Sequence[str]) -> list[str]:
    """The text under every heading that names one of ``names``."""
    return [body for key, body in sections(text).items()
            if any(_names(key, name) for name in names)]


def _spans(line: str) -> list[str]:
    return [m.group(2).strip() for m in _SPAN.finditer(line)]


def _block_commands(block: list[str]) -> list[str]:
    """The command lines of one fenced block (the module's rule), continuations joined."""
    lines: list[str] = []
    for line in block:
        if lines and lines[-1].endswith("\\"):
            lines[-1] = lines[-1][:-1] + " " + line.strip()
        else:
            lines.append(line.strip())
    prompted = [line[2:] for line in lines if line.startswith("$ ")]
    if prompted:
        return prompted
    return [line for line in lines if line and not line.startswith("#")]


def claimed_commands(text: str) -> list[str]:
    """The commands a result claims under ``Verification``, in order, each once."""
    found: list[str] = []
    for body in _under(text, (VERIFICATION,)):
        block: list[str] | None = None
        for line in body.splitlines():
            if line.lstrip().startswith(_FENCE):
                if block is not None:
                    found += _block_commands(block)
                block = None if block is not None else []
            elif block is not None:
                block.append(line)
            else:
                found += _spans(line)
        if block:
            found += _block_commands(block)
    return _unique(" ".join(c.split()) for c in found if words(c))


def claimed_paths(text: str, clone: str | None = None) -> list[str]:
    """The paths a result says changed, under ``Changes`` (or ``Files changed``, ``Changed
    files``), in order, each once."""
    found: list[str] = []
    for body in _under(text, CHANGES):
        for span in (s for line in body.splitlines() for s in _spans(line)):
            if re.search(r"[\s()]", span) or not re.search(r"[/.]", span):
                continue
            if clone and span.startswith(clone.rstrip("/") + "/"):
                span = span[len(clone.rstrip("/")) + 1:]
            while span.startswith("./"):
                span = span[2:]
            if span.strip("/"):
                found.append(span.rstrip("/"))
    return _unique(found)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def check(text: str, calls: ToolCalls, changed: Sequence[str] | None,
          clone: str | None = None) -> Claims:
    """The result ``text``'s claims against the stream's ``calls`` and, for a code unit, the
    paths its diff ``changed`` (None: not a code unit, or its change was not read)."""
    runs = calls.commands or ()
    commands = tuple(CommandClaim(c, next((r for r in runs if matches(c, r)), None))
                     for c in claimed_commands(text))
    paths: tuple[PathClaim, ...] = ()
    if changed is not None:
        paths = tuple(PathClaim(p, any(q == p or q.startswith(p + "/") for q in changed))
                      for p in claimed_paths(text, clone))
    return Claims(calls.count, calls.commands is not None, commands, paths)
