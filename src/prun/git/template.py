"""Primed templates: a plan's ``workspace:`` (``prime``, ``key``, ``share``) run once per key,
its shared paths then given to every code unit copy-on-write.

* ``key_of``: the template's key, a hash of the prime command, the shared paths and each key
  file's content at the unit's base (its blob id, read from prun's object store).
* ``ensure``: the ready template of a key, primed when there is none: a clone of the base at
  ``<workspace root>/templates/<key>/ws`` (the path every unit's sandbox shows its workspace
  at), the prime run there like the plan's ``setup`` (``prun.git.setup``: bounded, in the
  sandbox). One caller primes a key (a ``flock`` on its folder: units of another key do not
  wait); a failed prime leaves no template (``PrimeFailed``, its log beside the run's
  workspaces, and later units of the run with that key fail at once).
* ``give``: the template's shared paths given to a fresh clone copy-on-write: where its unit
  runs in the sandbox and the kernel can (``overlay_here``), each shared folder is an overlay
  (``sandbox.Overlay``: the template's folder read-only below, the unit's own upper layer in
  ``<clone>.overlay/``) that the unit's sandbox mounts at the same path (``overlays_of``), in
  constant time and disk; elsewhere a copy (``cp --reflink=auto -a``: a reflink where the file
  system can, else a real copy). Never a symbolic or hard link to the template. Listed beside
  the clone (``untrusted.shared_list``: prun's reads leave them out of the unit's change) and
  in its ``info/exclude``.
* ``templates`` and ``remove``: what ``prun clean --templates`` lists and removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass

from .._util import gitcmd
from .._util.bounded import run
from .._util.fsutil import atomic_write, atomic_write_json, read_json
from ..attempt import overlay as overlays
from ..attempt.overlay import Overlay
from ..attempt.sandbox import OVERLAY_UNSAFE
from ..errors import PrimeFailed, WorkspaceError
from ..plan.model import Prime
from .clonefiles import NotRegular, append_inside
from .overlayview import merged, overlay_dir, overlay_of
from .setup import run_setup
from .store import discard, ensure_store, locked
from .untrusted import pattern, shared_list, shared_record
from .workspace import make_clone

FOLDER = "templates"          # under the workspace root
TREE = "ws"                   # the clone the prime ran in
STORES = "stores"             # the object store its clone borrows from (prun.git.store)
READY = "template.json"       # written last: the template may be used
LOG = "prime.log"             # the output of the prime that made it
COPY_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Template:
    """A primed template: its key, its folder, the clone the prime ran in (the path a unit's
    sandbox shows its workspace at), the prime, the shared paths, when it was primed and the
    base it was primed at."""

    key: str
    folder: str
    tree: str
    prime: str
    share: tuple[str, ...]
    created: float
    base: str

    def line(self) -> str:
        return f"TEMPLATE {self.key[:12]} share={','.join(self.share)} at={self.tree}"


def folder_of(root: str) -> str:
    """Where templates live: ``<workspace root>/templates``."""
    return os.path.join(root, FOLDER)


def key_of(prime: Prime, objects: str, commit: str) -> str:
    """The key of ``prime`` at ``commit`` (read in ``objects``, a repository or store holding
    it): its command, its shared paths and each key file's blob id (``-`` when absent)."""
    h = hashlib.sha256(json.dumps([prime.command, list(prime.share)]).encode())
    for path in prime.key:
        blob = gitcmd.git(["rev-parse", "--verify", "--quiet", f"{commit}:{path}"], objects,
                          check=False).stdout.strip()
        h.update(f"{path}\0{blob or '-'}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def ensure(prime: Prime, *, root: str, repo_root: str, base: str, store: str | None,
           env: Mapping[str, str], sandbox: bool, logs: str) -> Template:
    """The ready template of ``prime`` at ``base`` (a commit of ``store``, default
    ``repo_root``), primed now when there is none. ``logs``: the run's folder of workspaces,
    where a prime's log goes (``prime-<key>.log``). Raises ``PrimeFailed``."""
    key = key_of(prime, store or repo_root, base)
    short = key[:16]
    log = os.path.join(logs, f"prime-{short}.log")
    failed = log + ".failed"
    folder = os.path.join(folder_of(root), short)
    found = _ready(folder, key)
    if found is not None:
        return found
    _failed_before(key, failed, log)
    os.makedirs(folder, exist_ok=True)
    with locked(folder):
        found = _ready(folder, key)
        if found is not None:
            return found
        _failed_before(key, failed, log)
        try:
            return _prime(prime, key, folder, repo_root=repo_root, base=base, store=store,
                          env=env, sandbox=sandbox, log=log)
        except PrimeFailed as e:
            atomic_write(failed, e.why, durable=False)
            _empty(folder)
            raise


