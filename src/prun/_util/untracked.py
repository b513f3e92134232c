"""What an install made that git does not know of: the note ``prun skill install`` and ``prun
mcp install`` print after they created files inside a repository, with the ``.gitignore``
lines that would keep them out of it (or that say: commit them to share them)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from . import gitcmd


def untracked_note(created: Sequence[Path]) -> str | None:
    """One line naming each of ``created`` (files or folders just made), or None when none
    was. Those inside a repository that git neither tracks nor ignores get the ``.gitignore``
    line that would leave them out."""
    if not created:
        return None
    lines: list[str] = []
    for path in created:
        top = gitcmd.toplevel(path.parent)
        if top is None:
            continue
        rel = os.path.relpath(os.path.realpath(path), top)
        if rel.startswith(".."):
            continue
        seen = gitcmd.git(["ls-files", "--others", "--exclude-standard", "--directory", "--",
                           rel], top, check=False).stdout.strip()
        if seen:        # untracked and not ignored
            lines.append("/" + rel.replace(os.sep, "/") + ("/" if path.is_dir() else ""))
    made = ", ".join(str(p) for p in created)
    if not lines:
        return f"created {made}"
    return (f"created {made}; git does not track or ignore {', '.join(lines)}: commit "
            f"{'it' if len(lines) == 1 else 'them'} to share with the project, or add to "
            f".gitignore: {' '.join(lines)}")
