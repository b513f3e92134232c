"""Run one unit on one executor and publish its result atomically.

stdout carries exactly one line, `STATE-DIR <absolute path>`, as soon as the state dir exists.
Everything else goes to stderr or into the state dir. With `--executor session` nothing is
launched: the state dir, workspace and hand-off file are made, and after the STATE-DIR line come
the lines the coordinator hands its own subagent (HANDOFF, PROMPT-FILE, HANDOFF-FILE,
RESULT-FILE, WORKSPACE, ADD-DIR..., RECEIPT-CMD; see docs/executors.md), then prun exits 0.

exit codes: 0 succeeded; 1 failed (a FALLBACK or kept worker result was published);
2 refused before any state dir was made; 75 the quota gate refused; 124 timeout.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    from . import options
    from .options import ExecutorName

    p.add_argument("--executor", default="agy", action=ExecutorName,
                   help="agy (default), claude, gemini, session, command, or an installed "
                   "plug-in (codex is refused)")
    p.add_argument("--prompt-file", required=True, type=options.path, help="the unit's prompt")
    p.add_argument("--result-file", required=True, type=options.path,
                   help="a fresh path for the unit's result")
    p.add_argument("--unit-id", required=True, help="letters, digits, '.', '_', '-'")
    p.add_argument("--mode", choices=["accept-edits", "plan"],
                   help="required with a caller-supplied workspace (PRUN_SCRATCH_CWD, --add-dir)")
    p.add_argument("--add-dir", action="append", default=[], metavar="DIR", type=options.path,
                   help="an extra directory the unit may use (repeatable; needs --mode)")
    p.add_argument("--continue-from", metavar="STATE_DIR", type=options.path,
                   help="resume the conversation recorded in STATE_DIR/conversation-id")
    p.add_argument("--command", help="the command executor's program, as shell words; "
                   "{prompt_file} is replaced by the prompt's path, else the prompt is on stdin")
    p.add_argument("--model", type=options.name("model"),
                   help="the model (agy: else $ANTIGRAVITY_DISPATCH_MODEL; claude: "
                   "else $PRUN_CLAUDE_MODEL or sonnet; gemini: else $PRUN_GEMINI_MODEL)")
    p.add_argument("--effort", type=options.name("effort"), help="the effort (agy Gemini models; claude)")
    p.add_argument("--route-reason", help="why this executor was chosen (kept in unit.json)")
    p.add_argument("--sandbox", choices=["auto", "on", "off"],
                   help="run the unit in a bubblewrap sandbox: auto (default, where one can be "
                   "made; else $PRUN_SANDBOX), on (refuse without one), off")
    p.add_argument("--timeout", type=options.duration, help="seconds or a duration such as 45m "
                   "(agy: else $ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS, default 2700)")


def run(args: argparse.Namespace) -> int:
    from .._util.quoting import printable, rest_of_line
    from .._util.timeparse import parse_duration
    from ..attempt.dispatch import Request, run_sync

    timeout = parse_duration(args.timeout, what="--timeout") if args.timeout else None
    req = Request(executor=args.executor, prompt_file=args.prompt_file,
                  result_file=args.result_file, unit_id=args.unit_id, mode=args.mode,
                  add_dirs=args.add_dir, continue_from=args.continue_from, command=args.command,
                  model=args.model, effort=args.effort, timeout_s=timeout,
                  route_reason=args.route_reason, sandbox=args.sandbox)

    def announce(path: str) -> None:
        sys.stdout.write(f"STATE-DIR {rest_of_line(path)}\n")
        sys.stdout.flush()

    outcome = run_sync(req, on_state_dir=announce)
    for line in outcome.lines:  # a session unit's hand-off
        sys.stdout.write(line + "\n")
    if outcome.exit_code != 0:
        what = f"unit {req.unit_id} {outcome.kind} ({outcome.reason})"
        detail = (outcome.error or "").strip().splitlines()
        print(printable(f"prun: {what}: {detail[0] if detail else 'see the state dir'}"),
              file=sys.stderr)
    return outcome.exit_code
