"""prun's PreToolUse hook for Claude Code: a worker never commits, pushes or runs destructive git.

Claude Code runs this script before each Bash tool call, with the call as JSON on stdin
(``{"tool_name": "Bash", "tool_input": {"command": "..."}, ...}``). For a refused command it
prints a ``permissionDecision: "deny"`` answer whose reason starts with ``prun guard:``; Claude
Code then hands that reason to the model as the tool's error result, so the refusal shows in
the unit's stream (its ``tail``). It also appends one line to ``$PRUN_STATE_DIR/guard.log``
when that variable is set. Anything it cannot parse is allowed: the guard catches accidents, and
the throwaway clone with no remote stays the structural protection.

Refused: ``git commit``, ``push``, ``merge``, ``rebase``, ``cherry-pick``, ``revert``, ``am``,
``update-ref``, ``filter-branch``, ``reset --hard``, ``clean`` (except ``-n``/``--dry-run``),
``branch`` and ``tag`` changes (listing is allowed), ``checkout -b/-B/--orphan``,
``switch -c/-C/--orphan``. Also inside ``sh -c``/``bash -c`` strings and after ``&&``, ``;``,
``|``, ``$(...)``.

Standard library only: it runs under whatever interpreter prun was started with.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys

ALWAYS = {"commit", "push", "merge", "rebase", "cherry-pick", "revert", "am", "update-ref",
          "filter-branch", "filter-repo"}
BRANCH_READ = {"-a", "--all", "-r", "--remotes", "-l", "--list", "-v", "-vv", "--verbose",
               "--show-current", "--contains", "--no-contains", "--merged", "--no-merged",
               "--points-at", "--sort", "--format"}
BRANCH_CHANGE = {"-d", "-D", "--delete", "-m", "-M", "--move", "-c", "-C", "--copy", "-f",
                 "--force", "-u", "--set-upstream-to", "--unset-upstream", "--edit-description",
                 "--track", "--no-track"}
TAG_READ = {"-l", "--list", "-n", "--contains", "--no-contains", "--merged", "--no-merged",
            "--points-at", "--sort", "--format", "-v", "--verify"}
TAG_CHANGE = {"-d", "--delete", "-a", "--annotate", "-s", "--sign", "-u", "--local-user",
              "-f", "--force", "-m", "--message", "-F", "--file"}
GIT_OPTS_WITH_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                       "--exec-path", "--super-prefix"}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}
WRAPPER_OPTS_WITH_VALUE = {"-u", "--user", "-g", "--group", "-n", "-s", "--signal", "-k"}
WRAPPERS = {"command", "exec", "env", "sudo", "nice", "nohup", "time", "xargs", "timeout"}
_PUNCT = ";&|()`"
_SPLIT = re.compile(r"\|\||&&|[;|&\n()`]|\$\(")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_NUMBER = re.compile(r"^\d+(?:\.\d+)?[smhd]?$")


def refusal(command: str, depth: int = 0) -> str | None:
    """Why ``command`` is refused, or None when it is allowed."""
    if depth > 3:
        return None
    for words in _segments(command):
        why = _segment_refusal(words, depth)
        if why:
            return why
    return None


def _segments(command: str) -> list[list[str]]:
    """Simple commands of a shell line, split at ; & | ( ) ` and $( outside quotes."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=_PUNCT)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:  # unbalanced quotes: split crudely rather than give up
        return [segment.split() for segment in _SPLIT.split(command)]
    segments: list[list[str]] = [[]]
    for word in words:
        if word == "$" or (word and all(c in _PUNCT for c in word)):
            segments.append([])
        else:
            segments[-1].append(word)
    return segments


def _segment_refusal(words: list[str], depth: int) -> str | None:
    i = 0
    while i < len(words):  # skip VAR=value prefixes and wrappers (env -i, sudo -u x, timeout 5)
        if _ASSIGN.match(words[i]):
            i += 1
        elif os.path.basename(words[i]) in WRAPPERS:
            i += 1
            while i < len(words) and os.path.basename(words[i]) != "git" and (
                    words[i].startswith("-") or _NUMBER.match(words[i])
                    or _ASSIGN.match(words[i]) or words[i - 1] in WRAPPER_OPTS_WITH_VALUE):
                i += 1
        else:
            break
    if i >= len(words):
        return None
    prog = os.path.basename(words[i])
    if prog in SHELLS and "-c" in words[i + 1:]:
        j = words.index("-c", i + 1)
        return refusal(words[j + 1], depth + 1) if j + 1 < len(words) else None
    if prog != "git":
        return None
    rest = words[i + 1:]
    while rest and rest[0].startswith("-"):  # git's own options: -C dir, -c k=v, --no-pager
        opt = rest.pop(0)
        if opt in GIT_OPTS_WITH_VALUE and rest:
            rest.pop(0)
    if not rest:
        return None
    sub, args = rest[0], rest[1:]
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-")}
    shown = " ".join([sub, *args])
    if sub in ALWAYS:
        return f"git {sub}"
    if sub == "reset" and "--hard" in flags:
        return "git reset --hard"
    if sub == "clean" and not (flags & {"-n", "--dry-run"}
                               or any(not f.startswith("--") and "n" in f for f in flags)):
        return "git clean"
    if sub == "branch" and (flags & BRANCH_CHANGE or (args and not flags & BRANCH_READ)):
        return f"git {shown}"
    if sub == "tag" and (flags & TAG_CHANGE or (args and not flags & TAG_READ)):
        return f"git {shown}"
    if sub == "checkout" and flags & {"-b", "-B", "--orphan"}:
        return f"git {shown}"
    if sub == "switch" and flags & {"-c", "-C", "--create", "--force-create", "--orphan"}:
        return f"git {shown}"
    return None


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
              "destructive git (commit, push, branch/tag changes, reset --hard, clean). Leave "
              "your changes in the working tree; the coordinator reviews the diff and commits.")
    state_dir = os.environ.get("PRUN_STATE_DIR")
    if state_dir and os.path.isdir(state_dir):
        try:
            with open(os.path.join(state_dir, "guard.log"), "a", encoding="utf-8") as f:
                f.write(json.dumps({"refused": why, "command": command}) + "\n")
        except OSError:
            pass
    json.dump({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                      "permissionDecision": "deny",
                                      "permissionDecisionReason": reason}}, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
