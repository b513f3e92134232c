"""Reading a unit's clone from the host, trusting nothing the unit could have written.

Every host-side git call on a unit's tree goes through ``reading(clone, base)``: git runs with
a private ``GIT_DIR`` made for that one read, the clone only as its work tree, so nothing in the
clone's ``.git`` is read by git, and nothing of the person's or the system's configuration
either:

- the private ``GIT_DIR`` holds prun's own ``config`` (``core.fsmonitor=false``,
  ``core.hooksPath=/dev/null``, ``core.attributesFile``/``core.excludesFile``
  ``/dev/null``, no driver of any kind, commit graphs, multi-pack indexes, split and sparse
  indexes and the untracked cache off), ``info/attributes`` that sets every attribute which
  selects a driver or a conversion back to unspecified (it outranks every ``.gitattributes``),
  ``info/exclude`` (a bounded copy of the clone's own, what the setup command left out, the
  paths the clone was given from a primed template (``shared_paths``), and the paths the
  scan excluded), and ``objects/info/alternates`` naming the clone's store
  (``prun.git.store``) and nothing the unit wrote;
- the environment has no ``GIT_*`` variable but prun's: ``GIT_DIR``, ``GIT_WORK_TREE``,
  ``GIT_INDEX_FILE`` (a private index: prun's stat cache from checkout time, or a fresh
  ``read-tree`` of the base; never the unit's own index), ``GIT_CONFIG_NOSYSTEM=1``,
  ``GIT_CONFIG_GLOBAL``/``GIT_CONFIG_SYSTEM=/dev/null``, ``GIT_ATTR_NOSYSTEM=1``, ``HOME`` and
  ``XDG_CONFIG_HOME`` the read's own folder (no configuration there), ``GIT_ALLOC_LIMIT``;
  ``-c core.fsmonitor=false -c core.hooksPath=/dev/null`` on every command line besides;
- before git runs, ``prun.git.scan`` walks the tree (``lstat`` only): special files, nested
  repositories, files too large or sparse, links outside the tree are left out (skip-worktree
  in the private index when tracked, excluded when not), each a finding; a tree git would hang
  on, or too big, is not read at all;
- the clone's ``HEAD`` (and the ref it names) is read by prun as a bounded regular file
  (``prun.git.clonefiles``), and the unit's own ``.git/objects`` is borrowed only to list the
  commits the worker made, after a walk found only regular files and folders there, within
  bounds, and an alternates file that is exactly prun's.

Anything else (a ``.git`` that is a file or a link, a ``HEAD`` that is a FIFO, git failing on
what it found) is a ``broken-clone`` finding, never a traceback.

An overlay workspace (``prun.git.layered``) is read exactly as a clone, through its merged
view (``prun.git.overlayview.merged``): Python reads ``Reader.view``, git runs where the
workspace's own path shows it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal, overload

from .._util import gitcmd
from ..errors import PrunError
from .clonefiles import (
    BrokenClone,
    NotRegular,
    alternate,
    check_clone,
    objects_ok,
    odd_git_files,
    read_inside,
)
from .overlayview import View, layer, merged
from .scan import Finding, Scan, scan
from .store import cache_is_fresh, keep_stat_cache, stat_cache, store_of

EXCLUDE_MAX_BYTES = 1024 * 1024              # the clone's .git/info/exclude, copied
MAX_EXCLUDED = 200                           # findings left out of one change; past it: none
ALLOC_LIMIT = "1g"                           # GIT_ALLOC_LIMIT: the largest single allocation
# Every attribute that selects a driver or changes bytes on the way in or out, unspecified.
ATTRIBUTES = ("* !filter !diff !merge !text !eol !crlf !ident !working-tree-encoding "
              "!export-subst !export-ignore !delta !encoding !whitespace\n")
# No configuration but the repository's own, no system attributes (``gitcmd.git(...,
# isolated=True)`` drops every other GIT_* variable).
NEUTRAL_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
               "GIT_CONFIG_SYSTEM": os.devnull, "GIT_ATTR_NOSYSTEM": "1"}
CONFIG = """[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = true
\tsymlinks = true
\tignorecase = false
\tprecomposeunicode = false
\tlogallrefupdates = false
\tfsmonitor = false
\thooksPath = {hooks}
\tattributesFile = /dev/null
\texcludesFile = /dev/null
\tuntrackedCache = false
\tsplitIndex = false
\tsparseCheckout = false
\tcommitGraph = false
\tmultiPackIndex = false
\tautocrlf = false
\tsafecrlf = false
\ttrustctime = true
\tcheckStat = default
\tquotePath = true
\tprotectNTFS = true
\tprotectHFS = true
[index]
\tsparse = false
[diff]
\tnoprefix = false
\tmnemonicPrefix = false
\trenames = true
[gc]
\tauto = 0
[maintenance]
\tauto = false
[protocol]
\tallow = never
"""


# The private GIT_DIR ---------------------------------------------------------------------------

class Reader:
    """One read of a clone through a private ``GIT_DIR`` (made by ``reading``)."""

    def __init__(self, clone: str, base: str, store: str | None, tmp: str, tree: Scan | None,
                 view: View | None = None):
        self.clone, self.base, self.store, self.tmp = clone, base, store, tmp
        self.view = view or View(clone)    # where prun's own reads see the clone
        self.git_dir = os.path.join(tmp, "git")
        self.hooks = os.devnull            # core.hooksPath: no hook is found under it
        self.scan = tree
        self.findings: list[Finding] = list(tree.findings) if tree else []
        self.env = {"GIT_DIR": self.git_dir, "GIT_WORK_TREE": clone,
                    "GIT_INDEX_FILE": os.path.join(tmp, "index"), **NEUTRAL_ENV,
                    "HOME": tmp, "XDG_CONFIG_HOME": tmp,   # holding no configuration
                    "GIT_NO_REPLACE_OBJECTS": "1", "GIT_ALLOC_LIMIT": ALLOC_LIMIT,
                    "GIT_PAGER": "cat", "GIT_EDITOR": "true", "GIT_ALLOW_PROTOCOL": "",
                    "GIT_PROTOCOL_FROM_USER": "0"}

    @overload
    def git(self, args: Sequence[str], *, text: Literal[True] = True,
            input: bytes | None = None, check: bool = True) -> gitcmd.Ran[str]: ...

    @overload
    def git(self, args: Sequence[str], *, text: Literal[False],
            input: bytes | None = None, check: bool = True) -> gitcmd.Ran[bytes]: ...

    def git(self, args: Sequence[str], *, text: bool = True, input: bytes | None = None,
            check: bool = True) -> gitcmd.Ran[str] | gitcmd.Ran[bytes]:
        """git on the clone through the private ``GIT_DIR``."""
        argv = ["-c", "core.fsmonitor=false", "-c", f"core.hooksPath={self.hooks}", *args]
        through = self.view.through
        if text:
            return gitcmd.git(argv, self.clone, env=self.env, input=input, check=check,
                              isolated=True, through=through)
        return gitcmd.git(argv, self.clone, env=self.env, input=input, check=check,
                          isolated=True, text=False, through=through)

    @property
    def complete(self) -> bool:
        """Whether the tree may be read (no finding says it must not be)."""
        return not any(f.fatal for f in self.findings)

    def stage(self, *, keep_links: bool = False) -> None:
        """Put everything in the work tree that may be part of a change into the private index
        (``git add -A``), leaving out what the scan found (``keep_links``: but links outside
        the tree, which are only text). Raises ``BrokenClone``."""
        excluded = self._relevant()
        if keep_links:
            excluded = [f for f in excluded if f.code != "link-outside"]
        if not self.complete:
            return
        tracked = set(self.git(["ls-files", "-z"]).stdout.split("\0")) if excluded else set()
        skip = [p for f in excluded if f.path for p in _under(f.path, f.folder, tracked)]
        if skip:
            self.git(["update-index", "-z", "--skip-worktree", "--stdin"],
                     input=_nul(skip))
        self.exclude_folders(excluded)
        if not excluded:
            self._refresh_stat_cache()
        spec = [".", *(f":(exclude,literal){f.path}" for f in excluded if f.path)]
        ran = self.git(["add", "-A", "--ignore-errors", "--pathspec-from-file=-",
                        "--pathspec-file-nul"], input=_nul(spec), check=False)
        if ran.returncode not in (0, 1):   # 1: some file could not be read (--ignore-errors)
            raise BrokenClone("git add: " + _last(ran.stderr))

    def _refresh_stat_cache(self) -> None:
        """Refresh the private index (still the base, with stat data) against the work tree
        and keep it as the clone's stat cache in its store: the next read reads again only
        what changed since. (Right after a checkout every entry is "racily clean", written in
        the same second as the index, so git would read every file on every read; git keeps
        that rule when it writes this index.) Only after a read that left nothing out, whose
        index holds no skip-worktree entry."""
        if self.store is None or not self.base or cache_is_fresh(self.store, self.clone):
            return
        ran = self.git(["update-index", "-q", "--refresh"], check=False)
        if ran.returncode not in (0, 1):   # 1: some entries need updating (the change)
            return
        keep_stat_cache(self.store, self.clone, self.base, self.env["GIT_INDEX_FILE"],
                        fresh=True)

    def exclude_folders(self, findings: Iterable[Finding] | None = None) -> None:
        """Exclude the folders git must not go into (nested repositories, unreadable
        folders) in the private ``info/exclude``: git then never looks inside them."""
        folders = [f.path for f in (self.findings if findings is None else findings)
                   if f.folder and f.path]
        if folders:
            with open(os.path.join(self.git_dir, "info", "exclude"), "a",
                      encoding="utf-8", errors="surrogateescape") as out:
                out.writelines("/" + pattern(p) + "/\n" for p in folders)

    def _relevant(self) -> list[Finding]:
        """The findings that matter: those on paths git would see (not ignored); past
        ``MAX_EXCLUDED`` of them the tree is not read. Returns those with a path."""
        if self.scan is None or self.scan.fatal:
            return []
        paths = [f.path for f in self.findings if f.path is not None]
        ignored: set[str] = set()
        if paths:
            ran = self.git(["check-ignore", "-z", "--stdin"], input=_nul(paths), check=False)
            if ran.returncode not in (0, 1):
                raise BrokenClone("git check-ignore: " + _last(ran.stderr))
            ignored = set(ran.stdout.split("\0"))
        self.findings = [f for f in self.findings if f.path is None or f.path not in ignored]
        excluded = [f for f in self.findings if f.path is not None]
        if len(excluded) > MAX_EXCLUDED:
            self.findings = [Finding("too-many-findings", None,
                                     {"count": len(excluded), "limit": MAX_EXCLUDED}),
                             *(f for f in self.findings if f.path is None),
                             *excluded[:MAX_EXCLUDED]]
            return []
        return excluded

    def commits(self, head: str) -> tuple[tuple[str, ...], bool]:
        """The commits the worker made (``base..head``) and whether ``head`` is not the base
        nor a descendant of it, read with the unit's own objects borrowed (checked first)."""
        if head == self.base:
            return (), False
        why = objects_ok(self.view.path, self.store)
        if why is not None:
            raise BrokenClone(why)
        own = os.path.join(os.path.realpath(self.clone), ".git", "objects")
        if "\n" in own:
            raise BrokenClone("its path holds a newline")
        with open(os.path.join(self.git_dir, "objects", "info", "alternates"), "a") as f:
            f.write(own + "\n")
        listed = self.git(["rev-list", "--reverse", f"{self.base}..{head}"], check=False)
        if listed.returncode != 0:
            raise BrokenClone("its commits cannot be read: " + _last(listed.stderr))
        moved = self.git(["merge-base", "--is-ancestor", self.base, head],
                         check=False).returncode != 0
        return tuple(listed.stdout.split()), moved


def _under(path: str, folder: bool, tracked: set[str]) -> Iterator[str]:
    if path in tracked:
        yield path
    if folder:
        prefix = path + "/"
        yield from (t for t in tracked if t.startswith(prefix))


def _nul(items: Iterable[str]) -> bytes:
    return b"".join(i.encode("utf-8", "surrogateescape") + b"\0" for i in items)


def pattern(path: str) -> str:
    """``path`` as a gitignore pattern matching it literally (a control character, which a
    pattern line cannot hold, matches any one character)."""
    out = []
    for c in path:
        if c in "*?[]\\!# ":
            out.append("\\" + c)
        elif ord(c) < 32 or ord(c) == 127:
            out.append("?")
        else:
            out.append(c)
    return "".join(out)


def _last(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    return lines[-1][:200] if lines else "failed"


@contextlib.contextmanager
def reading(clone: str | os.PathLike[str], base: str | None, *, store: str | None = None,
            walk: bool = True, objects: str | None = None,
            borrow: Sequence[str] = (), view: View | None = None) -> Iterator[Reader]:
    """A private ``GIT_DIR`` over ``clone`` for one read against ``base`` (a full commit or
    tree id the store holds; None: no objects and no index, for ``git apply`` into the work
    tree). ``store``: the store the clone borrows from (default: found beside it,
    ``store.store_of``; a clone made before stores borrows its own objects, once checked).
    ``walk``: scan the tree first. ``objects``: keep the objects git writes in this folder
    (default: thrown away with the read). ``borrow``: more prun-owned object folders to read.
    ``view``: the clone's merged view when the caller holds one already (default: opened for
    the read, ``overlayview.merged``). Raises ``BrokenClone`` when the clone is not one, or git
    fails on what it holds."""
    clone = os.path.abspath(os.fspath(clone))
    with contextlib.ExitStack() as held:
        if view is None:
            try:
                view = held.enter_context(merged(clone))
            except PrunError as e:
                raise BrokenClone(e.message) from None
        with _reading(clone, base, store, walk, objects, borrow, view) as reader:
            yield reader


@contextlib.contextmanager
def _reading(clone: str, base: str | None, store: str | None, walk: bool, objects: str | None,
             borrow: Sequence[str], view: View) -> Iterator[Reader]:
    check_clone(view.path)
    odd = odd_git_files(view.path)
    if base is not None:
        store = store or store_of(clone, base)
    tmp = tempfile.mkdtemp(prefix="prun-read-")
    try:
        tree = scan(view.path) if walk else None
        reader = Reader(clone, base or "", store, tmp, tree, view)
        reader.findings += odd
        alternates = [alternate(store)] if store else []
        alternates += [os.path.realpath(b) for b in borrow]
        if store is None and base is not None:   # a clone made before stores
            why = objects_ok(view.path, None)
            if why is not None:
                raise BrokenClone(why)
            alternates.append(os.path.join(os.path.realpath(clone), ".git", "objects"))
        _make_git_dir(reader, alternates, objects)
        if base is not None and (tree is None or not tree.fatal):
            _start_index(reader)
        yield reader
    except PrunError as e:   # git failed or timed out on what the unit left
        raise BrokenClone(e.message) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _make_git_dir(reader: Reader, alternates: list[str], objects: str | None) -> None:
    git_dir = reader.git_dir   # as few folders as git needs: each costs on a busy disk
    for sub in ("refs", "info"):
        os.makedirs(os.path.join(git_dir, sub))
    if objects is None:
        os.makedirs(os.path.join(git_dir, "objects", "info"))
    else:   # git's objects kept outside the read
        os.makedirs(os.path.join(objects, "info"), exist_ok=True)
        os.symlink(os.path.abspath(objects), os.path.join(git_dir, "objects"))
    _write(os.path.join(git_dir, "HEAD"), "ref: refs/heads/prun-read\n")
    _write(os.path.join(git_dir, "config"), CONFIG.format(hooks=reader.hooks))
    _write(os.path.join(git_dir, "info", "attributes"), ATTRIBUTES)
    _write(os.path.join(git_dir, "objects", "info", "alternates"),
           "".join(a + "\n" for a in alternates if "\n" not in a))
    try:
        own = read_inside(os.path.join(reader.view.path, ".git"), "info/exclude",
                          EXCLUDE_MAX_BYTES) or b""
    except NotRegular:
        own = b""   # the unit's exclude file is its own affair: without it, nothing is hidden
    with open(os.path.join(git_dir, "info", "exclude"), "wb") as f:
        f.write(own + (b"\n" if own and not own.endswith(b"\n") else b""))
        f.writelines(("/" + pattern(p) + "\n").encode("utf-8", "surrogateescape")
                     for p in shared_paths(reader.clone))


def shared_list(clone: str | os.PathLike[str]) -> str:
    """Where prun records what a clone was given from a primed template
    (``prun.git.template``): ``<clone>.shared.json``, beside it and out of its unit's reach
    (the run's folder of workspaces is read-only in the sandbox)."""
    return os.path.abspath(os.fspath(clone)).rstrip(os.sep) + ".shared.json"


def shared_record(clone: str | os.PathLike[str]) -> dict[str, object]:
    """What a clone was given from a primed template: ``paths`` (never part of its change)
    and ``at`` (where the template was primed); empty when nothing."""
    try:
        with open(shared_list(clone), encoding="utf-8", errors="surrogateescape") as f:
            info = json.load(f)
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def shared_paths(clone: str | os.PathLike[str]) -> list[str]:
    """The paths a clone was given from a primed template: never part of its change."""
    paths = shared_record(clone).get("paths")
    return [str(p) for p in paths] if isinstance(paths, list) else []


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _start_index(reader: Reader) -> None:
    """The private index: a copy of prun's stat cache when it was taken at the base (files
    the unit left alone are not read again), else the base read fresh."""
    index = reader.env["GIT_INDEX_FILE"]
    over = layer(reader.clone)   # an overlay workspace: its own cache, else its checkout's
    for tree in (reader.clone, *([over["lower"]] if over else [])):
        if reader.store is None:
            break
        cache, commit = stat_cache(reader.store, tree)
        if commit == reader.base:
            with contextlib.suppress(OSError):
                shutil.copy2(cache, index)   # its mtime too: git's racy-clean check
                return
    reader.git(["read-tree", reader.base])


__all__ = ["ALLOC_LIMIT", "ATTRIBUTES", "MAX_EXCLUDED", "NEUTRAL_ENV", "Reader", "pattern",
           "reading", "shared_list", "shared_paths", "shared_record"]
