"""The sandbox: a unit's whole process tree run by bubblewrap (``bwrap``) under a read-only view
of the file system in which only the unit's own places are writable, in a PID namespace of its
own.

``wrap(argv, writable=..., read_only=..., hidden=..., tmp=..., covers=...)`` returns the argv
that does it; ``unavailable()`` says why it cannot be done here (None when it can).

Enforced (Linux, bwrap; as root too):

- The whole file system is a read-only mount (``--ro-bind / /``), with a fresh ``/dev`` (null,
  zero, random, a tty and a private ``/dev/shm``; no disk or other device of the machine) and,
  where one can be mounted, a fresh ``/proc``. Writing, creating, deleting, renaming or changing
  the mode of anything fails with EROFS, except:
- every path in ``writable``, and ``tmp``, mounted over ``/tmp`` and ``/var/tmp`` (the unit's
  own temporary folder: the machine's ``/tmp`` is not seen at all);
- every path in ``hidden`` is an empty, read-only folder (a tmpfs), so what it holds cannot be
  read, except what a deeper path of the lists binds back into it (the unit's own workspace
  inside the folder of every workspace);
- every path in ``read_only`` is a read-only mount, also inside a writable or hidden one, and
  so is what runs prun's own code there (``prun_runtime``: the interpreter's installation and
  this package's folder, also when they lie under ``/tmp``);
- ``alias`` ``(source, destination)``: ``source`` (the unit's workspace) is also writable at
  ``destination`` (where its primed template was primed, ``prun.git.template``), and the
  process starts there;
- each ``(lower, upper, work, target)`` of ``overlays`` (an overlay workspace,
  ``prun.git.layered``, then a primed template's shared folder,
  ``prun.attempt.overlay``, ``prun.git.template``) is an overlay mounted at its ``target``
  before bwrap starts: ``lower`` read-only below, the unit's own ``upper`` above, so a write
  there lands in ``upper`` only. prun mounts it itself
  (bubblewrap 0.8 has no ``--overlay``) in a user and mount namespace of the unit's own
  (``unshare -Urm``: unprivileged overlayfs, Linux 5.11+, ``userxattr``); bwrap then runs in
  a user namespace of its own, as the person's uid and gid, with every capability dropped, so
  nothing inside can unmount or remount what it sees (``prun.attempt.overlay`` says whether
  that can be done here);
- every ``(source, destination)`` of ``covers`` is ``source`` mounted read-only over
  ``destination``, last (a refusing stub over a program, a marker file in ``/dev``); a
  destination the unit could not see anyway is skipped.
  Mounts are applied shallow-to-deep, so the deeper path decides; paths are resolved (symbolic
  links followed) first; a path given in both lists is read-only; a path that does not exist is
  skipped.
- Root ignores file modes, so only a mount stops root; as root the capabilities that could undo
  a mount or go around it are dropped (``CAP_SYS_ADMIN``: mount, umount, remount, setns,
  unshare; ``CAP_DAC_READ_SEARCH``: ``open_by_handle_at`` through a writable mount of the same
  file system; ``CAP_SYS_MODULE``, ``CAP_SYS_RAWIO``, ``CAP_MKNOD``). bwrap also sets
  no-new-privileges: a setuid program gains nothing inside.
- Every process inside ends when the unit's main process ends (``--unshare-pid``: bwrap's own
  init is PID 1 inside, the main process PID 2; when PID 2 exits, init tells bwrap its code and
  bwrap exits with it; init, which would wait for every process left inside, dies with bwrap
  (``--die-with-parent``), and with init the kernel kills whatever is left in the namespace:
  ``setsid`` children, double-forked daemons, processes that ignore SIGTERM). ``ps`` inside
  sees only the unit's processes when a fresh ``/proc`` could be mounted here (it can as
  root).
- Ending a unit works as without a sandbox: SIGTERM to the group reaches the main process (and
  whatever stayed in its group) and bwrap lets it finish in its own time; SIGKILL to the group
  ends everything inside at once. (bwrap would die of SIGTERM at once and, dying, kill the
  namespace before the main process could handle it; so bwrap runs with SIGTERM ignored, and
  the main process gets it back at its default through ``env --default-signal=TERM``, GNU
  coreutils 8.31 or later.)
- ``--die-with-parent``: when the process that started bwrap dies (even by SIGKILL), everything
  inside is killed. A sandboxed worker does not outlive the process that spawned it: a
  standalone dispatcher, a cluster worker's unit runner, and for a run's unit its monitor
  (``attempt.monitor``), which outlives the run's keeper and supervisor and ends only after
  bwrap has (or with SIGKILL to the unit's group).

Exit codes, as the parent of bwrap sees them: the main process's exit code N gives N; its death
by signal N gives 128+N (an ordinary exit of bwrap: the same number prun reports for an
unsandboxed death by signal N); SIGKILL to the group kills bwrap itself (128+9 as prun reports
it); bwrap's own failure to set up (a mount refused) is exit 1 with one ``bwrap: ...`` line on
stderr.

Not enforced, by design or by limit:

- Reading: whatever the user can read outside ``hidden`` stays readable (the home folder, where
  interpreters and tools are often installed, included). The network is as the user has it;
  other users' processes can be signalled where the user could (outside the PID namespace they
  cannot be named by PID). Nothing but the PID and mount namespaces is unshared (and, with
  ``overlays``, the user namespace).
- A folder *above* a writable path's mount can be renamed only where it is itself writable.
- Where a fresh ``/proc`` cannot be mounted, ``/proc/<pid>/root`` of any process outside leads
  to the machine's file system as that process sees it (read-only is the mount's, not the
  path's), and ``ps`` sees every process of the machine.
- A path that does not exist when the unit starts is skipped: it cannot be bind-mounted. For a
  file that is to be written later (a result file), pass its folder.

It is a wall that holds against a unit's own writes, not a security boundary against a program
that attacks the kernel: that needs more namespaces and seccomp, which agents could not work in.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence

from ..errors import UsageError

PROBE_TIMEOUT_S = 10.0
# As root, the capabilities that could undo a read-only mount or go around it.
ROOT_CAPS_DROPPED = ("CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
                     "CAP_MKNOD")
TMP_FOLDERS = ("/tmp", "/var/tmp")   # where a unit's own ``tmp`` is mounted
OVERLAY_UNSAFE = ",:\\\n"    # characters an overlay's mount options cannot carry
# Mounts each overlay (4 arguments: lower, upper, work, target) with mount(8) ($1), then execs
# the rest.
_MOUNT_OVERLAYS = ('m=$1; n=$2; shift 2; while [ "$n" -gt 0 ]; do "$m" -t overlay overlay -o '
                   '"lowerdir=$1,upperdir=$2,workdir=$3,userxattr" "$4" || exit 1; shift 4; '
                   'n=$((n-1)); done; exec "$@"')

# A mount: (destination, kind, source); kinds in the order they apply at one path
_DEV, _PROC, _TMPFS, _RW, _RO = "dev", "proc", "tmpfs", "rw", "ro"
_ORDER = {_DEV: 0, _PROC: 0, _TMPFS: 1, _RW: 2, _RO: 3}
Mount = tuple[str, str, str]


class Probe:
    """What the probe found: why no sandbox can be made here (None: one can), else bwrap's
    and env's paths and whether a fresh ``/proc`` can be mounted. (A plain class: the sandbox
    setting is checked before the dispatcher's first line.)"""

    __slots__ = ("bwrap", "env", "fresh_proc", "reason")

    def __init__(self, reason: str | None, bwrap: str = "", env: str = "",
                 fresh_proc: bool = False):
        self.reason, self.bwrap, self.env, self.fresh_proc = reason, bwrap, env, fresh_proc


