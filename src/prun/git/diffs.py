"""The text diffs of some files of a clone's change, as a person reads them: one ``git diff``
for them all, its output split per file (``prun.git.patchfile``).

Read like ``prun.git.changes.read_change``: through a throwaway copy of the clone's index (the
named files added to it, untracked ones included), so neither the worker's index nor its files
change. What a unit could have configured does not run: no external diff driver, no textconv
filter, prefixes given. A file over ``BIG_FILE`` bytes is not diffed (git names it, as it does
a binary file), and each file's diff is cut at ``limit`` bytes: the caller bounds how many files
it asks for, so the whole answer is bounded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .._util import gitcmd
from .changes import FileChange, private_index
from .patchfile import blocks

BIG_FILE = 256 << 10               # bytes: a bigger file's diff is not read (core.bigFileThreshold)
CUT = "\n[diff cut]\n"


def text_diffs(clone: str | os.PathLike[str], base: str, files: Iterable[FileChange], *,
               limit: int = 200_000) -> dict[str, str]:
    """Each of ``files``' diff against ``base`` by its path (``FileChange.path``), at most
    ``limit`` bytes each: two git processes whatever the number of files (one adds them to
    the throwaway index, one diffs them)."""
    clone = os.fspath(clone)
    files = list(files)
    paths = sorted({p for f in files for p in f.paths})
    if not paths:
        return {}
    literal = {"GIT_LITERAL_PATHSPECS": "1"}
    git_dir = gitcmd.out(["rev-parse", "--absolute-git-dir"], clone)
    with private_index(git_dir) as env:
        env = {**env, **literal}
        gitcmd.git(["add", "-A", "--ignore-errors", "--", *paths], clone, env=env, check=False)
        out = gitcmd.git(["-c", f"core.bigFileThreshold={BIG_FILE}", "diff", "--cached", "-M",
                          "--no-ext-diff", "--no-textconv", "--no-color", "--src-prefix=a/",
                          "--dst-prefix=b/", base, "--", *paths], clone, env=env, text=False,
                         check=False).stdout
    wanted = {f.path for f in files}
    diffs: dict[str, str] = {}
    for b in blocks(out):
        if b.path in wanted and b.path not in diffs:
            text = out[b.start:min(b.end, b.start + limit)].decode("utf-8", "replace")
            diffs[b.path] = text + (CUT if b.end - b.start > limit else "")
    return diffs
