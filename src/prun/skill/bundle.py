"""The files of the skill prun ships: ``SKILL.md``, the reference files it links and the
seed's ``scripts/``.

One source of truth: ``skills/prun/`` in the repository. A wheel carries a copy of it as
``prun/skill/files/``, made at build time (``build_skill.py`` at the repository's root); a
source checkout or an editable install reads ``skills/prun/`` itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from ..errors import StateError

NAME = "prun"
# The packaged copy's folder, beside this module (see build_skill.py).
PACKAGED = "files"
_SKIP_DIRS = frozenset({"__pycache__"})
_SKIP_SUFFIXES = (".pyc", ".pyo")
# Installed with their executable bits (the seed's shell and Python scripts).
EXECUTABLE_SUFFIXES = (".sh", ".py")


def root() -> Path:
    """The folder holding the shipped skill (its ``SKILL.md`` at the top)."""
    here = Path(__file__).resolve().parent
    packaged = here / PACKAGED
    if (packaged / "SKILL.md").is_file():
        return packaged
    checkout = here.parents[2] / "skills" / NAME  # src/prun/skill -> the repository
    if (checkout / "SKILL.md").is_file():
        return checkout
    raise StateError(f"the skill's files are not where prun keeps them ({packaged}, {checkout})",
                     hint="reinstall prun-agents: pip install --force-reinstall prun-agents")


def files(base: Path | None = None) -> dict[str, bytes]:
    """Every file of the skill: its path relative to the skill's folder (``/`` separated) ->
    its bytes, in path order. Byte-code caches are left out."""
    top = base if base is not None else root()
    out: dict[str, bytes] = {}
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(top)
        if not path.is_file() or _SKIP_DIRS.intersection(rel.parts) \
                or path.name.endswith(_SKIP_SUFFIXES):
            continue
        out[rel.as_posix()] = path.read_bytes()
    return out


def digest(content: bytes) -> str:
    """The SHA-256 of one file, in hex."""
    return hashlib.sha256(content).hexdigest()


def hashes(contents: Mapping[str, bytes]) -> dict[str, str]:
    """Path -> SHA-256 of each file."""
    return {rel: digest(data) for rel, data in sorted(contents.items())}


def bundle_digest(file_hashes: Mapping[str, str]) -> str:
    """One SHA-256 for a whole set of files: their paths and hashes, in path order."""
    h = hashlib.sha256()
    for rel, value in sorted(file_hashes.items()):
        h.update(f"{rel}\0{value}\n".encode())
    return h.hexdigest()


def is_executable(rel: str) -> bool:
    """Whether an installed file gets its executable bits (the scripts)."""
    return rel.startswith("scripts/") and rel.endswith(EXECUTABLE_SUFFIXES)
