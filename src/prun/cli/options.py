"""Arguments shared by several commands (not a command itself)."""

from __future__ import annotations

import argparse


class ExecutorName(argparse.Action):
    """``--executor NAME``: a refused executor (codex) stops the parse at once with one line,
    whatever other flags are given or missing."""

    def __call__(self, parser, namespace, value, option_string=None):
        from ..errors import EXIT_USAGE
        from ..executors import refusal

        refused = refusal(value)
        if refused:
            parser.exit(EXIT_USAGE, f"prun: {refused.line()}\n")
        setattr(namespace, self.dest, value)
