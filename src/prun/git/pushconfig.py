"""What in a clone's own config could reach a remote: remotes, URL rewrites, upstreams, push
defaults and credential helpers (``push_config`` lists them, ``strip_push_config`` removes
them), so that nothing made from the clone can push anywhere."""

from __future__ import annotations

import os

from .._util import gitcmd

_PUSH_KEYS = ("remote.", "url.", "branch.", "push.", "credential.")


def strip_push_config(clone: str | os.PathLike[str]) -> list[str]:
    """Remove every remote, URL rewrite (``insteadOf``/``pushInsteadOf``), branch upstream,
    push default and credential helper from the clone's own config. Returns the keys removed."""
    listing = gitcmd.git(["config", "--local", "--null", "--list"], clone, check=False).stdout
    removed: list[str] = []
    for entry in filter(None, listing.split("\0")):
        key = entry.split("\n", 1)[0]
        if key.lower().startswith(_PUSH_KEYS) and key not in removed:
            gitcmd.git(["config", "--local", "--unset-all", key], clone, check=False)
            removed.append(key)
    return removed


def push_config(clone: str | os.PathLike[str]) -> list[str]:
    """Config entries (``key=value``) in the clone that name a remote or a push URL (should be
    none)."""
    listing = gitcmd.git(["config", "--local", "--null", "--list"], clone, check=False).stdout
    found = []
    for entry in filter(None, listing.split("\0")):
        key, _, value = entry.partition("\n")
        k = key.lower()
        if k.startswith("remote.") or k.endswith((".pushinsteadof", ".insteadof", ".pushurl")):
            found.append(f"{key}={value}")
    return found
