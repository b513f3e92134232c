"""What a prun worker may not do with git: one rule set, read by the git wrapper on a worker's
PATH (an argv, ``refusal_argv``) and by Claude Code's guard (a shell line, ``refusal``).

Refused: ``commit``, ``push``, ``pull``, ``merge``, ``rebase``, ``cherry-pick``, ``revert``,
``am``, ``update-ref``, ``filter-branch``, ``filter-repo``, ``send-pack``, ``http-push``,
``fast-import``; ``reset --hard``; ``clean`` (except ``-n``/``--dry-run``); ``branch`` and
``tag`` changes (listing is allowed); ``checkout -b/-B/--orphan``, ``switch -c/-C/--orphan``;
the tree restored over the worker's edits: ``checkout`` with paths (``checkout -- <paths>``,
``checkout .``, ``checkout <commit> <paths>``, a single argument that names an existing path or
is a glob), ``checkout -f/-p``, ``switch -f/--discard-changes``, ``restore`` (``--staged`` alone,
which only touches the index, is allowed); ``stash drop``, ``stash clear``. The same with git's
own options before the subcommand (``-c core.hooksPath=/dev/null``, ``-C dir``,
``--git-dir=...``) and through an alias given with ``-c alias.NAME=...`` (the wrapper also
resolves configured aliases). ``git <subcommand> -h`` or ``--help`` only shows help: allowed.
A shell line is split into simple commands at ``;``, ``&``, ``|``, ``(``, ``)``, backquotes and
``$(`` outside quotes; ``sh -c``/``bash -c`` strings and wrappers (``env``, ``sudo``,
``timeout``, ``nohup``...) are looked through.

A guard against accidents, not a wall: a worker that calls the real git by its path gets past
it. The throwaway clone (no remote, no transport, refusing hooks) and the sandbox stay the
structural protection.

Standard library only: both users run it by path under whatever interpreter prun was started
with.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex

ALWAYS = {"commit", "push", "pull", "merge", "rebase", "cherry-pick", "revert", "am",
          "update-ref", "filter-branch", "filter-repo", "send-pack", "http-push", "fast-import"}
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
CHECKOUT_REFUSED = {"-b", "-B", "--orphan", "-f", "--force", "-p", "--patch",
                    "--pathspec-from-file"}
SWITCH_REFUSED = {"-c", "-C", "--create", "--force-create", "--orphan", "-f", "--force",
                  "--discard-changes"}
GIT_OPTS_WITH_VALUE = {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env",
                       "--exec-path", "--super-prefix"}
GLOB = set("*?[")
# Subcommands git never lets an alias override (the wrapper asks git about any other name).
BUILTIN = ALWAYS | {
    "add", "annotate", "apply", "archive", "bisect", "blame", "branch", "bundle", "cat-file",
    "check-attr", "check-ignore", "checkout", "clean", "clone", "commit-tree", "config",
    "count-objects", "describe", "diff", "diff-files", "diff-index", "diff-tree", "fetch",
    "for-each-ref", "format-patch", "fsck", "gc", "grep", "hash-object", "help", "init", "log",
    "ls-files", "ls-remote", "ls-tree", "merge-base", "mv", "name-rev", "notes", "read-tree",
    "reflog", "remote", "reset", "restore", "rev-list", "rev-parse", "rm", "shortlog", "show",
    "show-ref", "sparse-checkout", "stash", "status", "submodule", "switch", "symbolic-ref",
    "tag", "update-index", "var", "version", "worktree", "write-tree"}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}
WRAPPER_OPTS_WITH_VALUE = {"-u", "--user", "-g", "--group", "-n", "-s", "--signal", "-k"}
WRAPPERS = {"command", "exec", "env", "sudo", "nice", "nohup", "time", "xargs", "timeout"}
MAX_DEPTH = 3
_PUNCT = ";&|()`"


def refusal(command_line: str, depth: int = 0) -> str | None:
    """Why the shell line ``command_line`` is refused (``git <what>``), or None."""
    if depth > MAX_DEPTH:
        return None
    for words in _segments(command_line):
        why = refusal_argv(words, depth)
        if why:
            return why
    return None


def refusal_argv(words: list[str], depth: int = 0) -> str | None:
    """Why the command ``words`` (program first) is refused (``git <what>``), or None."""
    i = 0
    while i < len(words):  # skip VAR=value prefixes and wrappers (env -i, sudo -u x, timeout 5)
        if _assignment(words[i]):
            i += 1
        elif os.path.basename(words[i]) in WRAPPERS:
            i += 1
            while i < len(words) and os.path.basename(words[i]) != "git" and (
                    words[i].startswith("-") or _duration(words[i])
                    or _assignment(words[i]) or words[i - 1] in WRAPPER_OPTS_WITH_VALUE):
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
    opts, sub, args = split_git(words[i + 1:])
    if sub is None:
        return None
    for opt, value in itertools.pairwise(opts):   # -c alias.NAME=VALUE given here
        if opt == "-c" and value.startswith(f"alias.{sub}="):
            return alias_refusal(opts, value.split("=", 1)[1], args, depth)
    return subcommand_refusal(sub, args, _base_dir(opts))


def split_git(args: list[str]) -> tuple[list[str], str | None, list[str]]:
    """git's own options, the subcommand (None if there is none), and its arguments."""
    opts: list[str] = []
    rest = list(args)
    while rest and rest[0].startswith("-"):  # -C dir, -c k=v, --git-dir=x, --no-pager
        opts.append(rest.pop(0))
        if opts[-1] in GIT_OPTS_WITH_VALUE and rest:
            opts.append(rest.pop(0))
    return (opts, rest[0], rest[1:]) if rest else (opts, None, [])


