"""The text diffs of some files of a clone's change, as a person reads them: one ``git diff`` for
them all, its output split per file (``prun.git.patchfile``).

Read like ``prun.git.changes.read_change``: through ``prun.git.untrusted`` (a private
``GIT_DIR`` and index, nothing the unit configured is read), so neither the worker's index nor
its files change; no external diff driver, no textconv filter, prefixes given. A file over
``BIG_FILE`` bytes is not diffed (git names it, as it does a binary file), and each file's diff
is cut at ``limit`` bytes: the caller bounds how many files it asks for, so the whole answer is
bounded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from .changes import FileChange
from .clonefiles import BrokenClone
from .patchfile import blocks
from .untrusted import reading

BIG_FILE = 256 << 10               # bytes: a bigger file's diff is not read (core.bigFileThreshold)
CUT = "\n[diff cut]\n"


def text_diffs(clone: str | os.PathLike[str], base: str, files: Iterable[FileChange], *,
               limit: int = 200_000) -> dict[str, str]:
    """Each of ``files``' diff against ``base`` by its path (``FileChange.path``), at most
    ``limit`` bytes each: the clone read from the host as ``read_change`` reads it
    (``prun.git.untrusted``: a private ``GIT_DIR``, nothing the unit configured), then one
    ``git diff`` limited to those paths, whatever their number. A clone that cannot be read
    gives no diff."""
    files = list(files)
    paths = sorted({p for f in files for p in f.paths})
    if not paths:
        return {}
    try:
        with reading(clone, base) as r:
            r.stage()
            if not r.complete:
                return {}
            out = r.git(["-c", f"core.bigFileThreshold={BIG_FILE}", "diff", "--cached", "-M",
                         "--no-ext-diff", "--no-textconv", "--no-color", "--src-prefix=a/",
                         "--dst-prefix=b/", r.base, "--", *(f":(literal){p}" for p in paths)],
                        text=False, check=False).stdout
    except BrokenClone:
        return {}
    wanted = {f.path for f in files}
    diffs: dict[str, str] = {}
    for b in blocks(out):
        if b.path in wanted and b.path not in diffs:
            text = out[b.start:min(b.end, b.start + limit)].decode("utf-8", "replace")
            diffs[b.path] = text + (CUT if b.end - b.start > limit else "")
    return diffs

