"""The executor contract: one small adapter per agent CLI.

An executor knows everything prun knows about one CLI and nothing else:

* ``settings``: resolve the unit's model, effort and timeout from flags and the CLI's own
  environment variables (validated before anything is created);
* ``build``: the argv, environment and stdin for one unit;
* ``reader``: a parser of the CLI's output stream (session id, text, tool use, the shell
  commands the worker ran, the final result); ``tool_calls`` reads a finished worker's stream
  with it for ``prun reconcile``'s check of what its result claims (``prun.git.claims``);
* ``judge``: whether a finished run succeeded, from its exit code *and* its final event;
* ``quota_hit``: whether a failure was a quota or rate-limit error, and when it resets;
* ``recipients``: where a unit's data goes for a model (its name, then the vendor families
  ``google``, ``anthropic``, ``openai``, ``local``), which the data boundary is checked against
  (``prun.plan.boundary``);
* ``quota_groups`` and ``gate``: the quota groups it draws on (what ``prun quota`` reports) and
  its quota gate before launch (``prun.quota.gate``; by default there is none);
* ``home_files``: what the CLI needs from the person's home folder (its configuration and
  credentials), copied into each unit's private home (``prun.attempt.home``); and, in
  ``build``, the flags that turn its own sub-agent tool off when the unit may not start other
  agents (``Unit.subdispatch`` false, the default).

Capabilities are class flags so that routing, quota and the dispatcher ask instead of testing
an executor's name: nothing outside ``prun.executors`` decides anything by a name.
The dispatcher (``prun.attempt.dispatch``) owns the rest of the contract (state dir, publishing,
FALLBACK, timeouts, exit codes) so every executor honours it the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import LaunchError
from .settings import Settings

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from ..quota.gate import GateDecision
    from .records import Judgement, Launch, QuotaHit, StreamResult, ToolCalls, Unit

    Event = dict[str, Any]   # one line of a CLI's event stream: a JSON object

_RECORDS = ("Judgement", "Launch", "QuotaHit", "StreamResult", "ToolCalls", "Unit")


def __getattr__(name: str) -> type:
    """The launch and stream records live in ``records`` (dataclasses, imported when used)."""
    if name in _RECORDS:
        from . import records

        record: type = getattr(records, name)
        return record
    raise AttributeError(name)

MODES = ("accept-edits", "plan")
COMMANDS_KEPT = 10_000  # shell commands a reader keeps of one stream (``StreamResult.commands``)
# An executor's role in the seed's split of units without a named executor (``split_role``).
ORDINARY = "ordinary"   # may carry the ordinary share (policy ``routing.ordinary``)
SONNET = "sonnet"       # runs Sonnet units (``routing.sonnet``, ``routing.session_tools``)
# Why an executor cannot take a unit on this machine (``Executor.missing``): words routing
# and ``prun doctor`` print.
NOT_INSTALLED = "not-installed"   # its CLI is not found
NOT_SIGNED_IN = "not-signed-in"   # its CLI says, offline, that no one is signed in


class HomeFiles:
    """What an agent CLI needs from the person's home folder in a unit's private home.

    ``paths``: files or folders under HOME, copied when they exist. ``skip``: names never
    copied inside a copied folder (caches, history, other projects' sessions). ``env_dirs``:
    an environment variable that names the CLI's configuration folder, mapped to the path under
    HOME it stands for (``CLAUDE_CONFIG_DIR`` -> ``.claude``; ``""`` for a variable that names
    another home, as ``GEMINI_CLI_HOME``): when the person sets it, the paths under it are
    copied from there and the variable points the unit at the copy. A plain class: executors
    are imported on the dispatcher's fast path."""

    __slots__ = ("env_dirs", "paths", "skip")

    def __init__(self, paths: tuple[str, ...] = (), skip: tuple[str, ...] = (),
                 env_dirs: Mapping[str, str] | None = None):
        self.paths = paths
        self.skip = frozenset(skip)
        self.env_dirs = dict(env_dirs or {})


def as_object(value: object) -> Event:
    """``value`` if it is a JSON object (a dict), else an empty one: for reading optional
    nested objects of an event."""
    return value if isinstance(value, dict) else {}


class StreamReader:
    """Parses a CLI's stdout one line at a time. Subclasses override ``event``."""

    def __init__(self) -> None:
        from .records import StreamResult

        self.result = StreamResult()

    def feed(self, line: str) -> None:
        import json

        line = line.strip()
        if not line:
            return
        try:
            obj = json.loads(line)
        except ValueError:
            self.result.bad_lines += 1
            return
        if not isinstance(obj, dict):
            self.result.bad_lines += 1
            return
        self.result.events += 1
        self.event(obj)

    def event(self, obj: Event) -> None:  # pragma: no cover - every reader overrides it
        raise NotImplementedError

    def finish(self, tail_path: str) -> StreamResult:
        return self.result


class Executor:
    """Base of every executor. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    program: ClassVar[str] = ""          # the CLI's name on PATH
    bin_env: ClassVar[str | None] = None  # environment variable naming the binary
    launches_process: ClassVar[bool] = True
    event_stream: ClassVar[bool] = True   # stdout is events the reader takes line by line
    prompt_in_argv: ClassVar[bool] = False  # the prompt travels as one argument (size-capped)
    can_resume: ClassVar[bool] = False
    supports_effort: ClassVar[bool] = False
    read_only_mode: ClassVar[bool] = False
    session_tools: ClassVar[bool] = False
    reports_tool_use: ClassVar[bool] = False
    takes_command: ClassVar[bool] = False   # runs the packet's ``command`` (argv) as the unit
    default_timeout_s: ClassVar[float] = 2700.0
    # What one unit is projected to use with no history (tokens in + out, US dollars; None:
    # unknown), the last resort of a run's budget and of ``prun estimate`` (docs/run.md).
    usage_default: ClassVar[tuple[int | None, float | None]] = (None, None)
    # Extra time past the unit's timeout before prun ends the process group itself; executors
    # whose CLI enforces the timeout on its own (agy's --print-timeout) get it first.
    timeout_grace_s: ClassVar[float] = 0.0
    timeout_env: ClassVar[str | None] = "PRUN_DISPATCH_TIMEOUT_SECONDS"
    # Routing (``prun.plan.routing``). ``pool``: the pool whose health and batch capacity (a
    # policy's ``[capacity]`` key) a unit takes; None: the executor's own name when it declares
    # a quota group, else no pool (it never waits). ``split_role``: ORDINARY, SONNET or None
    # (only where a packet names it).
    pool: ClassVar[str | None] = None
    split_role: ClassVar[str | None] = None
    # Quota group -> the group whose default model the executor's gate runs instead when the
    # first reads empty (agy's MODEL-FALLBACK): routing keeps such a pool open until both read
    # empty, and its reason says the dispatcher runs ``fallback_label`` instead.
    model_fallback: ClassVar[Mapping[str, str]] = {}
    fallback_label: ClassVar[str] = "its default model"

    # settings -------------------------------------------------------------------------------
    def settings(self, env: Mapping[str, str], *, model: str | None = None,
                 effort: str | None = None, timeout_s: float | None = None) -> Settings:
        return Settings(model=model, effort=effort, timeout_s=self.timeout(env, timeout_s))

    def timeout(self, env: Mapping[str, str], given: float | None) -> float:
        from .._util.timeparse import parse_duration
        from ..errors import UsageError

        variable = self.timeout_env
        raw = env.get(variable, "").strip() if variable else ""
        if given is None and not (variable and raw):
            return self.default_timeout_s
        what = "the unit's timeout" if given is not None else str(variable)
        seconds = given if given is not None else parse_duration(raw, what=what)
        if seconds <= 0:
            raise UsageError(f"{what} must be more than 0 s (got {seconds:g})",
                             hint="give seconds or a duration such as 45m")
        return seconds

    def preflight(self, mode: str, settings: Settings, env: Mapping[str, str]) -> None:
        """Refuse (UsageError) a unit this CLI would refuse at start-up; nothing exists yet."""

    def quota_group(self, model: str | None) -> str | None:
        """The quota pool a unit on ``model`` draws from (None when prun does not meter it)."""
        return None

    def quota_groups(self) -> tuple[str, ...]:
        """Every quota group a unit on this executor can draw from, whatever its model: what
        ``prun quota`` reports and what a backend failure re-reads."""
        group = self.quota_group(None)
        return (group,) if group else ()

    def quota_probe(self, group: str) -> tuple[str, ...] | None:
        """The built-in probe of one of its quota groups (a command keeping the probe contract
        of ``prun.quota.probes``), used where the config names none; None: it has none."""
        return None

    def routing_pool(self) -> str | None:
        """``pool``, else the executor's name when it draws on a quota group, else None."""
        return self.pool or (self.name if self.quota_groups() else None)

    def gate(self, settings: Settings, env: Mapping[str, str]) -> GateDecision | None:
        """The quota gate, decided before launch on every dispatch (``prun.quota.gate``): None
        launches as asked, a ``GateDecision`` launches with its settings (its note goes to
        stderr and ``quota-note``), a ``GateRefusal`` (exit 75) launches nothing. By default
        there is no gate."""
        return None

    def metered(self) -> bool:
        """Whether prun meters this executor's quota: a gate of its own or quota groups
        (either may probe its CLI before a launch or after a failure)."""
        return type(self).gate is not Executor.gate or bool(self.quota_groups())

    def recipients(self, model: str | None) -> tuple[str, ...]:
        """Where a unit on ``model`` (None: the default) sends its data: this executor's name,
        then the vendor families it reaches. Declaring no family means the executor is allowed
        only where a packet's ``may_go_to`` names it."""
        return (self.name,)

    # launch ---------------------------------------------------------------------------------
    def binary(self, env: Mapping[str, str]) -> str:
        """The CLI's path: ``$<bin_env>`` if set, else ``program`` on PATH."""
        if self.bin_env and env.get(self.bin_env, "").strip():
            path = env[self.bin_env].strip()
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise LaunchError(f"{self.bin_env}={path} is not an executable file",
                                  hint=f"point {self.bin_env} at the {self.program} binary")
            return path
        import shutil

        found = shutil.which(self.program, path=env.get("PATH"))
        if not found:
            hint = f"install {self.program} or set {self.bin_env}" if self.bin_env else None
            raise LaunchError(f"{self.program} not found on PATH", hint=hint)
        return found

    def signed_in(self, env: Mapping[str, str]) -> bool | None:
        """Whether the CLI is signed in, where that can be told offline from its files and
        environment; None when it cannot be told (the default)."""
        return None

    def missing(self, env: Mapping[str, str]) -> str | None:
        """Why this executor cannot take a unit on this machine (``NOT_INSTALLED``,
        ``NOT_SIGNED_IN``), or None: an executor that launches no CLI of its own is always
        there."""
        if not (self.launches_process and self.program):
            return None
        try:
            self.binary(env)
        except LaunchError:
            return NOT_INSTALLED
        return NOT_SIGNED_IN if self.signed_in(env) is False else None

    def install_hint(self) -> str:
        """How to make this executor's CLI found: for a refusal's hint and ``prun doctor``."""
        where = f" or set {self.bin_env} to its path" if self.bin_env else ""
        return f"install {self.program} so that it is on PATH{where}"

    def build(self, unit: Unit, env: Mapping[str, str]) -> Launch:
        raise NotImplementedError

    def home_files(self) -> HomeFiles:
        """What this CLI needs from the person's home, copied into each unit's private home
        (its HOME), so that the CLI finds its configuration and credentials and writes only
        its copies, never the person's files. By default nothing."""
        return HomeFiles()

    # reading --------------------------------------------------------------------------------
    def reader(self) -> StreamReader:
        raise NotImplementedError

    def tool_calls(self, stream_path: str) -> ToolCalls | None:
        """What the worker's finished stream (its state dir's ``tail``) records of its tool
        calls, read with this executor's own reader: how many, and the shell commands it ran
        (each reader knows its CLI's events; a reader that leaves ``commands`` None records
        none). None when this executor's stream records no tool calls at all
        (``reports_tool_use`` false). A stream that cannot be read (missing, not a regular
        file, over 64 MiB) reads as one that shows no tool call."""
        if not (self.reports_tool_use and self.event_stream):
            return None
        from .._util.fsutil import read_lines
        from .records import ToolCalls

        reader = self.reader()
        try:
            for line in read_lines(stream_path):
                reader.feed(line)
        except OSError:
            return ToolCalls(0, () if reader.result.commands is not None else None)
        stream = reader.finish(stream_path)
        commands = None if stream.commands is None else tuple(stream.commands)
        return ToolCalls(stream.tool_uses, commands)

    def hand_off(self, unit: Unit) -> tuple[str, list[str]]:
        """Executors that launch no process: the hand-off text and the stdout lines."""
        raise NotImplementedError

    def judge(self, exit_code: int, stream: StreamResult) -> Judgement:
        """Both signals decide: a non-zero exit fails; after exit 0 the final event decides."""
        from .records import Judgement

        if exit_code != 0:
            return Judgement(False, "exit-nonzero",
                             stream.error or f"{self.name} exited with code {exit_code}")
        if not stream.final_seen:
            return Judgement(False, "no-result-event",
                             stream.error or f"{self.name}'s stream ended with no result event")
        status = (stream.status or "").strip()
        if status and status.upper() != "SUCCESS":
            return Judgement(False, "status-error",
                             stream.error or f"final result status {status}")
        return Judgement(True, "ok")

    def quota_hit(self, stream: StreamResult, exit_code: int, stderr: str) -> QuotaHit | None:
        """A quota or rate-limit failure recognised in this run's output, or None."""
        return None

    def resume_refused(self, exit_code: int, stream: StreamResult, stderr: str) -> bool:
        """A failed run that asked to resume a conversation: did the CLI refuse the resume
        itself (unknown id, another folder)? Then prun starts a fresh attempt instead."""
        return False
