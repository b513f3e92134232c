"""Arguments shared by several commands (not a command itself)."""

from __future__ import annotations

import argparse


class ExecutorName(argparse.Action):
    """``--executor NAME``: a refused executor (codex) stops the parse at once with one line,
    whatever other flags are given or missing."""

    def __call__(self, parser, namespace, value, option_string=None):
        from ..errors import ExitCode
        from ..executors import refusal

        refused = refusal(value)
        if refused:
            parser.exit(ExitCode.USAGE, f"prun: {refused.line()}\n")
        setattr(namespace, self.dest, value)


def duration_option(option: str | None, what: str, default: float) -> float:
    """An option's duration, else ``default`` (the setting's, seconds)."""
    from .._util.timeparse import parse_duration

    return default if option is None else parse_duration(option, what=what)
