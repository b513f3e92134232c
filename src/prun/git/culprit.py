"""The culprit when the combination breaks: which applied units make the combined check fail,
found by bisection in throwaway workspaces.

``before(target)`` records the tree as it is before integrate applies anything, touching
nothing of the person's: a commit (in the repository's object store, on no branch, like ``git
stash create``) of HEAD plus every uncommitted change, untracked files included (those git
ignores are not: a check that needs a built folder, such as a virtual environment, finds it
missing in a throwaway workspace, and the bisection then says ``base=failed``). It is made
through a temporary index, never the person's.

``bisect`` then tests sets of units. Each test is a fresh workspace (a scratch folder under
the workspace root holding a repository that borrows the target's objects) with that commit
checked out and each unit's patch of the set applied in plan order (``git apply --binary``,
the bytes integrate applied, through ``workspace.neutral_git``: a ``.gitattributes`` a patch
adds selects no driver), where the check runs as the combined one did (same command,
environment and timeout). Recursive halving: the two halves of a failing set are tested side
by side; a failing half is split again, down to the unit that fails the check alone; when
both halves pass but their union fails, the interacting pair is found across them (one half
narrowed against the other whole, then the other against the unit found). About
``2*log2(n)`` check runs for one culprit among ``n``; at most ``parallel`` at once. A set
whose patches do not apply without the units left out of it (one edits lines another made)
counts as passing: no unit is named from it. An interaction of three units or more is not
named. When no test passed at all, the check is run on the unchanged tree; if that fails too
the fault is not the units' (``base=failed``) and no culprit is named.

The output of the check run that showed each culprit failing is kept as
``<culprit_dir>/<packet>.log`` (for ``prun followup --with-check``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .._util import gitcmd
from .._util.fsutil import atomic_write, tail_bytes
from .._util.gitcmd import AUTHOR
from .._util.quoting import quote
from . import workspace
from .commands import run_bounded

LOG_MAX_BYTES = 1024 * 1024            # what is kept of a culprit's failing check output
CULPRITS_DIR = "culprits"              # in a run's folder: <packet>.log of each culprit


def log_path(run_dir: str, packet: str) -> str:
    """Where a run keeps the failing check output of its culprit ``packet``."""
    return os.path.join(run_dir, CULPRITS_DIR, f"{packet}.log")


@dataclass(frozen=True)
class Culprit:
    packets: tuple[str, ...]           # one: fails alone; two (plan order): fail together
    log: str                           # the output of the check run that showed it failing

    @property
    def held(self) -> str:
        """The unit left out of the tree: the culprit, or the later one of a pair."""
        return self.packets[-1]

    def line(self) -> str:
        names = " ".join(quote(p) for p in self.packets)
        return f"CULPRIT {names} check=failed {'alone' if len(self.packets) == 1 else 'together'}"

    def as_dict(self) -> dict[str, Any]:
        return {"packets": list(self.packets), "together": len(self.packets) > 1,
                "held": self.held, "log": self.log}


@dataclass(frozen=True)
class Bisection:
    culprits: tuple[Culprit, ...]
    runs: int                          # check runs in throwaway workspaces
    seconds: float
    base_failed: bool = False          # the check fails on the tree before integrate too

    def line(self) -> str:
        return (f"BISECT runs={self.runs} took={self.seconds:.1f}s "
                f"culprits={len(self.culprits)}" + (" base=failed" if self.base_failed else ""))

    def as_dict(self) -> dict[str, Any]:
        return {"culprits": [c.as_dict() for c in self.culprits], "runs": self.runs,
                "seconds": round(self.seconds, 3), "base_failed": self.base_failed}


def before(target: str) -> str:
    """A commit of ``target``'s tree as it is now (HEAD plus uncommitted and untracked, not
    ignored, files), made through a temporary index: nothing of the person's is touched."""
    folder = tempfile.mkdtemp(prefix="prun-before-")
    try:
        index = os.path.join(folder, "index")
        real = gitcmd.out(["rev-parse", "--path-format=absolute", "--git-path", "index"], target)
        if os.path.isfile(real):
            shutil.copyfile(real, index)    # its stat cache: only changed files are read again
        env = {**AUTHOR, "GIT_INDEX_FILE": index}
        gitcmd.git(["add", "-A"], target, env=env)
        tree = gitcmd.out(["write-tree"], target, env=env)
        head = gitcmd.git(["rev-parse", "--verify", "-q", "HEAD"], target, check=False)
        parent = ["-p", head.stdout.strip()] if head.returncode == 0 else []
        return gitcmd.out(["commit-tree", tree, *parent, "-m", "prun integrate: the tree before"],
                          target, env=env)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bisect(target: str, base: str, patches: Sequence[tuple[str, bytes]],
           check: str | Sequence[str], env: Mapping[str, str] | None, timeout: float, *,
           failing_log: str, culprit_dir: str, parallel: int) -> Bisection:
    """The culprits among ``patches`` ((packet, patch) in plan order, all applied together
    when the check failed with output ``failing_log``), tested on commit ``base`` of
    ``target``'s repository; their failing outputs kept in ``culprit_dir``."""
    started = time.monotonic()
    os.makedirs(culprit_dir, exist_ok=True)
    logs = tempfile.mkdtemp(prefix="bisect-", dir=culprit_dir)
    trials = _Trials(target, base, dict(patches), check, env, timeout, logs, max(1, parallel))
    try:
        ids = [pid for pid, _ in patches]
        found = trials.search_all(ids, _Trial(tuple(ids), True, False, failing_log))
        base_failed = False
        if found and not trials.any_passed:
            base_failed = trials.run([]).fails
        culprits = () if base_failed else tuple(_kept(c, culprit_dir) for c in found)
        return Bisection(culprits, trials.runs, time.monotonic() - started, base_failed)
    finally:
        trials.close()
        shutil.rmtree(logs, ignore_errors=True)


