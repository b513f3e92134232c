"""Install, inspect and remove the skill where each coordinating CLI discovers skills.

| target | project (`--project DIR`, default the repository root) | user (`--user`) |
|---|---|---|
| claude (Claude Code) | `DIR/.claude/skills/prun/` | `~/.claude/skills/prun/` |
| gemini (Gemini CLI) | `DIR/.gemini/skills/prun/` | `~/.gemini/skills/prun/` |
| agy (Antigravity) | `DIR/.agents/skills/prun/` | `~/.gemini/config/skills/prun/` |

An installed copy holds a manifest, ``.prun-skill.json``: prun's version, the bundle's digest
and the SHA-256 of every file written. From it an installed copy is

- ``current``: its files are the ones written, and they are the skill this prun ships;
- ``outdated``: its files are the ones written, by another prun (a plain install updates it);
- ``edited``: a file was changed, removed or added since (never overwritten without force);
- ``foreign``: a ``prun`` folder with no manifest (someone else's copy; the same);
- ``absent``: nothing there.

An install builds the new folder beside the old one and swaps the two with renames, so a CLI
never reads half a skill, and a failure leaves the old copy as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from .._util.gitcmd import toplevel
from ..errors import UsageError
from . import bundle

MANIFEST = ".prun-skill.json"
TARGETS = ("claude", "gemini", "agy")
# Where each CLI looks for skills: in a project, and in the user's home.
PROJECT_DIRS = {"claude": ".claude/skills", "gemini": ".gemini/skills", "agy": ".agents/skills"}
USER_DIRS = {"claude": ".claude/skills", "gemini": ".gemini/skills",
             "agy": ".gemini/config/skills"}

ABSENT, CURRENT, OUTDATED, EDITED, FOREIGN = "absent", "current", "outdated", "edited", "foreign"


@dataclass(frozen=True)
class Location:
    """Where one target's copy of the skill goes: ``path`` is the skill's own folder."""

    target: str
    scope: str  # "project" or "user"
    path: Path


@dataclass
class State:
    """What is installed at a location, compared with what this prun ships."""

    location: Location
    state: str
    changed: list[str] = field(default_factory=list)  # edited: the files that differ
    version: str | None = None  # the prun that installed it

    def as_dict(self) -> dict[str, Any]:
        return {"for": self.location.target, "scope": self.location.scope,
                "path": str(self.location.path), "state": self.state,
                "changed": self.changed, "version": self.version}


@dataclass(frozen=True)
class Shipped:
    """The skill this prun ships: its files, their hashes and the bundle's digest."""

    contents: dict[str, bytes]
    hashes: dict[str, str]
    digest: str

    @classmethod
    def load(cls) -> Shipped:
        contents = bundle.files()
        file_hashes = bundle.hashes(contents)
        return cls(contents, file_hashes, bundle.bundle_digest(file_hashes))


def check_target(target: str) -> str:
    if target not in TARGETS:
        raise UsageError(f"unknown target {target!r}", hint=f"choose one of {', '.join(TARGETS)}")
    return target


def default_project(cwd: str | os.PathLike[str] | None = None) -> Path:
    """The repository holding ``cwd`` (default: the current folder)."""
    top = toplevel(cwd)
    if top is None:
        raise UsageError("this folder is not inside a git repository",
                         hint="give --project DIR, or --user for your home folder")
    return Path(top)


def location(target: str, *, user: bool = False, project: str | os.PathLike[str] | None = None,
             home: Path | None = None) -> Location:
    """The location of ``target``'s copy: the user's (``user``), else the project's
    (``project``, default the repository root)."""
    check_target(target)
    if user:
        base = home if home is not None else Path.home()
        return Location(target, "user", base / USER_DIRS[target] / bundle.NAME)
    if project is None:
        root = default_project()
    else:
        root = Path(project).expanduser().resolve()
        if not root.is_dir():
            raise UsageError(f"--project {project}: not a folder", hint="give an existing folder")
    return Location(target, "project", root / PROJECT_DIRS[target] / bundle.NAME)


def locations(*, project: Path | None, home: Path | None = None,
              targets: tuple[str, ...] = TARGETS) -> list[Location]:
    """Every location ``prun skill show`` looks at: each target's project copy (when there is
    a project) and user copy."""
    out: list[Location] = []
    for target in targets:
        if project is not None:
            out.append(location(target, project=project))
        out.append(location(target, user=True, home=home))
    return out


