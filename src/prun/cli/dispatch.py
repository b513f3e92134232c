"""Run one unit on one executor and publish its result atomically.

stdout carries exactly one line, `STATE-DIR <absolute path>`, as soon as the state dir exists.
Everything else goes to stderr or into the state dir.

exit codes: 0 succeeded; 1 failed (a FALLBACK or kept worker result was published);
2 refused before any state dir was made; 75 the quota gate refused; 124 timeout.
"""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    p.add_argument("--executor", default="agy",
                   help="agy (default), command, or another installed executor")
    p.add_argument("--prompt-file", required=True, help="the unit's prompt")
    p.add_argument("--result-file", required=True, help="a fresh path for the unit's result")
    p.add_argument("--unit-id", required=True, help="letters, digits, '.', '_', '-'")
    p.add_argument("--mode", choices=["accept-edits", "plan"],
                   help="required with a caller-supplied workspace (PRUN_SCRATCH_CWD, --add-dir)")
    p.add_argument("--add-dir", action="append", default=[], metavar="DIR",
                   help="an extra directory the unit may use (repeatable; needs --mode)")
    p.add_argument("--continue-from", metavar="STATE_DIR",
                   help="resume the conversation recorded in STATE_DIR/conversation-id")
    p.add_argument("--command", help="the command executor's program, as shell words; "
                   "{prompt_file} is replaced by the prompt's path, else the prompt is on stdin")
    p.add_argument("--model", help="the model (agy: else $ANTIGRAVITY_DISPATCH_MODEL)")
    p.add_argument("--effort", help="the effort (agy Gemini models only)")
    p.add_argument("--timeout", help="seconds or a duration such as 45m "
                   "(agy: else $ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS, default 2700)")


def run(args) -> int:
    from ..dispatch import Request, run_sync
    from ..timeparse import parse_duration

    timeout = parse_duration(args.timeout, what="--timeout") if args.timeout else None
    req = Request(executor=args.executor, prompt_file=args.prompt_file,
                  result_file=args.result_file, unit_id=args.unit_id, mode=args.mode,
                  add_dirs=args.add_dir, continue_from=args.continue_from, command=args.command,
                  model=args.model, effort=args.effort, timeout_s=timeout)

    def announce(path: str) -> None:
        sys.stdout.write(f"STATE-DIR {path}\n")
        sys.stdout.flush()

    outcome = run_sync(req, on_state_dir=announce)
    if outcome.exit_code != 0:
        what = f"unit {req.unit_id} {outcome.outcome} ({outcome.reason})"
        detail = (outcome.error or "").strip().splitlines()
        print(f"prun: {what}: {detail[0] if detail else 'see the state dir'}", file=sys.stderr)
    return outcome.exit_code
