"""A unit's resource limits (``resources:`` ``memory``, ``pids``, ``cpus``): how each is held on
this machine (``enforcement``, what ``prun doctor`` prints), and the measuring the keeper does
where no cgroup of prun's own can hold them (``Watch``).

A cgroup v2 of the unit's own would hold its tree to them in the kernel; prun may make one
only inside a subtree delegated to it (a cgroup v2 it was started in whose
``cgroup.subtree_control`` it can write, not the root), and never writes into a hierarchy it
was not given (``delegated_cgroup``). Where it has none, the keeper (``keeper_process``) which
started each unit measures each limited unit's tree every ``INTERVAL_S``: the unit's monitor,
every process below it, the orphans of its session that came back to the keeper (its
subreaper), and the escapes the keeper holds for it; memory is their resident set summed
(RSS: pages shared between them counted once for each, so a tree is never under-counted), and
the processes are counted. Past a limit the keeper says so (``limit`` line: which, the peak,
how) and ends the unit's group: SIGTERM, the kill grace, SIGKILL. ``cpus`` can only be held
by a cgroup: without one it is refused at load unless ``--allow-unenforced``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._util.escapes import children
from .._util.sizes import format_size
from ..errors import UsageError

if TYPE_CHECKING:
    from ..plan import Packet

INTERVAL_S = 0.25            # the keeper measures each limited unit's tree this often
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_CGROUP_ROOT = "/sys/fs/cgroup"
LIMITS = ("memory", "pids", "cpus")


@dataclass(frozen=True)
class Enforcement:
    """How one limit is held on this machine: ``how`` is ``cgroup``, ``keeper`` or ``none``;
    ``detail`` says with what, or why not."""

    name: str
    how: str
    detail: str


@dataclass(frozen=True)
class Breach:
    """A limit a unit's tree passed: ``limit`` (memory or pids), the most seen, the limit."""

    limit: str
    peak: int
    max: int
    how: str = "keeper"


def verdict(breach: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """The verdict and error of a unit whose tree passed a limit (the keeper's ``limit`` line:
    which limit, the peak seen, the limit, how it was held), else None."""
    if not breach:
        return None
    name, peak, most = breach["limit"], int(breach["peak"]), int(breach["max"])
    seen = (f"{format_size(peak)} ({peak} bytes) over its {format_size(most)}" if name == "memory"
            else f"{peak} processes over its {most}")
    return (f"{name}-limit", f"resources.{name} passed: peak {seen}; enforced by "
            f"{breach.get('how', 'keeper')} (its tree measured every {INTERVAL_S:g} s), "
            "its process group ended")


def delegated_cgroup(proc_cgroup: str = "/proc/self/cgroup",
                     root: str = _CGROUP_ROOT) -> str | None:
    """The cgroup v2 directory this process was started in when it is delegated to it (not
    the root, its ``cgroup.subtree_control`` writable by it), else None. Only read."""
    try:
        with open(proc_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in lines if line.startswith("0::")), None)
    if not path or path == "/":
        return None
    for mount in (root, os.path.join(root, "unified")):
        where = os.path.join(mount, path.lstrip("/"))
        control = os.path.join(where, "cgroup.subtree_control")
        if os.path.isfile(os.path.join(mount, "cgroup.controllers")) \
                and os.access(control, os.W_OK):
            return where
    return None


def enforcement() -> tuple[Enforcement, ...]:
    """How ``memory``, ``pids`` and ``cpus`` are held here, one record each (``prun doctor``).

    prun does not yet make cgroups: a delegated cgroup v2 is detected and named, but every
    limit it could hold is measured by the keeper; ``cpus`` is held by nothing yet."""
    where = delegated_cgroup()
    seen = (f"a delegated cgroup v2 exists ({where}) but prun does not make cgroups yet"
            if where else "no cgroup v2 is delegated to prun")
    measured = (f"the keeper measures each unit's tree every {INTERVAL_S:g} s and ends it "
                f"past the limit ({seen})")
    return (Enforcement("memory", "keeper", f"RSS summed over the tree: {measured}"),
            Enforcement("pids", "keeper", f"processes counted: {measured}"),
            Enforcement("cpus", "none", f"only a cgroup can hold it: {seen}; refused at "
                                        "load unless --allow-unenforced"))


def cpus_held() -> bool:
    """Whether anything here holds a unit to its ``cpus`` (not until prun makes cgroups)."""
    return next(e for e in enforcement() if e.name == "cpus").how != "none"


def unenforced(packets: Iterable[Packet], allowed: bool) -> list[str]:
    """The packets whose ``resources.cpus`` nothing here holds; refused (``UsageError``, at
    the first one's field) unless ``allowed`` (``--allow-unenforced``)."""
    ids = [p for p in packets if p.resources.cpus is not None] if not cpus_held() else []
    if ids and not allowed:
        raise UsageError(f"{ids[0].where('resources')}: packet {ids[0].id!r} asks for "
                         f"resources.cpus {ids[0].resources.cpus:g}, which nothing here holds "
                         "(prun makes no cgroups yet)",
                         hint="remove cpus, or run with --allow-unenforced (recorded in the run)")
    return [p.id for p in ids]


def stat(pid: int) -> tuple[int, int] | None:
    """(session, resident bytes) of ``pid`` from ``/proc/<pid>/stat`` (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    try:
        return int(fields[3]), int(fields[21]) * _PAGE
    except (IndexError, ValueError):
        return None


def tree(roots: list[int]) -> tuple[int, int]:
    """(processes, resident bytes summed) of ``roots`` and every process below them."""
    seen: set[int] = set()
    todo, rss = list(roots), 0
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        got = stat(pid)
        if got is None:
            continue
        seen.add(pid)
        rss += got[1]
        todo.extend(children(pid))
    return len(seen), rss


@dataclass
class Watch:
    """One limited unit as the keeper watches it: its limits, the peaks seen."""

    memory: int | None
    pids: int | None
    peak_memory: int = 0
    peak_pids: int = 0
    breached: bool = False

    def measure(self, roots: list[int]) -> Breach | None:
        """Measure the tree of ``roots`` (the unit's leader first); the first limit passed."""
        count, rss = tree(roots)
        self.peak_pids, self.peak_memory = max(self.peak_pids, count), max(self.peak_memory, rss)
        if self.breached:
            return None
        breach = None
        if self.memory is not None and rss > self.memory:
            breach = Breach("memory", rss, self.memory)
        elif self.pids is not None and count > self.pids:
            breach = Breach("pids", count, self.pids)
        self.breached = breach is not None
        return breach
