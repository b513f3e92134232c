"""The text diffs of some files of a clone's change, as a person reads them: one ``git diff`` for
them all, its output split per file (``prun.git.patchfile``); or, once ``prun clean`` removed
the clone, cut from the patch it saved (``patch_diffs``).

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

from .._util.quoting import quote
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
    ``git diff`` limited to those paths, whatever their number, naming blobs by their full ids
    as the patch ``prun clean`` saves does (``patch_diffs``), so a diff reads the same once
    its clone is gone. A clone that cannot be read gives no diff."""
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
                         "--full-index", "--no-ext-diff", "--no-textconv", "--no-color",
                         "--src-prefix=a/", "--dst-prefix=b/", r.base, "--",
                         *(f":(literal){p}" for p in paths)],
                        text=False, check=False).stdout
    except BrokenClone:
        return {}
    return _split(out, files, limit)


def patch_diffs(patch: bytes, files: Iterable[FileChange], *,
                limit: int = 200_000) -> dict[str, str]:
    """Each of ``files``' diff by its path, cut from ``patch`` (a binary patch of the whole
    change, as ``prun.git.saved`` keeps it): a binary file's block says ``Binary files ...
    differ`` as ``git diff`` does, and each is cut at ``limit`` bytes."""
    return _split(patch, files, limit, binary=True)


def _split(out: bytes, files: Iterable[FileChange], limit: int, *,
           binary: bool = False) -> dict[str, str]:
    wanted = {f.path for f in files}
    diffs: dict[str, str] = {}
    for b in blocks(out):
        if b.path not in wanted or b.path in diffs:
            continue
        end = b.end
        marker = out.find(b"\nGIT binary patch\n", b.start, b.end) if binary else -1
        if marker >= 0:
            end = marker + 1
        text = out[b.start:min(end, b.start + limit)].decode("utf-8", "replace")
        if marker >= 0:
            text += _binary_line(b.old_path, b.new_path)
        diffs[b.path] = text + (CUT if end - b.start > limit else "")
    return diffs


def _binary_line(old: str | None, new: str | None) -> str:
    """git's line for a binary file in a text diff."""
    return (f"Binary files {quote('a/' + old) if old else '/dev/null'} and "
            f"{quote('b/' + new) if new else '/dev/null'} differ\n")