def _failed_before(key: str, failed: str, log: str) -> None:
    """Raise the failure of this key's prime earlier in the run, if there was one."""
    try:
        with open(failed, encoding="utf-8") as f:
            why = f.read().strip()
    except OSError:
        return
    raise PrimeFailed(key, why or "failed", log=log)


def _prime(prime: Prime, key: str, folder: str, *, repo_root: str, base: str,
           store: str | None, env: Mapping[str, str], sandbox: bool, log: str) -> Template:
    _empty(folder)
    objects = store or repo_root
    tracked = gitcmd.git(["ls-tree", "-r", "--name-only", base, "--", *prime.share],
                         objects).stdout.split()
    os.makedirs(os.path.dirname(log), exist_ok=True)
    if tracked:
        atomic_write(log, f"tracked at the base, cannot be shared: {tracked[0]}\n", durable=False)
        raise PrimeFailed(key, f"shares a tracked path: {tracked[0]}", log=log)
    tree = os.path.join(folder, TREE)
    try:
        # its own store in a folder of its own (the template's folder is locked while it primes)
        objects_from = store or ensure_store(os.path.join(folder, STORES), repo_root, base)
        make_clone(repo_root, base, tree, store=objects_from, neutral=store is not None)
    except WorkspaceError as e:
        atomic_write(log, e.line() + "\n", durable=False)
        raise PrimeFailed(key, "could not make its template workspace", log=log) from None
    done = run_setup(tree, prime.command, env, log_path=log, check=False, sandbox=sandbox,
                     read_only=[p for p in (repo_root, store) if p], base=base,
                     exclude_new=False)   # the template is never read as a change
    if not done.ok:
        why = "timed out" if done.timed_out else f"exited with code {done.exit_code}"
        last = (done.tail.strip().splitlines()[-1:] or [""])[0]
        raise PrimeFailed(key, f"{why}: {last}".rstrip(": "), log=log)
    missing = [p for p in prime.share if not os.path.lexists(os.path.join(tree, p))]
    if missing:
        raise PrimeFailed(key, f"made no {missing[0]}", log=log)
    os.replace(log, os.path.join(folder, LOG))   # kept with the template, not the run
    created = time.time()
    atomic_write_json(os.path.join(folder, READY),
                      {"key": key, "prime": prime.command, "share": list(prime.share),
                       "created": created, "base": base, "tree": tree}, durable=False)
    return Template(key, folder, tree, prime.command, prime.share, created, base)


def _ready(folder: str, key: str | None = None) -> Template | None:
    """The template in ``folder`` when its prime finished (and its key is ``key``)."""
    try:
        info = read_json(os.path.join(folder, READY), limit=64 * 1024)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or (key is not None and info.get("key") != key):
        return None
    return Template(str(info["key"]), folder, str(info["tree"]), str(info["prime"]),
                    tuple(info["share"]), float(info["created"]), str(info["base"]))


def overlay_here(root: str, env: Mapping[str, str], *, sandbox: bool) -> bool:
    """Whether a clone under ``root`` (the workspace root) gets its shared folders as overlays:
    its unit runs in the sandbox, ``PRUN_OVERLAY`` is not ``off`` and the kernel mounts an
    unprivileged overlay there (probed once per process; said once when it cannot)."""
    return overlays.overlay_here(root, env, sandbox=sandbox,
                                 instead="shared paths are copied into each unit")


def give(template: Template, clone: str, *, overlay: bool = False) -> None:
    """Give the fresh ``clone`` the template's shared paths as its own (a unit's write there
    changes nothing else), and leave them out of its change. With ``overlay`` each shared
    folder is an empty mount point in the clone and an upper layer in ``<clone>.overlay/``
    (its unit's sandbox mounts the overlay, ``overlays_of``); a shared file, or a path an
    overlay cannot name, is copied."""
    with merged(clone) as view:   # an overlay workspace: written through its merged view
        layers = _give(template, clone, view.path, overlay)
        atomic_write_json(shared_list(clone), {"key": template.key, "at": template.tree,
                                               "paths": list(template.share),
                                               "overlays": layers}, durable=False)
        try:
            append_inside(os.path.join(view.path, ".git"), "info/exclude",
                          "# shared from prun's primed template\n"
                          + "".join("/" + pattern(p) + "\n" for p in template.share))
        except NotRegular:
            pass   # prun's own list beside the clone still leaves them out


