"""The person's working tree as a base: what is uncommitted in it, and a commit of it as it is.

A code unit starts from a commit (``base:``, default ``HEAD``), so what the person has not
committed yet is not in its clone. ``uncommitted`` counts those changes (``prun run`` says so
in one line); ``base: worktree`` (``WORKTREE``) starts code units from ``worktree_commit``: the
tree as it is, tracked changes and untracked files that are not ignored, committed on top of
``HEAD`` the way ``git stash create`` does it, without touching the person's branch, index,
stash list or any ref. The commit is written through a private copy of the index
(``GIT_INDEX_FILE``), so the person's own staging is left exactly as it was. A clean tree is
``HEAD`` itself. Nothing names the commit: the run records it as its base, and the run's object
store (``prun.git.store``) keeps a copy of it. ``prun check`` and ``prun run`` resolve it
alike (``prun.plan.pair_facts``, ``prun.run.freeze``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable

from ..errors import GitError, UsageError
from . import gitcmd
from .gitcmd import AUTHOR

WORKTREE = "worktree"      # the base that names the working tree as it is


def uncommitted(root: str | os.PathLike[str], *, besides: Iterable[str] = ()) -> int:
    """How many paths of the working tree at ``root`` differ from ``HEAD`` (staged or not,
    untracked files that are not ignored included), ``besides`` (files, such as the plan's
    own, that are not counted)."""
    top = os.path.realpath(root)
    skip = {os.path.relpath(os.path.realpath(f), top).replace(os.sep, "/") for f in besides}
    entries = iter(gitcmd.git(["status", "--porcelain=v1", "-z", "--untracked-files=all"],
                              root).stdout.split("\0"))
    count = 0
    for entry in entries:
        if not entry:
            continue
        count += entry[3:] not in skip
        if "R" in entry[:2] or "C" in entry[:2]:   # a rename's or copy's source path follows
            next(entries, None)
    return count


def worktree_commit(root: str | os.PathLike[str]) -> str:
    """A commit of the working tree at ``root`` as it is, on top of ``HEAD``; ``HEAD`` itself
    when nothing is uncommitted. Touches no ref, the index or the stash list. UsageError when
    it cannot be made (no commit yet, an unreadable file)."""
    try:
        return _commit(root)
    except GitError as e:
        raise UsageError(f"cannot take the working tree of {os.fspath(root)} as the base: "
                         f"{e.message}", hint="commit something first, or give base: a commit "
                         "id") from None


def _commit(root: str | os.PathLike[str]) -> str:
    head = gitcmd.rev(root, "HEAD")
    index = gitcmd.out(["rev-parse", "--path-format=absolute", "--git-path", "index"], root)
    with tempfile.TemporaryDirectory(prefix="prun-worktree-") as tmp:
        private = os.path.join(tmp, "index")
        if os.path.exists(index):        # its stat cache: files left alone are not read again
            shutil.copyfile(index, private)
        env = {"GIT_INDEX_FILE": private}
        gitcmd.git(["add", "--all", "--", "."], root, env=env)
        tree = gitcmd.out(["write-tree"], root, env=env)
    if tree == gitcmd.out(["rev-parse", f"{head}^{{tree}}"], root):
        return head
    return gitcmd.out(["commit-tree", tree, "-p", head, "-m",
                       "prun: the working tree as it was (base: worktree)"], root,
                      env={**AUTHOR, **_dates(root, head)})


def _dates(root: str | os.PathLike[str], head: str) -> dict[str, str]:
    """``HEAD``'s commit time as the new commit's: the same tree on the same ``HEAD`` is the
    same commit, however often it is made (``prun check`` and ``prun run`` make it each)."""
    when = gitcmd.out(["log", "-1", "--format=%cI", head], root)
    return {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
