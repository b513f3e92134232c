"""prun's PreToolUse hook for Claude Code: a worker never commits, pushes or runs destructive git.

Claude Code runs this script before each Bash tool call, with the call as JSON on stdin
(``{"tool_name": "Bash", "tool_input": {"command": "..."}, ...}``). For a refused command it
prints a ``permissionDecision: "deny"`` answer whose reason starts with ``prun guard:``; Claude
Code then hands that reason to the model as the tool's error result, so the refusal shows in
the unit's stream (its ``tail``). It also appends one line to ``$PRUN_STATE_DIR/guard.log``
when that variable is set. Anything it cannot parse is allowed: the guard catches accidents, and
the throwaway clone with no remote stays the structural protection.

What is refused is ``git_policy``'s rule set, shared with the git wrapper on every worker's PATH.

Standard library only: it runs under whatever interpreter prun was started with.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the type checker sees the package's module
    from . import git_policy
else:
    try:
        from . import git_policy
    except ImportError:  # run by path, as Claude Code does: the sibling module is on sys.path
        import git_policy

refusal = git_policy.refusal


def main() -> int:
    try:
        event = json.load(sys.stdin)
    except ValueError:
        return 0
    if not isinstance(event, dict) or event.get("tool_name") != "Bash":
        return 0
    command = (event.get("tool_input") or {}).get("command")
    if not isinstance(command, str):
        return 0
    why = refusal(command)
    if not why:
        return 0
    reason = (f"prun guard: refused `{why}`: a prun worker never commits, pushes, or runs "
              "destructive git (commit, push, branch/tag changes, reset --hard, clean, checkout "
              "or restore over your edits). Leave your changes in the working tree; the coordinator "
              "reviews the diff and commits.")
    git_policy.log_refusal(why, command)
    json.dump({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                      "permissionDecision": "deny",
                                      "permissionDecisionReason": reason}}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
