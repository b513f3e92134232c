"""prun's settings: every environment variable prun reads, parsed and validated in one place.

``load(env)`` reads the variables below from ``env`` (default: this process's environment),
checks every value, and returns one ``Settings``; a bad value is a ``UsageError`` naming the
variable and how to fix it (exit 2), raised before anything is made: the ``prun`` command loads
its settings first, whatever the command. Library code reads a ``Settings`` (``current()`` for
this process's), never ``os.environ``; an environment is only passed on, to the processes
prun starts. Each agent CLI's own variables (``ANTIGRAVITY_*``, ``PRUN_CLAUDE_*``, ...) are
read by its executor module, and checked when a unit of it is prepared, before its state dir
exists.

    variable                      setting               default
    PRUN_LEDGER                   ledger, ledger_off    .prun/ledger.sqlite at the repository
                                                        root, else the user's state folder;
                                                        "off": standalone dispatches record
                                                        nothing
    PRUN_STATE_ROOT               state_root            <user state>/units (standalone units)
    PRUN_WORKSPACE_ROOT           workspace_root        <user state>/workspaces
    XDG_STATE_HOME                user_state            ~/.local/state, then /prun
    PRUN_CONFIG                   config                <user config folder>/prun/config.toml
    PRUN_SANDBOX                  sandbox               auto (auto | on | off)
    PRUN_SANDBOX_WRITABLE         sandbox_writable      none (folders, separated by ':', every
                                                        sandboxed unit may also write: a
                                                        shared cache)
    PRUN_SCRATCH_CWD              scratch_cwd           none (a caller-made workspace)
    PRUN_STALL_THRESHOLD          stall_s               10m (no tail growth for this long)
    PRUN_KILL_GRACE_SECONDS       kill_grace_s          5s (SIGTERM to SIGKILL)
    PRUN_TIMEOUT_GRACE_SECONDS    timeout_grace_s       the executor's (past a unit's timeout)
    PRUN_HOOK_TIMEOUT             hook_timeout_s        30s (a plan's on_event command)
    PRUN_GATHER_TIMEOUT           gather_timeout_s      1h
    PRUN_STABLE_WINDOW            stable_window_s       10s
    PRUN_WATCH                    watch_mode            native (native | poll)
    PRUN_WATCH_POLL_INTERVAL      poll_interval_s       1s
    PRUN_PORT_START               port_start            20000 (where assigned ports start)
    PRUN_PORT_COUNT               port_count            10 (a unit's own range)
    PRUN_MONITOR_COMMAND          monitor_command       prun monitor (in relaunch lines)
    PRUN_CLUSTER                  cluster               none (a Dask scheduler address:
                                                        tcp://host:port or tls://host:port)
    PRUN_MCP_TIMEOUT              mcp_timeout_s         10m (the MCP server's bound on a
                                                        tool's command, past its own wait)

Places are checked too, before anything is made: no path holds a control character; the
ledger, the state root and the workspace root are not under /proc, /sys or /dev (/dev/shm
is allowed), each root given is a folder prun can write in (or can be made in one); an explicit
PRUN_WORKSPACE_ROOT is outside any git work tree (the run's repository included); an existing
PRUN_CONFIG or PRUN_LEDGER is a regular file, the config file at most 1 MiB (PRUN_CONFIG=/dev/null
means no config file).

Durations take seconds or ``90s``, ``45m``, ``2h``, ``1h30m``. A plain class (no dataclass):
settings are loaded on the dispatcher's way to its first line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import UsageError

SANDBOX_SETTINGS = ("auto", "on", "off")
WATCH_MODES = {"": "native", "auto": "native", "native": "native", "inotify": "native",
               "poll": "poll", "polling": "poll"}
PORT_LIMIT = 65536              # one past the highest port
PORT_START_DEFAULT = 20000      # where assigned ports start
PORT_COUNT_DEFAULT = 10         # a unit's own range

# every variable read here, in the order they are checked (the cache key, and the docs)
VARIABLES = ("PRUN_LEDGER", "PRUN_STATE_ROOT", "PRUN_WORKSPACE_ROOT", "XDG_STATE_HOME",
             "PRUN_CONFIG", "PRUN_SANDBOX", "PRUN_SANDBOX_WRITABLE",
             "PRUN_SCRATCH_CWD", "PRUN_STALL_THRESHOLD",
             "PRUN_KILL_GRACE_SECONDS", "PRUN_TIMEOUT_GRACE_SECONDS", "PRUN_HOOK_TIMEOUT",
             "PRUN_GATHER_TIMEOUT", "PRUN_STABLE_WINDOW", "PRUN_WATCH",
             "PRUN_WATCH_POLL_INTERVAL", "PRUN_PORT_START", "PRUN_PORT_COUNT",
             "PRUN_MONITOR_COMMAND", "PRUN_CLUSTER", "PRUN_MCP_TIMEOUT", "HOME")


class Settings:
    """prun's settings, read from one environment (``env``, kept to pass on to children)."""

    __slots__ = ("_config", "cluster", "config_given", "env", "gather_timeout_s", "hook_timeout_s",
                 "kill_grace_s", "ledger", "ledger_off", "mcp_timeout_s", "monitor_command",
                 "poll_interval_s",
                 "port_count", "port_start", "sandbox", "sandbox_writable", "scratch_cwd",
                 "stable_window_s",
                 "stall_s", "state_root", "timeout_grace_s", "user_state", "watch_mode",
                 "workspace_root")

    env: Mapping[str, str]
    ledger: str | None               # an explicit ledger path (None: found from the repository)
    ledger_off: bool                 # PRUN_LEDGER=off: standalone dispatches record nothing
    user_state: str                  # prun's folder in the user's state folder
    state_root: str
    workspace_root: str
    config_given: str | None
    sandbox: str
    sandbox_writable: tuple[str, ...]   # folders every sandboxed unit may also write
    scratch_cwd: str | None
    stall_s: float
    kill_grace_s: float
    timeout_grace_s: float | None
    hook_timeout_s: float
    gather_timeout_s: float
    stable_window_s: float
    watch_mode: str
    poll_interval_s: float
    port_start: int
    port_count: int
    monitor_command: str
    cluster: str | None              # the Dask scheduler a run's units go to (None: this machine)
    mcp_timeout_s: float

    @property
    def config(self) -> str:
        """The config file's path: ``$PRUN_CONFIG``, else ``config.toml`` in the user's config
        folder for prun (platformdirs; imported only when asked)."""
        if self.config_given:
            return self.config_given
        import platformdirs

        return os.path.join(platformdirs.user_config_dir("prun", appauthor=False),
                            "config.toml")

    def __repr__(self) -> str:
        shown = (f"{k}={getattr(self, k)!r}" for k in self.__slots__ if k not in ("env", "_config"))
        return "Settings(" + ", ".join(shown) + ")"