def _kept(c: Culprit, culprit_dir: str) -> Culprit:
    """``c`` with its failing output copied to ``<culprit_dir>/<packet>.log`` (each of its
    packets; the last one's path is returned)."""
    data = tail_bytes(c.log, LOG_MAX_BYTES)
    path = c.log
    for pid in c.packets:
        path = os.path.join(culprit_dir, f"{pid}.log")   # log_path's, in a run's folder
        atomic_write(path, data)
    return Culprit(c.packets, path)


@dataclass(frozen=True)
class _Trial:
    ids: tuple[str, ...]
    applied: bool                      # every patch of the set applied
    ok: bool
    log: str

    @property
    def fails(self) -> bool:
        return self.applied and not self.ok


class _Trials:
    """Check runs on sets of units, each in its own throwaway workspace, ``parallel`` at once."""

    def __init__(self, target: str, base: str, patches: dict[str, bytes],
                 check: str | Sequence[str], env: Mapping[str, str] | None, timeout: float,
                 logs: str, parallel: int):
        self.target, self.base, self.patches = target, base, patches
        self.rank = {pid: n for n, pid in enumerate(patches)}
        self.check, self.env, self.timeout, self.logs = check, env, timeout, logs
        self.objects = os.path.join(gitcmd.out(
            ["rev-parse", "--path-format=absolute", "--git-common-dir"], target), "objects")
        self.root = workspace.scratch_parent(workspace.default_root())
        self.pool = ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="prun-bisect")
        self.lock = threading.Lock()
        self.runs = 0
        self.any_passed = False

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def start(self, ids: Sequence[str]) -> Future[_Trial]:
        return self.pool.submit(self._trial, tuple(sorted(ids, key=self.rank.__getitem__)))

    def run(self, ids: Sequence[str]) -> _Trial:
        return self.start(ids).result()

    def search_all(self, ids: list[str], shown: _Trial) -> list[Culprit]:
        """Every culprit in ``ids``, whose check failed (``shown``): one search, then again on
        what is left once its culprits are held out, for as long as that still fails. (When
        both halves fail, each is searched alone; a pair split between them shows only once
        the units that fail alone are out.)"""
        found: list[Culprit] = []
        while ids:
            more = self.search(ids, shown)
            if not more:
                return found
            found += more
            held = {c.held for c in more}
            ids = [pid for pid in ids if pid not in held]
            shown = self.run(ids) if ids else shown
            if not shown.fails:
                return found
        return found

    def search(self, ids: list[str], shown: _Trial) -> list[Culprit]:
        """The culprits in ``ids``, whose check failed (``shown``)."""
        if len(ids) == 1:
            return [Culprit(shown.ids, shown.log)]
        left, right = ids[:len(ids) // 2], ids[len(ids) // 2:]
        tl, tr = _both(self.start(left), self.start(right))
        if tl.fails and tr.fails:
            a, b = _together(lambda: self.search(left, tl), lambda: self.search(right, tr))
            return a + b
        if tl.fails or tr.fails:
            return self.search(left, tl) if tl.fails else self.search(right, tr)
        if not (tl.applied and tr.applied):
            return []
        pair = self._pair(left, right, shown)
        return [pair] if pair else []

    def _pair(self, left: list[str], right: list[str], shown: _Trial) -> Culprit | None:
        """Two units, one of each side, that fail together (each side passes alone)."""
        one = self._narrow(left, right, shown)
        if one is None:
            return None
        other = self._narrow(right, [one[0]], one[1])
        if other is None:
            return None
        return Culprit(tuple(sorted((one[0], other[0]), key=self.rank.__getitem__)),
                       other[1].log)

    def _narrow(self, group: list[str], fixed: list[str],
                shown: _Trial) -> tuple[str, _Trial] | None:
        """One unit of ``group`` that fails the check with all of ``fixed`` (as the whole
        ``group`` does, ``shown``), and the run that showed it."""
        while len(group) > 1:
            a, b = group[:len(group) // 2], group[len(group) // 2:]
            ta, tb = _both(self.start(a + fixed), self.start(b + fixed))
            if ta.fails:
                group, shown = a, ta
            elif tb.fails:
                group, shown = b, tb
            else:
                return None
        return group[0], shown

    def _trial(self, ids: tuple[str, ...]) -> _Trial:
        with self.lock:
            self.runs += 1
            log = os.path.join(self.logs, f"{self.runs}.log")
        scratch = workspace.make_scratch(self.root, "bisect", parent_checked=True)
        try:
            tree = os.path.join(scratch, "tree")
            gitcmd.git(["init", "-q", tree])
            with open(os.path.join(tree, ".git", "objects", "info", "alternates"), "w") as f:
                f.write(self.objects + "\n")
            gitcmd.git(["-c", "checkout.workers=0", "checkout", "-q", "--detach", self.base],
                       tree)
            for pid in ids:
                done = workspace.neutral_git(tree, ["apply", "--binary", "-"],
                                             input=self.patches[pid], check=False)
                if done.returncode != 0:
                    return _Trial(ids, False, False, log)
            ran = run_bounded(self.check, tree, self.env, self.timeout, log)
        finally:
            workspace.remove(scratch)
        ok = not ran.timed_out and ran.exit_code == 0
        if ok:
            with self.lock:
                self.any_passed = True
        return _Trial(ids, True, ok, log)


def _both(a: Future[_Trial], b: Future[_Trial]) -> tuple[_Trial, _Trial]:
    return a.result(), b.result()


def _together(a: Callable[[], list[Culprit]],
              b: Callable[[], list[Culprit]]) -> tuple[list[Culprit], list[Culprit]]:
    """Two searches side by side (their check runs share the bounded pool)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="prun-bisect-half") as other:
        later = other.submit(b)
        return a(), later.result()
