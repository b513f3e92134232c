"""Arguments shared by several commands (not a command itself), and the one rule per kind of
argument: every id, name, path, count and number a command takes is checked here, as an
argparse ``type``, before the command does anything. A refused value is one line
(``prun: argument X: <what is wrong>: <how to fix> (see `prun CMD --help`)``), exit 2.

    ids and names    (RUN, PACKET, ATTEMPT, --executor, --group, --as, ...): not empty, not
                     blank, no control character, not starting with ``-``, at most NAME_MAX
                     characters. An empty RUN is never "the latest run".
    paths            not empty, not blank, at most PATH_MAX bytes (NAME_PART_MAX per part)
    counts           whole numbers in a documented range (``int_in(lo, hi)``)
    seconds          (--wait) a finite number from 0 to WAIT_MAX_S
    durations        (--timeout, --deadline, ...) ``prun._util.timeparse.parse_duration``'s
                     rule: not negative, finite, at most 3650d (ten years)
"""

from __future__ import annotations

import argparse
import math

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

NAME_MAX = 256          # characters in an id or a name given on the command line
PATH_MAX = 4096         # bytes in a path given on the command line (Linux's PATH_MAX)
NAME_PART_MAX = 255     # bytes in one part of such a path (Linux's NAME_MAX)
WAIT_MAX_S = 86400.0    # --wait: at most a day
PARALLEL_MAX = 1000     # --parallel, a plan's parallel (plan.schema.json says it too)
PORT_MAX = 65535
CURSOR_MAX = 2**63 - 1  # wait --since: SQLite's largest integer


class ExecutorName(argparse.Action):
    """``--executor NAME``: a refused executor (codex) stops the parse at once with one line,
    whatever other flags are given or missing."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        from ..errors import ExitCode
        from ..executors import refusal

        if isinstance(values, str):  # one word: the action takes no nargs
            try:
                name("executor")(values)
            except argparse.ArgumentTypeError as e:
                raise argparse.ArgumentError(self, str(e)) from None
            refused = refusal(values)
            if refused:
                parser.exit(ExitCode.USAGE, f"prun: {refused.line()}\n")
        setattr(namespace, self.dest, values)


def duration_option(option: str | None, what: str, default: float) -> float:
    """An option's duration, else ``default`` (the setting's, seconds)."""
    from .._util.timeparse import parse_duration

    return default if option is None else parse_duration(option, what=what)


def name(what: str, hint: str = "") -> Callable[[str], str]:
    """An argparse ``type`` for an id or a name (``what``: "run id", "packet id", ...): the
    value, once it is not empty, not blank, holds no control character, does not start with
    ``-`` and has at most NAME_MAX characters. ``hint``: where the good ones are listed."""

    def check(text: str) -> str:
        why = _bad_name(text)
        if why:
            article = "an" if what[:1] in tuple("aeiou") else "a"
            fix = f"give {article} {what}" + (f"; {hint}" if hint else "")
            raise argparse.ArgumentTypeError(f"{why}: {fix}")
        return text

    check.__name__ = what  # argparse names the type in its own messages
    return check


def _bad_name(text: str) -> str | None:
    from .._util.quoting import quote

    if not text.strip():
        return "empty" if not text else "blank"
    if len(text) > NAME_MAX:
        return f"{len(text)} characters (at most {NAME_MAX})"
    if not text.isprintable():
        return f"{quote(text)} holds a control character"
    if text.startswith("-"):
        return f"{quote(text)} starts with '-'"
    return None


def path(text: str) -> str:
    """An argparse ``type`` for a path: not empty, not blank, at most PATH_MAX bytes and
    NAME_PART_MAX bytes a part."""
    import os

    if not text.strip():
        raise argparse.ArgumentTypeError(("empty" if not text else "blank")
                                         + " path: give a file or folder")
    raw = os.fsencode(text)
    if len(raw) > PATH_MAX or any(len(part) > NAME_PART_MAX for part in raw.split(b"/")):
        raise argparse.ArgumentTypeError(f"path of {len(raw)} bytes is too long (at most "
                                         f"{PATH_MAX}, {NAME_PART_MAX} a part)")
    return text


def int_in(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``lo`` to ``hi``."""

    def check(text: str) -> int:
        try:
            value = int(text.strip()) if len(text) <= 30 else None
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            shown = text if len(text) <= 30 else text[:30] + "..."
            raise argparse.ArgumentTypeError(f"{shown!r} is not a whole number from {lo} to "
                                             f"{hi}" + (f" ({what})" if what else ""))
        return value

    check.__name__ = "whole number"
    return check


