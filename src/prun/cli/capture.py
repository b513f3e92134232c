"""Run one prun command in this process and hand back both of its outputs: its ``--json``
and its terse lines, with its exit code and stderr. The MCP server starts this as a child
(``python -m prun.cli.capture REQUEST``), so a tool returns exactly what the command prints.

REQUEST is JSON: ``{"argv": [COMMAND, ...], "lines": true|false}``. The command runs once with
``--json`` through ``prun.cli.main``, the CLI's own error boundary. Its lines come

- for a command that only reads (status, check, quota, ledger, brief): from a second run in
  the same process, without ``--json`` (and without ``--refresh``);
- for reconcile and integrate, which record what they did and change the tree: from the same
  run, read from the report object the command turned into JSON (``lines()`` beside
  ``as_dict()``), so nothing is done twice;
- for review: none (without ``--json`` it serves its page): ``lines`` is null.

stdout: one JSON object ``{"exit_code", "json", "lines", "stderr"}``; ``lines`` is null when
they could not be had.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

# commands whose one run is read back for its lines (they must not run twice)
ONCE = ("reconcile", "integrate")
# commands with no lines to read back: without --json, `prun review` serves its page
NO_LINES = ("review",)


def _run(argv: list[str]) -> tuple[int, str, str]:
    from . import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _lines_of_report(command: str) -> Iterator[list[list[str]]]:
    """While active, every report of ``command`` turned into JSON also leaves its lines."""
    seen: list[list[str]] = []
    classes: list[Any] = []
    if command == "reconcile":
        from ..git.reconcile import Report
        classes.append(Report)
    elif command == "integrate":
        from ..git.integrate import Integration
        classes.append(Integration)
    saved: list[tuple[Any, Callable[..., Any]]] = []
    for cls in classes:
        original = cls.as_dict

        def as_dict(self: Any, *a: Any, _original: Callable[..., Any] = original,
                    **k: Any) -> Any:
            seen.append(list(self.lines()))
            return _original(self, *a, **k)

        saved.append((cls, original))
        cls.as_dict = as_dict
    try:
        yield seen
    finally:
        for cls, original in saved:
            cls.as_dict = original


def _with(argv: list[str], flag: str) -> list[str]:
    """``argv`` with ``flag`` among its options: before a ``--``, after which every word is a
    positional argument."""
    cut = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:cut], flag, *argv[cut:]]


def capture(argv: list[str], *, lines: bool = True) -> dict[str, Any]:
    """Run ``argv`` (a command and its arguments, without ``--json``) as described above."""
    command = argv[0] if argv else ""
    lines = lines and command not in NO_LINES
    if command in ONCE:
        with _lines_of_report(command) as seen:
            code, out, err = _run(_with(argv, "--json"))
        found = seen[-1] if seen and lines else None
        return {"exit_code": code, "json": out, "lines": found, "stderr": err}
    code, out, err = _run(_with(argv, "--json"))
    got: list[str] | None = None
    if lines and out.strip():
        cut = argv.index("--") if "--" in argv else len(argv)
        again = [a for a in argv[:cut] if a != "--refresh"] + argv[cut:]
        code2, out2, _ = _run(again)
        if code2 == code:
            got = out2.splitlines()
    return {"exit_code": code, "json": out, "lines": got, "stderr": err}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        request = json.loads(args[0])
        command = [str(a) for a in request["argv"]]
        want_lines = bool(request.get("lines", True))
    except (IndexError, ValueError, KeyError, TypeError):
        print("prun: capture takes one JSON request (see prun.cli.capture)", file=sys.stderr)
        return 2
    envelope = capture(command, lines=want_lines)
    sys.stdout.write(json.dumps(envelope) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
