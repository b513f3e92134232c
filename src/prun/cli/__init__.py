"""The ``prun`` command: a thin layer that parses, calls the library and prints.

Each subcommand lives in its own module under ``prun.cli`` with two functions,
``add_arguments(parser)`` and ``run(args) -> int``, and is imported only when it is the one
being run, so ``prun --help`` and the dispatcher's first line stay fast. argparse (standard
library) is used instead of click because it imports in a quarter of the time, and the
dispatcher must print its STATE-DIR line within a few interpreter start-ups.

This is the single error boundary: a ``PrunError`` becomes one stderr line
``prun: <message> (<hint>)`` and its exit code (any control character a name brought into it
escaped, ``prun._util.quoting.printable``); anything else is a bug and keeps its traceback
(exit 70).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    import argparse
    from types import ModuleType
    from typing import Any, NoReturn, TextIO

# name -> (module, one-line summary). Order is the order of `prun --help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "dispatch": ("prun.cli.dispatch", "run one unit on one executor (the seed's dispatch-task)"),
    "receipt": ("prun.cli.receipt", "attach a subagent's identifier to a session unit"),
    "packet": ("prun.cli.packet", "write a packet template (packet new ID)"),
    "check": ("prun.cli.check", "the independence test: may a plan's packets run side by side"),
    "route": ("prun.cli.route", "choose the executor of each packet, with a reason"),
    "doctor": ("prun.cli.doctor", "what this machine gives prun, with the fix for what is missing"),
    "estimate": ("prun.cli.estimate", "what a plan would spend, beside the quota pools' headroom"),
    "run": ("prun.cli.run", "run a plan: every packet through one supervisor"),
    "status": ("prun.cli.status", "show a run: counts, and the units that need attention"),
    "top": ("prun.cli.status", "the live view of a run until it ends (prun status --watch)"),
    "wait": ("prun.cli.wait", "block until a run has something to act on"),
    "cancel": ("prun.cli.cancel", "cancel a run, a packet or an attempt"),
    "reassign": ("prun.cli.reassign", "a linked successor attempt for a packet"),
    "followup": ("prun.cli.followup", "a follow-up turn: a linked attempt in the same workspace"),
    "panel": ("prun.cli.panel", "ask a cross-vendor panel one question; cross-check the answers"),
    "brief": ("prun.cli.brief", "print exactly what a unit is told"),
    "resume": ("prun.cli.resume", "re-attach to a run whose supervisor died"),
    "settle": ("prun.cli.settle", "judge a standalone unit whose dispatcher is gone"),
    "monitor": ("prun.cli.monitor", "wait for the first actionable event among running units"),
    "gather": ("prun.cli.gather", "wait until result files land, printing each as it does"),
    "reconcile": ("prun.cli.reconcile", "judge every packet of a run: accepted, rejected, review"),
    "integrate": ("prun.cli.integrate", "apply accepted changes, run the combined check, no commit"),
    "review": ("prun.cli.review", "a local page to review a run and accept or reject packets"),
    "pause": ("prun.cli.pause", "save a unit's diff as a patch and stop it"),
    "clean": ("prun.cli.clean", "remove a run's workspaces (and evidence) as retention allows"),
    "ledger": ("prun.cli.ledger", "show the ledger of runs, packets, attempts and events"),
    "quota": ("prun.cli.quota", "what each quota group has left (the seed's agent-quota)"),
    "skill": ("prun.cli.skill", "install prun's skill for Claude Code, Gemini CLI or Antigravity"),
    "mcp": ("prun.cli.mcp", "serve prun over MCP on stdio; mcp install writes a CLI's config"),
    "cluster": ("prun.cli.cluster", "start a Dask cluster on this machine for cluster runs"),
}


def _parser(name: str | None = None) -> argparse.ArgumentParser:
    import argparse

    from .. import __version__

    class Parser(argparse.ArgumentParser):
        """argparse, with a usage error as one line naming the argument (exit 2)."""

        def error(self, message: str) -> NoReturn:
            from .._util.quoting import printable

            self.exit(2, f"prun: {printable(message)} (see `{self.prog} --help`)\n")

    parser = Parser(
        prog="prun", description="prun (parallel run): fan work out to AI agent processes.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n" + "\n".join(f"  {n:<11} {s}" for n, (_, s) in COMMANDS.items())
        + "\n\nexit codes: 0 ok, 1 failed, 2 bad usage, 3 stopped, 4 a unit failed, 5 stalled,"
        "\n6 parked, 7 supervisor gone, 8 a unit succeeded, 9 handoff, 10 needs review,"
        "\n11 conflict, 70 internal error, 75 quota, 124 timeout (README, \"Exit codes\")"
        "\nrun `prun COMMAND --help` for a command's options",
    )
    parser.add_argument("--version", action="version", version=f"prun {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if name:
        module = _module(name)
        p = sub.add_parser(name, help=COMMANDS[name][1], description=module.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
    return parser


def _module(name: str) -> ModuleType:
    from importlib import import_module

    return import_module(COMMANDS[name][0])


def main(argv: list[str] | None = None) -> int:
    from ..errors import ExitCode, PrunError

    argv = sys.argv[1:] if argv is None else list(argv)
    _survive_a_closed_stdout()
    name = next((a for a in argv if not a.startswith("-")), None)
    if name is not None and name not in COMMANDS:
        from .._util.quoting import quote

        print(f"prun: unknown command {quote(name[:100])} (run `prun --help` for the list)",
              file=sys.stderr)
        return ExitCode.USAGE
    parser = _parser(name)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: --help (0) or a usage error (2)
        return int(e.code or 0)
    if not name:
        parser.print_help()
        return 0
    try:
        from ..settings import current

        if name in ("run", "dispatch"):   # inside a unit that may not start agents: that first
            from ..attempt.subdispatch import refusal

            if (refused := refusal()) is not None:
                raise refused
        current()  # every setting checked before any command makes anything (exit 2)
        return int(_module(name).run(args) or 0)
    except PrunError as e:
        from .._util.quoting import printable

        print(f"prun: {printable(e.line())}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("prun: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception:
        import traceback

        traceback.print_exc()
        print("prun: internal error (a bug): please report the traceback above", file=sys.stderr)
        return ExitCode.INTERNAL


class _Stdout:
    """stdout that a closed pipe cannot break: once the reader is gone (``prun run | head``),
    what would have been printed is dropped, and the command goes on as it would have, with
    the same exit code."""

    def __init__(self, real: TextIO):
        self._real, self.gone = real, False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._real.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._real.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        import os

        self.gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)  # the interpreter's last flush, too
        os.dup2(devnull, self._real.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _survive_a_closed_stdout() -> None:
    if not isinstance(sys.stdout, _Stdout):
        sys.stdout = _Stdout(sys.stdout)  # a TextIO in all it does


def entry() -> None:
    sys.exit(main())


def agent_quota_main() -> None:
    """The ``agent-quota`` command: ``prun quota`` under the seed's name."""
    sys.exit(main(["quota", *sys.argv[1:]]))