_probe: Probe | None = None   # once per process


def _probed() -> Probe:
    global _probe
    if _probe is None:
        _probe = _run_probe()
    return _probe


def unavailable() -> str | None:
    """None when a bwrap sandbox can be made here, else a one-line reason. Cached per process."""
    return _probed().reason


def fresh_proc() -> bool:
    """True when a sandbox here gets its own ``/proc`` (``ps`` inside sees only the unit)."""
    return unavailable() is None and _probed().fresh_proc


def wrap(argv: Sequence[str], *, writable: Sequence[str], read_only: Sequence[str],
         hidden: Sequence[str] = (), tmp: str | None = None,
         covers: Sequence[tuple[str, str]] = (),
         alias: tuple[str, str] | None = None,
         overlays: Sequence[tuple[str, str, str, str]] = ()) -> list[str]:
    """The argv that runs ``argv`` in a sandbox: the file system read-only, each path of
    ``writable`` writable, each of ``hidden`` an empty read-only folder, each of ``read_only``
    read-only (deeper paths over shallower ones); ``tmp`` (when given) writable at ``/tmp`` and
    ``/var/tmp``; each ``(source, destination)`` of ``covers`` read-only over its destination;
    ``alias`` ``(source, destination)``: ``source`` writable at ``destination`` too, where the
    process starts; each ``(lower, upper, work, target)`` of ``overlays``
    (``prun.attempt.overlay``) mounted first, in user and mount namespaces of the
    unit's own; its own PID namespace, killed with its parent. Raises ``UsageError``
    when no sandbox can be made here or the program's name has a ``=`` (``env`` would take it
    for a variable)."""
    why = unavailable()
    if why is not None:
        raise UsageError(f"no sandbox can be made here: {why}",
                         hint="install bubblewrap, or set sandbox: off")
    if not argv or "=" in argv[0]:
        raise UsageError(f"cannot run {argv[0] if argv else 'nothing'!r} in the sandbox: a "
                         "program name must not be empty or contain '='",
                         hint="rename the program or call it through its folder on PATH")
    probe = _probed()
    mounts = _mounts(probe.fresh_proc, writable, (*read_only, *prun_runtime()), hidden, tmp)
    chdir: list[str] = []
    if alias is not None:
        source, dest = (os.path.realpath(p) for p in alias)
        mounts.append((dest, _RW, source))
        mounts.sort(key=lambda m: (_depth(m[0]), m[0], _ORDER[m[1]]))
        chdir = ["--chdir", dest]
    out = _argv(probe.bwrap, probe.env, list(argv), mounts, _covers(covers, mounts), chdir)
    return _overlaid(out, overlays) if overlays else out