def load(env: Mapping[str, str] | None = None) -> Settings:
    """The settings of ``env`` (default: this process's environment), every value checked;
    raises ``UsageError`` (exit 2) naming the first bad variable. Cached per environment."""
    env = os.environ if env is None else env
    key = tuple(env.get(name) for name in VARIABLES)
    cached = _cache.get(id(env))
    if cached is not None and cached[0] == key:
        return cached[1]
    s = _read(env)
    if len(_cache) > 64:
        _cache.clear()
    _cache[id(env)] = (key, s)
    return s


def current() -> Settings:
    """This process's settings (its environment as it is now)."""
    return load(os.environ)


_cache: dict[int, tuple[tuple[str | None, ...], Settings]] = {}


def _read(env: Mapping[str, str]) -> Settings:
    s = Settings()
    s.env = env
    home = env.get("HOME") or os.path.expanduser("~")
    s.user_state = os.path.join(_line(env, "XDG_STATE_HOME")
                                or os.path.join(home, ".local", "state"), "prun")
    raw = _text(env, "PRUN_LEDGER")
    s.ledger_off = raw.lower() == "off"
    s.ledger = None if s.ledger_off or not raw else _path(raw, home, "PRUN_LEDGER")
    if s.ledger:
        _usable_file(s.ledger, "PRUN_LEDGER", raw)
    given = _text(env, "PRUN_STATE_ROOT")
    s.state_root = _path(given, home, "PRUN_STATE_ROOT") if given \
        else os.path.join(s.user_state, "units")
    _usable_folder(s.state_root, "PRUN_STATE_ROOT", given)
    given = _text(env, "PRUN_WORKSPACE_ROOT")
    s.workspace_root = _path(given, home, "PRUN_WORKSPACE_ROOT") if given \
        else os.path.join(s.user_state, "workspaces")
    _usable_folder(s.workspace_root, "PRUN_WORKSPACE_ROOT", given, outside_git=bool(given))
    given = _text(env, "PRUN_CONFIG")
    s.config_given = _path(given, home, "PRUN_CONFIG") if given else None
    if s.config_given and s.config_given != os.devnull:   # /dev/null: no config file
        _usable_file(s.config_given, "PRUN_CONFIG", given, limit=CONFIG_MAX_BYTES)
    s.sandbox = _choice(env, "PRUN_SANDBOX", {c: c for c in SANDBOX_SETTINGS} | {"": "auto"},
                        "auto, on or off")
    s.sandbox_writable = tuple(_path(p.strip(), home, "PRUN_SANDBOX_WRITABLE") for p in
                               _text(env, "PRUN_SANDBOX_WRITABLE").split(os.pathsep) if p.strip())
    s.scratch_cwd = _text(env, "PRUN_SCRATCH_CWD") or None
    s.stall_s = _duration(env, "PRUN_STALL_THRESHOLD", 600.0)
    s.kill_grace_s = _duration(env, "PRUN_KILL_GRACE_SECONDS", 5.0, zero=True)
    s.timeout_grace_s = _given_duration(env, "PRUN_TIMEOUT_GRACE_SECONDS", zero=True)
    s.hook_timeout_s = _duration(env, "PRUN_HOOK_TIMEOUT", 30.0)
    s.gather_timeout_s = _duration(env, "PRUN_GATHER_TIMEOUT", 3600.0, zero=True)
    s.stable_window_s = _duration(env, "PRUN_STABLE_WINDOW", 10.0, zero=True)
    s.watch_mode = _choice(env, "PRUN_WATCH", WATCH_MODES, "native or poll")
    s.poll_interval_s = _duration(env, "PRUN_WATCH_POLL_INTERVAL", 1.0)
    s.port_start = _whole(env, "PRUN_PORT_START", PORT_START_DEFAULT, 1024, PORT_LIMIT - 1)
    s.port_count = _whole(env, "PRUN_PORT_COUNT", PORT_COUNT_DEFAULT, 1,
                          PORT_LIMIT - s.port_start)
    s.monitor_command = _line(env, "PRUN_MONITOR_COMMAND") or "prun monitor"
    given = _text(env, "PRUN_CLUSTER")
    s.cluster = parse_cluster_address(given, "PRUN_CLUSTER") if given else None
    s.mcp_timeout_s = _duration(env, "PRUN_MCP_TIMEOUT", 600.0)
    return s