def alias_refusal(opts: list[str], value: str, args: list[str], depth: int = 0) -> str | None:
    """Why running the alias whose definition is ``value`` with ``args`` is refused, or None."""
    if depth > MAX_DEPTH:
        return None
    if value.startswith("!"):
        return refusal(value[1:], depth + 1)
    expanded = expand_alias(opts, value, args)
    return None if expanded is None else refusal_argv(["git", *expanded], depth + 1)


def expand_alias(opts: list[str], value: str, args: list[str]) -> list[str] | None:
    """git's arguments once the alias ``value`` is expanded (None if it does not parse)."""
    try:
        return [*opts, *shlex.split(value), *args]
    except ValueError:
        return None


def subcommand_refusal(sub: str, args: list[str], base: str = ".") -> str | None:
    """The rules for one subcommand; ``base`` is where paths are looked up (git's ``-C``)."""
    flags = {a.split("=", 1)[0] for a in args if a.startswith("-") and a != "--"}
    shorts = {c for a in args if a.startswith("-") and not a.startswith("--") for c in a[1:]}
    shown = " ".join([sub, *args])
    if args[:1] in (["-h"], ["--help"]):   # git shows the usage or the manual, nothing else
        return None
    if sub in ALWAYS:
        return f"git {sub}"
    if sub == "reset" and "--hard" in flags:
        return "git reset --hard"
    if sub == "clean" and not ("--dry-run" in flags or "n" in shorts):
        return "git clean"
    if sub == "branch" and (flags & BRANCH_CHANGE or (args and not flags & BRANCH_READ)):
        return f"git {shown}"
    if sub == "tag" and (flags & TAG_CHANGE or (args and not flags & TAG_READ)):
        return f"git {shown}"
    if sub == "checkout" and (flags & CHECKOUT_REFUSED or _restores_paths(args, base)):
        return f"git {shown}"
    if sub == "switch" and flags & SWITCH_REFUSED:
        return f"git {shown}"
    if sub == "restore" and ("--worktree" in flags or "W" in shorts
                             or not ("--staged" in flags or "S" in shorts)):
        return f"git {shown}"
    if sub == "stash" and args[:1] in (["drop"], ["clear"]):
        return f"git {shown}"
    return None


def _restores_paths(args: list[str], base: str) -> bool:
    """True when a ``checkout`` names paths: after ``--``, two or more operands, or one that is
    ``.``, a glob or an existing path."""
    if "--" in args:
        return bool(args[args.index("--") + 1:])
    operands = [a for a in args if not a.startswith("-")]
    if len(operands) != 1:
        return len(operands) > 1
    arg = operands[0]
    return arg == "." or bool(GLOB & set(arg)) or os.path.lexists(os.path.join(base, arg))


def _assignment(word: str) -> bool:
    """``NAME=value``, as a shell reads it before a command."""
    name, eq, _ = word.partition("=")
    return bool(eq) and name.isidentifier()


def _duration(word: str) -> bool:
    """A number as ``timeout``/``nice`` take it: ``5``, ``2.5s``, ``1m``."""
    number = word[:-1] if word[-1:] and word[-1] in "smhd" else word
    return number.replace(".", "", 1).isdigit()


def _base_dir(opts: list[str]) -> str:
    base = "."
    for opt, value in itertools.pairwise(opts):
        if opt == "-C":
            base = os.path.join(base, value)
    return base


def _segments(command_line: str) -> list[list[str]]:
    """Simple commands of a shell line, split at ; & | ( ) ` and $( outside quotes."""
    lex = shlex.shlex(command_line, posix=True, punctuation_chars=_PUNCT)
    lex.whitespace_split = True
    try:
        words = list(lex)
    except ValueError:  # unbalanced quotes: split crudely rather than give up
        return [part.split() for part in re.split(r"\|\||&&|[;|&\n()`]|\$\(", command_line)]
    segments: list[list[str]] = [[]]
    for word in words:
        if word == "$" or (word and all(c in _PUNCT for c in word)):
            segments.append([])
        else:
            segments[-1].append(word)
    return segments


def log_refusal(why: str, command: str) -> None:
    """One JSON line in ``$PRUN_STATE_DIR/guard.log`` (when that folder exists)."""
    state_dir = os.environ.get("PRUN_STATE_DIR")
    if state_dir and os.path.isdir(state_dir):
        try:
            with open(os.path.join(state_dir, "guard.log"), "a", encoding="utf-8") as f:
                f.write(json.dumps({"refused": why, "command": command}) + "\n")
        except OSError:
            pass
