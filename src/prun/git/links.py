"""Symbolic links that a change would write through: found across packets by reconcile
(``reasons``), and in the target tree before each patch by integrate (``through``).

A path is written through a link when a folder above it is a symbolic link: packet A's change
makes ``lib`` a link and packet B's writes ``lib/x`` (wherever ``lib`` points, in the
repository or outside it, B's file would land there), or the tree already holds a link
``lib``. Which paths of a change are links is read from its patch (``new file mode 120000``),
the same text ``git apply`` is given.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Container, Mapping

from ..errors import PrunError
from .changes import Change, read_change
from .patchfile import Block, blocks
from .verdict import Reason

LINK_THROUGH = "link-through"
WORKING_TREE = "working-tree"


def folders(path: str) -> list[str]:
    """The folders above ``path``, outermost first: ``a/b/c`` -> ``a``, ``a/b``."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


class Tree:
    """The links of a work tree as they are now, read with ``lstat`` (each folder once)."""

    def __init__(self, root: str):
        self.root = root
        self._kind: dict[str, str] = {}          # relative path -> link, folder, other, none

    def kind(self, rel: str) -> str:
        if rel not in self._kind:
            try:
                mode = os.lstat(os.path.join(self.root, rel)).st_mode
            except OSError:       # absent, a file above it, a name too long: nothing there
                self._kind[rel] = "none"
            else:
                self._kind[rel] = ("link" if stat.S_ISLNK(mode) else
                                   "folder" if stat.S_ISDIR(mode) else "other")
        return self._kind[rel]

    def link_above(self, path: str, *, skip: Container[str] = ()) -> str | None:
        """The outermost folder above ``path`` that is a link here. A folder in ``skip`` (one
        the change replaces) ends the search: what is below it is the change's own."""
        for folder in folders(path):
            if folder in skip:
                return None
            kind = self.kind(folder)
            if kind == "link":
                return folder
            if kind != "folder":          # nothing deeper exists (or a file is in the way)
                return None
        return None


def reasons(changes: Mapping[str, Change], tree: str | None = None, *,
            links_of: Callable[[Change], set[str]] | None = None) -> dict[str, list[Reason]]:
    """The ``link-through`` reasons of each packet (by id): for each link another packet's
    change (or the tree, ``with=working-tree``) has where this change writes below it, one
    reason naming the first such path (``paths=`` how many when more than one). Both packets of
    a pair get one: the one that makes the link and the one that writes through it."""
    links_of = links_of or change_links
    owners: dict[str, list[str]] = {}
    for pid, change in changes.items():
        for p in change.paths:
            owners.setdefault(p, []).append(pid)
    known: dict[str, set[str]] = {}
    found: dict[tuple[str, str, str], list[str]] = {}    # (packet, link, with) -> paths
    here = Tree(tree) if tree else None
    for pid, change in changes.items():
        own = set(change.paths)
        for p in change.paths:
            for folder in folders(p):
                for other in owners.get(folder, ()):
                    if other == pid:
                        continue
                    if other not in known:
                        known[other] = links_of(changes[other])
                    if folder in known[other]:
                        found.setdefault((pid, folder, other), []).append(p)
                        found.setdefault((other, folder, pid), []).append(p)
            link = here.link_above(p, skip=own) if here else None
            if link is not None:
                found.setdefault((pid, link, WORKING_TREE), []).append(p)
    out: dict[str, list[Reason]] = {}
    for (pid, link, other), paths in sorted(found.items()):
        detail: dict[str, object] = {"path": min(paths), "link": link, "with": other}
        if len(set(paths)) > 1:
            detail["paths"] = len(set(paths))
        out.setdefault(pid, []).append(Reason(LINK_THROUGH, detail))
    return out


def change_links(change: Change) -> set[str]:
    """The paths a change makes into symbolic links, read from its patch (read from its clone
    when the change does not carry one)."""
    patch = change.patch
    if patch is None:
        try:
            patch = read_change(change.clone, change.base, with_patch=True).patch or b""
        except PrunError:  # its clone went away since it was judged: integrate still checks
            return set()
    return {b.path for b in blocks(patch) if b.makes_link}


def through(target: Tree, patch: list[Block]) -> list[tuple[str, str]]:
    """The paths of ``patch`` it would write through a link, each with that link: a folder
    above the path that is a link in the target now (unless the patch itself removes that
    link first) or that the patch makes a link; or the path itself, a link in the target that
    the patch treats as a file."""
    removed = {b.old_path for b in patch if b.old_path and b.was_link and b.new_path != b.old_path}
    made = {b.path for b in patch if b.makes_link}
    pre_links = {b.old_path for b in patch if b.was_link}
    out: dict[str, str] = {}
    for b in patch:
        for p in b.paths:
            # git removes old paths before it writes new ones: a link the patch makes is in
            # the way of what it writes, not of what it deletes
            link = next((f for f in folders(p) if f in made), None) if p == b.new_path else None
            link = link or target.link_above(p, skip=removed)
            if link is None and p not in pre_links and target.kind(p) == "link":
                link = p
            if link is not None:
                out.setdefault(p, link)
    return sorted(out.items())