CLUSTER_SCHEMES = ("tcp", "tls")


def parse_cluster_address(value: object, where: str = "cluster") -> str:
    """A Dask scheduler's address (``--cluster``, a plan's ``cluster:``, ``$PRUN_CLUSTER``):
    ``tcp://host:port`` or ``tls://host:port``, returned as given (stripped)."""
    text = value.strip() if isinstance(value, str) else ""
    scheme, sep, rest = text.partition("://")
    host, colon, port = rest.rpartition(":")
    if (not sep or scheme not in CLUSTER_SCHEMES or not colon or not host.strip("[]")
            or not port.isdigit() or not 0 < int(port) < PORT_LIMIT or "/" in rest):
        raise UsageError(f"{where}: {value!r} is not a Dask scheduler address",
                         hint="give tcp://host:port (or tls://host:port with Dask's TLS "
                              "settings), e.g. the CLUSTER line of `prun cluster local`")
    return text


def parse_sandbox(value: object) -> str:
    """A ``sandbox:`` setting (plan, packet, ``--sandbox``) as ``auto``, ``on`` or ``off``
    (missing: ``auto``). YAML reads unquoted on/off as booleans: True is on, False is off."""
    if value is None:
        return "auto"
    if value is True or value is False:
        return "on" if value else "off"
    if isinstance(value, str) and value.strip().lower() in SANDBOX_SETTINGS:
        return value.strip().lower()
    raise UsageError(f"sandbox: {value!r} is not a sandbox setting",
                     hint="use auto (the default), on or off")


