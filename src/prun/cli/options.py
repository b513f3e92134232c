"""Arguments shared by several commands (not a command itself)."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class ExecutorName(argparse.Action):
    """``--executor NAME``: a refused executor (codex) stops the parse at once with one line,
    whatever other flags are given or missing."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        from ..errors import ExitCode
        from ..executors import refusal

        if isinstance(values, str):  # one word: the action takes no nargs
            refused = refusal(values)
            if refused:
                parser.exit(ExitCode.USAGE, f"prun: {refused.line()}\n")
        setattr(namespace, self.dest, values)


def duration_option(option: str | None, what: str, default: float) -> float:
    """An option's duration, else ``default`` (the setting's, seconds)."""
    from .._util.timeparse import parse_duration

    return default if option is None else parse_duration(option, what=what)


def positive_int(text: str) -> int:
    """An argparse ``type``: a whole number of 1 or more (``--parallel``)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return value