def _overlaid(argv: list[str], overlays: Sequence[tuple[str, str, str, str]]) -> list[str]:
    """``argv`` (``env --ignore-signal=TERM bwrap ...``) with ``overlays`` mounted first in
    a user and mount namespace of its own, bwrap in a nested user namespace as the person,
    without capabilities."""
    person = ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid()),
              "--cap-drop", "ALL"]
    env, ignore, bwrap, *rest = argv
    return [env, ignore, *mounting(overlays), bwrap, *person, *rest]


def mounting(overlays: Sequence[tuple[str, str, str, str]]) -> list[str]:
    """The argv prefix that mounts ``overlays`` (each ``(lower, upper, work, target)``, in
    order) in a user and mount namespace of its own, then execs the argv that follows it
    (exit 1 and one ``mount: ...`` line when a mount is refused). ``UsageError`` for a path
    an overlay's options cannot carry."""
    unshare, sh, mount = (shutil.which(p) or p for p in ("unshare", "sh", "mount"))
    paths = [p for o in overlays for p in o]
    bad = [p for p in paths if any(c in p for c in OVERLAY_UNSAFE)]
    if bad:
        raise UsageError(f"cannot mount an overlay at {bad[0]!r}: an overlay's path must not "
                         "hold ',', ':', '\\' or a newline",
                         hint="set PRUN_WORKSPACE_ROOT to a plain path, or PRUN_OVERLAY=off")
    return [unshare, "-Urm", "--", sh, "-c", _MOUNT_OVERLAYS, "sh", mount, str(len(overlays)),
            *paths]


