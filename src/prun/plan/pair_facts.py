"""What the independence test (``prun.plan.independence``) reads about a plan, worked out once:
the ``after`` ancestry, each code packet's base resolved with git, the shared declarations
and what each packet may write (with the lockfiles its manifests regenerate).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from .._util import gitcmd
from .._util.worktree import WORKTREE, worktree_commit
from ..errors import PrunError, UsageError
from . import globs
from .model import Packet, Plan

HEAD = "HEAD"

# Manifests and the lockfiles their tools rewrite next to them.
LOCKFILES: dict[str, tuple[str, ...]] = {
    "package.json": ("package-lock.json", "yarn.lock", "pnpm-lock.yaml", "npm-shrinkwrap.json",
                     "bun.lockb"),
    "pyproject.toml": ("uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock"),
    "Pipfile": ("Pipfile.lock",),
    "Cargo.toml": ("Cargo.lock",),
    "go.mod": ("go.sum",),
    "Gemfile": ("Gemfile.lock",),
    "composer.json": ("composer.lock",),
    "mix.exs": ("mix.lock",),
    "pubspec.yaml": ("pubspec.lock",),
    "Package.swift": ("Package.resolved",),
    "flake.nix": ("flake.lock",),
}


def ancestors(plan: Plan) -> dict[str, set[str]]:
    """For each packet id, every packet it comes after, directly or through a chain."""
    direct = {p.id: p.after for p in plan.packets}
    out: dict[str, set[str]] = {}
    for p in plan.packets:
        # Depth first without recursion (a chain may be thousands of packets long); a packet's
        # set is made when all of its own dependencies have theirs.
        stack = [(p.id, iter(direct[p.id]))]
        on_path = {p.id}
        while stack:
            pid, deps = stack[-1]
            for dep in deps:
                if dep in direct and dep not in out and dep not in on_path:
                    stack.append((dep, iter(direct[dep])))   # cycles are refused by the loader
                    on_path.add(dep)
                    break
            else:
                stack.pop()
                on_path.discard(pid)
                acc: set[str] = set()
                for dep in direct[pid]:
                    acc.add(dep)
                    acc |= out.get(dep, set())
                out[pid] = acc
    return out


@dataclass(frozen=True)
class Write:
    glob: str
    how: str            # "owns", "generates", "integration owner", "lockfile of X", ...
    implied: bool = False
    field: str = "owns"  # the packet field it comes from


def writes(packet: Packet, owner_of: Iterable[str] = (),
           root: str | os.PathLike[str] | None = None) -> list[Write]:
    """What ``packet`` may write, each glob with the reason it counts; ``owner_of`` are the
    shared paths it is the integration owner of. A dotted name that is an existing folder
    under ``root`` (``conf.d``) counts as that whole folder."""
    out = [Write(globs.resolve_folder(g, root), "owns") for g in packet.owns]
    out += [Write(globs.resolve_folder(g, root), "generates", field="generates")
            for g in packet.generates]
    out += [Write(globs.resolve_folder(s, root), "is the integration owner of", field="shared")
            for s in owner_of]
    if packet.writes_code and not out:
        out.append(Write("**", "declares no owns, so may write"))
    implied: list[Write] = []
    for w in out:
        norm = globs.normalize(w.glob)
        head, _, name = norm.rpartition("/")
        for lock in LOCKFILES.get(name, ()):
            implied.append(Write(f"{head}/{lock}" if head else lock,
                                  f"regenerates (with {norm})", implied=True,
                                  field=w.field))
    return out + implied


def _shared(plan: Plan) -> list[tuple[str, str, str]]:
    """Every shared declaration: (path, integration owner, declared by)."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str, str]] = []
    for p in plan.packets:
        for path, owner in p.shared.items():
            key = (globs.normalize(path), owner)
            if key not in seen:
                seen.add(key)
                out.append((globs.normalize(path), owner, p.id))
    return out


@dataclass
class Facts:
    """What the rules read about a plan, worked out once: its packets in plan order, the
    ``after`` ancestry, each code packet's resolved base, the shared declarations (in plan
    order, by declaring packet and by integration owner) and what each packet may write."""

    plan: Plan
    packets: list[Packet]
    before: dict[str, set[str]]
    bases: dict[str, str | None]
    shared: list[tuple[str, str, str]]                   # (path, owner, declared by)
    declared: dict[str, list[tuple[str, str]]]           # declared by -> (path, owner)
    owned: dict[str, list[tuple[int, str, str]]]         # owner -> (index in shared, path, owner)
    writes: dict[str, list[Write]]

    def linked(self, a: Packet, b: Packet) -> bool:
        """Are ``a`` and ``b`` a sequence (one comes after the other)?"""
        return a.id in self.before[b.id] or b.id in self.before[a.id]


def facts(plan: Plan, *, repo: str | os.PathLike[str] | None = None,
          use_git: bool = True) -> Facts:
    """The ``Facts`` of ``plan``; bases are resolved with git in ``repo`` (default: the plan's
    repository) unless ``use_git`` is false. Raises ``UsageError`` for a base that is not a
    commit."""
    packets = list(plan.packets)
    shared = _shared(plan)
    git_root = gitcmd.toplevel(repo if repo is not None else plan.root) if use_git else None
    resolved: dict[str, str] = {}
    bases = {p.id: _resolve(plan, p, git_root, resolved) for p in packets if p.writes_code}
    root = git_root or (repo if repo is not None else plan.root)
    declared: dict[str, list[tuple[str, str]]] = {}
    owned: dict[str, list[tuple[int, str, str]]] = {}
    for k, (path, owner, by) in enumerate(shared):
        declared.setdefault(by, []).append((path, owner))
        owned.setdefault(owner, []).append((k, path, owner))
    wr = {p.id: writes(p, [s for _k, s, _o in owned.get(p.id, ())], root) for p in packets}
    return Facts(plan, packets, ancestors(plan), bases, shared, declared, owned, wr)


# bases, resolved with git ----------------------------------------------------------------------

def _resolve(plan: Plan, p: Packet, git_root: str | None, cache: dict[str, str]) -> str | None:
    """The commit ``p`` starts from, resolved in ``git_root`` (its base as written when there
    is no repository); ``cache``: revisions resolved so far."""
    rev = plan.base_of(p)
    if git_root is None:
        return rev
    name = rev or HEAD
    if name in cache:
        return cache[name]
    if name == WORKTREE:    # the working tree as it is, uncommitted changes included
        cache[name] = worktree_commit(git_root)
        return cache[name]
    try:
        out = gitcmd.git(["rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"], git_root,
                         check=False, timeout=30)
    except PrunError as e:
        raise UsageError(f"cannot run git to resolve base {name!r}: {e.message}",
                         hint="install git, or run prun check outside a repository")
    sha = str(out.stdout).strip()
    if out.returncode != 0 or not sha:
        where = p.where("base") if p.base else plan.where("base")
        raise UsageError(f"{where}: base {name!r} of packet {p.id!r} is not a commit in "
                         f"{git_root}", hint="give a commit id, tag or branch that exists "
                         "(git log --oneline shows them)")
    cache[name] = sha
    return sha