positive_int = int_in(1, PARALLEL_MAX, "units at once")   # --parallel, -j
token_count = int_in(1, 10**15, "tokens")                  # --budget-tokens


def usd(text: str) -> float:
    """An argparse ``type``: an amount of US dollars above zero (--budget-usd)."""
    try:
        value = float(text.strip()) if len(text) <= 30 else None
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or value <= 0:
        shown = text if len(text) <= 30 else text[:30] + "..."
        raise argparse.ArgumentTypeError(f"{shown!r} is not an amount of US dollars above 0 "
                                         "(such as 2.50)")
    return value


def port(text: str) -> int:
    """An argparse ``type`` for a port to listen on: 0 (a free one) to PORT_MAX."""
    try:
        return int_in(0, PORT_MAX)(text)
    except argparse.ArgumentTypeError:
        shown = text if len(text) <= 30 else text[:30] + "..."
        raise argparse.ArgumentTypeError(f"{shown!r} is not a port: give 0 (a free one) or "
                                         f"a port from 1 to {PORT_MAX}") from None


def duration(text: str) -> str:
    """An argparse ``type`` for a duration flag (``--timeout``, ``--stall-threshold``, ...):
    the text as given, once ``parse_duration`` reads it (see ``prun._util.timeparse``)."""
    from .._util.timeparse import parse_duration
    from ..errors import UsageError

    try:
        parse_duration(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(f"{e.message}: {e.hint}" if e.hint else e.message)
    return text


def when(text: str) -> str:
    """An argparse ``type`` for ``--deadline``: a duration or an ISO time (checked where the
    run is made), not empty, not blank, no control character."""
    return name("duration (90m) or ISO time")(text)


def seconds(text: str) -> float:
    """An argparse ``type`` for ``--wait``: a finite number of seconds from 0 to WAIT_MAX_S."""
    import math

    try:
        value = float(text) if len(text) <= 30 else math.nan
    except ValueError:
        value = math.nan
    if not 0 <= value <= WAIT_MAX_S:   # also refuses nan
        shown = text if len(text) <= 30 else text[:30] + "..."
        raise argparse.ArgumentTypeError(f"{shown!r} is not a number of seconds from 0 to "
                                         f"{WAIT_MAX_S:.0f}")
    return value


def run_id(text: str) -> str:
    """An argparse ``type`` for a RUN: a run id or a unique prefix (see ``name``)."""
    return name("run id", "`prun ledger` lists them")(text)


def packet_id(text: str) -> str:
    """An argparse ``type`` for a PACKET (see ``name``)."""
    return name("packet id", "`prun status RUN --all` lists them")(text)


def attempt_id(text: str) -> str:
    """An argparse ``type`` for an ATTEMPT, ``RUN:PACKET:N`` (see ``name``)."""
    return name("attempt id", "`prun ledger RUN` lists them")(text)


def target(text: str) -> str:
    """An argparse ``type`` for cancel's target: a run or attempt id, or a state dir (a
    path): not empty, not blank, no control character, not starting with ``-``."""
    if len(text) > NAME_MAX:
        return path(text) if text.isprintable() else name("run id")(text)
    return name("run id, attempt id or state dir")(text)
