"""The sandbox: a unit's whole process tree run by bubblewrap (``bwrap``) under a view of the file
system in which what it must not change is mounted read-only, in a PID namespace of its own.

``wrap(argv, writable=..., read_only=...)`` returns the argv that does it; ``unavailable()`` says
why it cannot be done here (None when it can).

Enforced (Linux, bwrap; as root too):

- Every path in ``read_only`` is a read-only mount: writing, creating, deleting, renaming or
  changing the mode of anything under it fails with EROFS. Root ignores file modes, so only a
  mount stops root; as root the capabilities that could undo a mount or go around it are dropped
  (``CAP_SYS_ADMIN``: mount, umount, remount, setns, unshare; ``CAP_DAC_READ_SEARCH``:
  ``open_by_handle_at`` through a writable mount of the same file system; ``CAP_SYS_MODULE``,
  ``CAP_SYS_RAWIO``, ``CAP_MKNOD``). bwrap also sets no-new-privileges: a setuid program gains
  nothing inside.
- Every path in ``writable`` is writable, even inside a read-only path: mounts are applied
  shallow-to-deep, so a unit's workspace inside a read-only workspaces root, or a read-only
  snapshot inside a writable folder, ends up as asked. Paths are resolved (symbolic links
  followed) first; a path given in both lists is read-only.
- Every process inside ends when the unit's main process ends (``--unshare-pid``: bwrap's own
  init is PID 1 inside, the main process PID 2; when PID 2 exits, init exits with its code and
  the kernel kills whatever is left in the namespace: ``setsid`` children, double-forked
  daemons, processes that ignore SIGTERM). ``ps`` inside sees only the unit's processes when a
  fresh ``/proc`` could be mounted here (it can as root).
- Ending a unit works as without a sandbox: SIGTERM to the group reaches the main process (and
  whatever stayed in its group) and bwrap lets it finish in its own time; SIGKILL to the group
  ends everything inside at once. (bwrap would die of SIGTERM at once and, dying, kill the
  namespace before the main process could handle it; so bwrap runs with SIGTERM ignored, and
  the main process gets it back at its default through ``env --default-signal=TERM``, GNU
  coreutils 8.31 or later.)
- ``--die-with-parent``: when the process that started bwrap dies (even by SIGKILL), everything
  inside is killed. A sandboxed worker does not outlive the process that spawned it (for a run,
  its keeper).

Exit codes, as the parent of bwrap sees them: the main process's exit code N gives N; its death
by signal N gives 128+N (an ordinary exit of bwrap: the same number prun reports for an
unsandboxed death by signal N); SIGKILL to the group kills bwrap itself (128+9 as prun reports
it); bwrap's own failure to set up (a mount refused) is exit 1 with one ``bwrap: ...`` line on
stderr.

Not enforced, by design or by limit:

- Everything else is as the user has it (``--dev-bind / /``): home, caches, ``/tmp``, devices,
  the network, other users' processes through signals (outside the PID namespace they cannot be
  named by PID). Nothing but the PID and mount namespaces is unshared.
- A folder *above* a read-only path can be renamed, and the read-only tree moves with it on the
  host too (the mount follows the folder); a raw block device in ``/dev`` is writable by root.
- Where a fresh ``/proc`` cannot be mounted, ``/proc/<pid>/root`` of any process outside leads to
  the file system without the read-only mounts, and ``ps`` sees every process of the machine.
- A path that does not exist when the unit starts is skipped: it cannot be bind-mounted. For a
  file that is to be written later (a result file), pass its folder.

It is a wall against accidents and sloppy workers, not a security boundary against a hostile
program: that needs more namespaces, seccomp and no root, which agents could not work in.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..errors import UsageError

PROBE_TIMEOUT_S = 10.0
# As root, the capabilities that could undo a read-only mount or go around it.
ROOT_CAPS_DROPPED = ("CAP_SYS_ADMIN", "CAP_DAC_READ_SEARCH", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
                     "CAP_MKNOD")


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


def wrap(argv: Sequence[str], *, writable: Sequence[str], read_only: Sequence[str]) -> list[str]:
    """The argv that runs ``argv`` in a sandbox: the file system as it is, each path of
    ``read_only`` read-only, each of ``writable`` writable (deeper paths over shallower ones),
    its own PID namespace, killed with its parent. Raises ``UsageError`` when no sandbox can be
    made here or the program's name has a ``=`` (``env`` would take it for a variable)."""
    why = unavailable()
    if why is not None:
        raise UsageError(f"no sandbox can be made here: {why}",
                         hint="install bubblewrap, or set sandbox: off")
    if not argv or "=" in argv[0]:
        raise UsageError(f"cannot run {argv[0] if argv else 'nothing'!r} in the sandbox: a "
                         "program name must not be empty or contain '='",
                         hint="rename the program or call it through its folder on PATH")
    probe = _probed()
    return _argv(probe.bwrap, probe.env, probe.fresh_proc, list(argv),
                 _mounts(writable, read_only))


def _mounts(writable: Sequence[str], read_only: Sequence[str]) -> list[tuple[str, bool]]:
    """(real path, read-only) for each existing path, shallow before deep; read-only wins."""
    modes: dict[str, bool] = {}
    for paths, ro in ((writable, False), (read_only, True)):
        for path in paths:
            real = os.path.realpath(os.fspath(path))
            if os.path.exists(real):
                modes[real] = modes.get(real, False) or ro
    return sorted(modes.items(), key=lambda m: (m[0].rstrip("/").count("/"), m[0]))


def _argv(bwrap: str, env: str, fresh: bool, argv: list[str],
          mounts: list[tuple[str, bool]]) -> list[str]:
    out = [env, "--ignore-signal=TERM", bwrap, "--dev-bind", "/", "/"]
    if fresh:
        out += ["--proc", "/proc"]
    for path, ro in mounts:
        out += ["--ro-bind" if ro else "--bind", path, path]
    if os.geteuid() == 0:
        for cap in ROOT_CAPS_DROPPED:
            out += ["--cap-drop", cap]
    return [*out, "--unshare-pid", "--die-with-parent", "--",
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
        code, err = run(_argv(bwrap, env, fresh, ["true"], []))
        if code == 0:
            return Probe(None, bwrap, env, fresh)
    return Probe(f"bwrap refused: {err}")