def prun_runtime() -> tuple[str, ...]:
    """What runs prun's own code in a unit (its git wrapper, its hooks, the agent stubs): the
    interpreter's installation and this package's folder, read-only, so that a prun installed
    under ``/tmp`` (a checkout there, its virtual environment) still runs there."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # .../prun
    return tuple(dict.fromkeys((sys.prefix, sys.base_prefix, sys.exec_prefix,
                                os.path.dirname(package))))


def _mounts(fresh: bool, writable: Sequence[str], read_only: Sequence[str],
            hidden: Sequence[str], tmp: str | None) -> list[Mount]:
    """Every mount after the read-only root, shallow before deep (at one path: a tmpfs, then
    a bind; read-only wins over writable)."""
    out: dict[tuple[str, str], Mount] = {}
    out[("/dev", _DEV)] = ("/dev", _DEV, "")
    if fresh:
        out[("/proc", _PROC)] = ("/proc", _PROC, "")
    if tmp is not None and os.path.isdir(tmp):
        real = os.path.realpath(tmp)
        for folder in TMP_FOLDERS:
            if os.path.isdir(folder) and not os.path.islink(folder):
                out[(folder, _RW)] = (folder, _RW, real)
    for path in hidden:
        real = os.path.realpath(os.fspath(path))
        if os.path.isdir(real) and real != "/":
            out[(real, _TMPFS)] = (real, _TMPFS, "")
    modes: dict[str, bool] = {}
    for paths, ro in ((writable, False), (read_only, True)):
        for path in paths:
            real = os.path.realpath(os.fspath(path))
            if os.path.exists(real) and real != "/":
                modes[real] = modes.get(real, False) or ro
    for real, ro in modes.items():
        kind = _RO if ro else _RW
        out.pop((real, _RW if ro else _RO), None)
        out.pop((real, _TMPFS), None)   # a bind there covers it whole
        out[(real, kind)] = (real, kind, real)
    for dest in TMP_FOLDERS:
        if (dest, _RW) in out:
            out.pop((dest, _TMPFS), None)
    return sorted(out.values(), key=lambda m: (_depth(m[0]), m[0], _ORDER[m[1]]))


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def _covers(covers: Sequence[tuple[str, str]], mounts: list[Mount]) -> list[tuple[str, str]]:
    """The covers whose source is a file and whose destination the unit would see (or can be
    made in the fresh ``/dev``), each destination once."""
    out: dict[str, str] = {}
    for source, dest in covers:
        src, real = os.path.realpath(source), os.path.realpath(dest)
        if os.path.isfile(src) and real not in out and _visible(real, mounts):
            out[real] = src
    return [(src, dest) for dest, src in out.items()]


def _visible(path: str, mounts: list[Mount]) -> bool:
    """Whether ``path`` (real) exists in the sandbox's view, or is in its fresh ``/dev``."""
    under = None
    for m in mounts:   # the deepest mount at or above the path decides
        if path == m[0] or path.startswith(m[0].rstrip("/") + "/"):
            under = m
    if under is None:
        return os.path.isfile(path)
    dest, kind, source = under
    if kind == _DEV:
        return True
    if kind in (_TMPFS, _PROC):
        return False
    return os.path.isfile(source + path[len(dest):])


def _argv(bwrap: str, env: str, argv: list[str], mounts: list[Mount],
          covers: list[tuple[str, str]], chdir: Sequence[str] = ()) -> list[str]:
    out = [env, "--ignore-signal=TERM", bwrap, "--ro-bind", "/", "/"]
    for dest, kind, source in mounts:
        if kind == _DEV:
            out += ["--dev", dest]
        elif kind == _PROC:
            out += ["--proc", dest]
        elif kind == _TMPFS:
            out += ["--tmpfs", dest]
        else:
            out += ["--ro-bind" if kind == _RO else "--bind", source, dest]
    for dest, kind, _source in mounts:     # once what they hold back is bound in them
        if kind == _TMPFS:
            out += ["--remount-ro", dest]
    for source, dest in covers:
        out += ["--ro-bind", source, dest]
    if os.geteuid() == 0:
        for cap in ROOT_CAPS_DROPPED:
            out += ["--cap-drop", cap]
    return [*out, *chdir, "--unshare-pid", "--die-with-parent", "--",
            env, "--default-signal=TERM", *argv]


def _run_probe() -> Probe:
    import shutil

    if sys.platform != "linux":
        return Probe("not Linux (the sandbox is bubblewrap)")
    bwrap, env = shutil.which("bwrap"), shutil.which("env")
    if bwrap is None:
        return Probe("no bwrap on PATH (Debian package bubblewrap)")
    if env is None:
        return Probe("no env on PATH")

    def run(argv: list[str]) -> tuple[int, str]:
        from .._util.bounded import run as bounded

        try:
            p = bounded(argv, timeout=PROBE_TIMEOUT_S)
        except OSError as e:
            return -1, str(e)
        if p.returncode is None:
            return -1, f"no answer in {PROBE_TIMEOUT_S:.0f} s"
        lines = p.stderr.decode(errors="replace").strip().splitlines()
        return p.returncode, (lines[-1] if lines else f"exit code {p.returncode}")

    code, err = run([env, "--ignore-signal=TERM", "--default-signal=TERM", "true"])
    if code != 0:
        return Probe(f"env cannot reset signals (GNU coreutils 8.31+): {err}")
    for fresh in (True, False):
        code, err = run(_argv(bwrap, env, ["true"], _mounts(fresh, (), (), (), None), []))
        if code == 0:
            return Probe(None, bwrap, env, fresh)
    return Probe(f"bwrap refused: {err}")
