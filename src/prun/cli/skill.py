"""Install prun's skill where a coordinating CLI discovers it: SKILL.md, its reference files
and the seed's scripts/.

    prun skill install --for claude|gemini|agy [--user | --project DIR] [--force]
    prun skill uninstall --for claude|gemini|agy [--user | --project DIR] [--force]
    prun skill show [--for T] [--project DIR] [--json]

Where each CLI finds it (the project defaults to the repository root):

    claude  DIR/.claude/skills/prun/    --user: ~/.claude/skills/prun/
    gemini  DIR/.gemini/skills/prun/    --user: ~/.gemini/skills/prun/
    agy     DIR/.agents/skills/prun/    --user: ~/.gemini/config/skills/prun/

The installed folder holds a manifest of file hashes (.prun-skill.json): installing again is
a no-op when the copy is current, updates an outdated one, and never overwrites a copy someone
edited (or one prun did not write) without --force. Lines:

    INSTALLED|UPDATED|REPLACED|UNCHANGED for=<t> scope=project|user files=<n> path=<folder>
    REMOVED|ABSENT for=<t> scope=project|user path=<folder>
    SKILL for=<t> scope=<s> state=current|outdated|edited|foreign version=<v> path=<folder>
    SKILLS installed=<n> current=<n> outdated=<n> edited=<n> foreign=<n>

An install that made the folder says so in a note on stderr; where git neither tracks nor
ignores it, the note gives the `.gitignore` line that leaves it out (or commit it to share it).

exit codes: 0 done; 2 bad usage, not in a repository without --project, or an edited copy
without --force (nothing is written).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .._util.gitcmd import toplevel
from .._util.quoting import word
from .._util.untracked import untracked_note
from ..errors import UsageError
from ..skill import install as inst
from . import options


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (("install", "write the skill where a CLI discovers it"),
                       ("uninstall", "remove an installed skill")):
        a = sub.add_parser(name, help=text, description=text)
        a.add_argument("--for", dest="target", required=True, choices=("claude", "gemini", "agy"),
                       help="the CLI: claude (Claude Code), gemini (Gemini CLI), agy (Antigravity)")
        where = a.add_mutually_exclusive_group()
        where.add_argument("--user", action="store_true", help="the user's skills folder")
        where.add_argument("--project", metavar="DIR", type=options.path,
                           help="the project's skills folder (default: the repository root)")
        a.add_argument("--force", action="store_true",
                       help="overwrite (or remove) a copy that was edited or not written by prun")
    s = sub.add_parser("show", help="the installed copies and whether each is current",
                       description="the installed copies and whether each is current")
    s.add_argument("--for", dest="target", action="append", choices=("claude", "gemini", "agy"),
                   help="only this CLI (repeatable)")
    s.add_argument("--project", metavar="DIR", type=options.path,
                   help="the project to look in (default: the repository root, if any)")
    s.add_argument("--json", action="store_true", help="one JSON object")


def _word(key: str, value: object) -> str:
    """``key=value``, the value quoted when it is not plain (``prun._util.quoting``)."""
    return word(key, value)


def run(args: argparse.Namespace) -> int:
    if args.action == "show":
        return _show(args)
    loc = inst.location(args.target, user=args.user, project=args.project)
    shipped = inst.Shipped.load()
    where = [_word("for", loc.target), _word("scope", loc.scope)]
    if args.action == "install":
        new = not loc.path.exists()
        action, _ = inst.install(loc, force=args.force, shipped=shipped)
        print(" ".join([action.upper(), *where, _word("files", len(shipped.contents)),
                        _word("path", loc.path)]))
        if (note := untracked_note([loc.path] if new else [])) is not None:
            print(f"prun: note: {note}", file=sys.stderr)
    else:
        action, _ = inst.uninstall(loc, force=args.force, shipped=shipped)
        print(" ".join([action.upper(), *where, _word("path", loc.path)]))
    return 0


def _show(args: argparse.Namespace) -> int:
    project: Path | None = None
    if args.project is not None:
        given = Path(args.project).expanduser().resolve()
        if not given.is_dir():
            raise UsageError(f"--project {args.project}: not a folder",
                             hint="give an existing folder")
        project = given
    else:
        top = toplevel()
        project = Path(top) if top else None
    targets = tuple(dict.fromkeys(args.target)) if args.target else inst.TARGETS
    shipped = inst.Shipped.load()
    states = [inst.inspect(loc, shipped)
              for loc in inst.locations(project=project, targets=targets)]
    found = [st for st in states if st.state != inst.ABSENT]
    counts = inst.summary(states)
    if args.json:
        print(json.dumps({"shipped": shipped.digest, "project": str(project) if project else None,
                          "installed": [st.as_dict() for st in found],
                          "counts": dict(counts)}, indent=1, sort_keys=True))
        return 0
    for st in found:
        words = ["SKILL", _word("for", st.location.target), _word("scope", st.location.scope),
                 _word("state", st.state), _word("version", st.version or "-")]
        if st.changed:
            words.append(_word("changed", ",".join(st.changed)))
        words.append(_word("path", st.location.path))
        print(" ".join(words))
    print(" ".join(["SKILLS", _word("installed", len(found)),
                    *(_word(k, v) for k, v in counts.items())]))
    return 0