def _text(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


def _line(env: Mapping[str, str], name: str) -> str:
    """The variable's text, refused when it holds a control character."""
    raw = _text(env, name)
    if not raw.isprintable():
        raise UsageError(f"{name} holds a control character",
                         hint=f"set {name} to plain text, or unset it")
    return raw


def _path(raw: str, home: str, name: str) -> str:
    if not raw.isprintable():
        raise UsageError(f"{name} holds a control character",
                         hint=f"set {name} to a plain path, or unset it")
    if raw == "~" or raw.startswith("~/"):
        raw = home + raw[1:]
    return os.path.abspath(raw)


# Where prun never keeps a folder or a file of its own: kernel views and devices (a tmpfs
# under /dev/shm is a folder like any other).
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
ALLOWED_UNDER_SYSTEM = ("/dev/shm",)
CONFIG_MAX_BYTES = 1024 * 1024   # the config file (settings/config.py reads at most this)


def _usable_folder(path: str, name: str, given: str, outside_git: bool = False) -> None:
    """Refuse (UsageError) a folder prun would make its own files in that it cannot use:
    under /proc, /sys or /dev; given explicitly, not a folder (or no folder can be made
    there) or not writable; with ``outside_git``, inside a git work tree (a ``.git`` at it or
    above it). ``given``: the variable's text ("" when ``path`` is its default)."""
    real = os.path.realpath(path)
    shown = f"{name}={given!r}" if given else f"{name} (default {path})"
    fix = f"point {name} at a writable folder of your own"
    _outside_system(real, shown, fix)
    if outside_git:
        tree = _work_tree(real)
        if tree is not None:
            raise UsageError(f"{shown} is inside the git work tree {tree}",
                             hint=f"point {name} at a folder outside any repository")
    if not given:
        return  # a default is checked where it is made (a read-only command makes nothing)
    existing = real
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise UsageError(f"{shown} is not a folder ({existing} is a file)", hint=fix)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{shown} is not writable ({existing})", hint=fix)


def _usable_file(path: str, name: str, given: str, limit: int | None = None) -> None:
    """Refuse (UsageError) a file prun reads or writes that it cannot use: under /proc, /sys
    or /dev, an existing thing that is not a regular file, one over ``limit`` bytes."""
    import stat

    real = os.path.realpath(path)
    shown = f"{name}={given!r}"
    fix = f"point {name} at a regular file of your own, or unset it"
    _outside_system(real, shown, fix)
    try:
        st = os.stat(real)
    except OSError:
        return  # not there (yet): made or skipped where it is used
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{shown} is not a regular file", hint=fix)
    if limit is not None and st.st_size > limit:
        raise UsageError(f"{shown} is {st.st_size} bytes, more than the {limit} it may be",
                         hint=fix)


def _outside_system(real: str, shown: str, fix: str) -> None:
    for top in SYSTEM_FOLDERS:
        inside = real == top or real.startswith(top + "/")
        if inside and not any(real == ok or real.startswith(ok + "/")
                              for ok in ALLOWED_UNDER_SYSTEM):
            raise UsageError(f"{shown} is under {top}", hint=fix)


def _work_tree(path: str) -> str | None:
    """The git work tree holding ``path`` (a ``.git`` at it or above it), or None."""
    folder = path
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        up = os.path.dirname(folder)
        if up == folder:
            return None
        folder = up


def _choice(env: Mapping[str, str], name: str, allowed: Mapping[str, str], say: str) -> str:
    raw = _text(env, name).lower()
    if raw not in allowed:
        raise UsageError(f"{name}={env.get(name)!r} is not one of {say}",
                         hint=f"set {name} to {say}, or unset it")
    return allowed[raw]


def _duration(env: Mapping[str, str], name: str, default: float, zero: bool = False) -> float:
    value = _given_duration(env, name, zero)
    return default if value is None else value


def _given_duration(env: Mapping[str, str], name: str, zero: bool = False) -> float | None:
    """The duration ``name`` gives (None when unset); ``zero``: 0 is allowed."""
    raw = _text(env, name)
    if not raw:
        return None
    from .._util.timeparse import parse_duration

    try:
        value = parse_duration(raw, what=name)
    except UsageError as e:
        raise UsageError(f"{name}={raw!r} is not a duration", hint=e.hint) from None
    if value < 0 or (value == 0 and not zero):
        raise UsageError(f"{name}={raw!r} must be {'0 or more' if zero else 'more than 0'}",
                         hint=f"give seconds or a duration such as 90s or 10m, or unset {name}")
    return value


def _whole(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = _text(env, name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise UsageError(f"{name}={raw!r} is not a whole number from {low} to {high}",
                         hint=f"unset {name} for the default {default}")
    return value