def _give(template: Template, clone: str, seen: str, overlay: bool) -> list[list[str]]:
    """Each shared path made in the clone (``seen``: where prun writes it), as a mount point
    of an overlay or as a copy; the overlays, as ``overlays_of`` reads them."""
    layers: list[list[str]] = []
    for n, path in enumerate(template.share):
        src, dest = os.path.join(template.tree, path), os.path.join(seen, path)
        _no_link_on_the_way(seen, path, "the unit's clone")
        _no_link_on_the_way(template.tree, path, "the template")
        if os.path.lexists(dest):
            raise WorkspaceError(f"{os.path.join(clone, path)} exists in a fresh clone: it is "
                                 "tracked at its base",
                                 hint="share only untracked paths (workspace.share)")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if overlay and _overlayable(src, os.path.join(clone, path)):
            upper, work = (os.path.join(overlay_dir(clone), str(n), d) for d in ("upper", "work"))
            for d in (upper, work, dest):
                os.makedirs(d)
            layers.append([os.path.realpath(src), upper, work, path])
            continue
        _copy(template, path, src, dest)
    return layers


def _no_link_on_the_way(top: str, path: str, what: str) -> None:
    """Refuse a shared ``path`` whose folders under ``top`` hold a link or a non-folder (a
    tracked link ``frontend -> /elsewhere`` would send ``frontend/node_modules`` out of it)."""
    at = top
    for part in path.split("/")[:-1]:
        at = os.path.join(at, part)
        try:
            mode = os.lstat(at).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            raise WorkspaceError(f"shared path {path}: {at} in {what} is not a folder (a link?)",
                                 hint="share only paths whose folders are plain folders at the "
                                 "base (workspace.share)")


def _overlayable(src: str, dest: str) -> bool:
    return (os.path.isdir(src) and not os.path.islink(src)
            and not any(c in p for p in (os.path.realpath(src), dest) for c in OVERLAY_UNSAFE))


def _copy(template: Template, path: str, src: str, dest: str) -> None:
    done = run(["cp", "--reflink=auto", "-a", "--no-target-directory", src, dest],
               timeout=COPY_TIMEOUT_S)
    if done.returncode != 0:
        err = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise WorkspaceError(f"could not copy {path} from template {template.key[:12]}: "
                             f"{err[-1] if err else 'timed out'}",
                             hint="check the disk is not full")


def overlays_of(clone: str) -> tuple[Overlay, ...]:
    """The overlays a clone's sandbox mounts, in order: an overlay workspace's own
    (``prun.git.layered``), then its shared folders' (none when they were copied), read from
    prun's records beside it (never from the clone)."""
    entries = shared_record(clone).get("overlays")
    own = overlay_of(clone)
    out = [own] if own else []
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, list) and len(entry) == 4 and all(isinstance(e, str) for e in entry):
            lower, upper, work, path = entry
            out.append(Overlay(lower, upper, work, os.path.join(os.path.abspath(clone), path)))
    return tuple(out)


def primed_at(clone: str) -> str | None:
    """Where the template a clone was given from was primed (a follow-up in the same clone
    is shown its workspace there too), or None."""
    at = shared_record(clone).get("at")
    return at if isinstance(at, str) else None


def templates(root: str) -> list[Template]:
    """Every ready template under the workspace root, oldest first."""
    found = [t for t in map(_ready, _folders(root)) if t is not None]
    return sorted(found, key=lambda t: t.created)


def leftovers(root: str) -> list[str]:
    """Folders under ``templates`` holding no ready template (a failed or broken prime)."""
    return [p for p in _folders(root)
            if os.path.isdir(p) and not os.path.islink(p) and _ready(p) is None]


def _folders(root: str) -> list[str]:
    """The entries of the workspace root's ``templates`` folder, by name (none when absent)."""
    base = folder_of(root)
    try:
        return [os.path.join(base, n) for n in sorted(os.listdir(base))]
    except OSError:
        return []


def remove(folder: str) -> None:
    """Delete a template's folder (its clone and store are read-only in places)."""
    with locked(folder):
        _empty(folder)
    os.rmdir(folder)


def _empty(folder: str) -> None:
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            discard(path)
        else:
            os.unlink(path)


__all__ = ["Template", "ensure", "folder_of", "give", "key_of", "leftovers",
           "overlay_here", "overlays_of", "primed_at", "remove", "templates"]