def _read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return None
    return data


def _present(path: Path) -> dict[str, str]:
    """Path -> hash of every file in an installed folder, the manifest left out."""
    found = bundle.hashes(bundle.files(path))
    found.pop(MANIFEST, None)
    return found


def inspect(loc: Location, shipped: Shipped | None = None) -> State:
    """The state of the copy at ``loc``."""
    path = loc.path
    if not os.path.lexists(path):
        return State(loc, ABSENT)
    if path.is_symlink() or not path.is_dir():
        return State(loc, FOREIGN)
    manifest = _read_manifest(path)
    if manifest is None:
        return State(loc, FOREIGN)
    version = manifest.get("prun") if isinstance(manifest.get("prun"), str) else None
    recorded: dict[str, Any] = manifest["files"]
    present = _present(path)
    changed = sorted(rel for rel in set(recorded) | set(present)
                     if recorded.get(rel) != present.get(rel))
    if changed:
        return State(loc, EDITED, changed, version)
    shipped = shipped or Shipped.load()
    state = CURRENT if manifest.get("bundle") == shipped.digest else OUTDATED
    return State(loc, state, [], version)


def _write_tree(dest: Path, shipped: Shipped, target: str) -> None:
    for rel, data in shipped.contents.items():
        file = dest.joinpath(*rel.split("/"))
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(data)
        if bundle.is_executable(rel):
            mode = file.stat().st_mode
            file.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    manifest = {"skill": bundle.NAME, "prun": __version__, "for": target,
                "bundle": shipped.digest, "files": shipped.hashes}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n",
                                 encoding="utf-8")


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _refusal(st: State, verb: str) -> UsageError:
    where = st.location.path
    if st.state == FOREIGN:
        what = f"{where} holds a prun skill that prun did not install (no {MANIFEST})"
    else:
        shown = ", ".join(st.changed[:5]) + (" ..." if len(st.changed) > 5 else "")
        what = f"the skill at {where} was edited since it was installed ({shown})"
    return UsageError(what, hint=f"keep your copy, or pass --force to {verb} it")


def install(loc: Location, *, force: bool = False,
            shipped: Shipped | None = None) -> tuple[str, State]:
    """Write the shipped skill at ``loc``. Returns what was done (``installed``,
    ``unchanged``, ``updated`` from an outdated copy, ``replaced`` an edited or foreign one
    with ``force``) and the state before."""
    shipped = shipped or Shipped.load()
    before = inspect(loc, shipped)
    if before.state == CURRENT:
        return "unchanged", before
    if before.state in (EDITED, FOREIGN) and not force:
        raise _refusal(before, "overwrite")
    dest = loc.path
    parent = dest.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot make {parent}: {e.strerror or e}",
                         hint="choose another --project, or check the folder's permissions")
    tag = uuid.uuid4().hex[:8]
    new = parent / f".{bundle.NAME}.new-{tag}"
    old = parent / f".{bundle.NAME}.old-{tag}"
    try:
        _write_tree(new, shipped, loc.target)
        if os.path.lexists(dest):
            os.replace(dest, old)
        try:
            os.replace(new, dest)
        except BaseException:
            if os.path.lexists(old):
                os.replace(old, dest)
            raise
    finally:
        for leftover in (new, old):
            if os.path.lexists(leftover):
                _remove(leftover)
    action = {ABSENT: "installed", OUTDATED: "updated"}.get(before.state, "replaced")
    return action, before


def uninstall(loc: Location, *, force: bool = False,
              shipped: Shipped | None = None) -> tuple[str, State]:
    """Remove the skill at ``loc``: ``removed`` or ``absent``, and the state before. An edited
    or foreign copy is removed only with ``force``."""
    before = inspect(loc, shipped)
    if before.state == ABSENT:
        return "absent", before
    if before.state in (EDITED, FOREIGN) and not force:
        raise _refusal(before, "remove")
    _remove(loc.path)
    return "removed", before


def summary(states: list[State]) -> Mapping[str, int]:
    """Counts of the installed copies by state."""
    counts = {CURRENT: 0, OUTDATED: 0, EDITED: 0, FOREIGN: 0}
    for st in states:
        if st.state in counts:
            counts[st.state] += 1
    return counts
