"""The executor contract: one small adapter per agent CLI.

An executor knows everything prun knows about one CLI and nothing else:

* ``settings``: resolve the unit's model, effort and timeout from flags and the CLI's own
  environment variables (validated before anything is created);
* ``build``: the argv, environment and stdin for one unit;
* ``reader``: a parser of the CLI's output stream (session id, text, tool use, the final result);
* ``judge``: whether a finished run succeeded, from its exit code *and* its final event;
* ``quota_hit``: whether a failure was a quota or rate-limit error, and when it resets.

Capabilities are class flags so that routing and the dispatcher can ask instead of guessing.
The dispatcher (``prun.dispatch``) owns the rest of the contract (state dir, publishing,
FALLBACK, timeouts, exit codes) so every executor honours it the same way.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from ..errors import LaunchError

MODES = ("accept-edits", "plan")


@dataclass(frozen=True)
class Settings:
    """A unit's resolved executor settings (what will actually be asked of the CLI)."""

    model: str | None
    effort: str | None
    timeout_s: float
    extra: Mapping[str, object] = field(default_factory=dict)  # executor-specific, e.g. sandbox


@dataclass(frozen=True)
class Unit:
    """Everything an executor needs to build one launch."""

    unit_id: str
    prompt: str
    prompt_file: str
    settings: Settings
    mode: str                       # "accept-edits" or "plan"
    workspace: str                  # the worker's cwd
    add_dirs: tuple[str, ...] = ()
    resume_id: str | None = None
    command: tuple[str, ...] = ()   # the command executor's argv
    state_dir: str = ""
    result_file: str = ""


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    stdin_path: str | None = None   # None: stdin is closed (/dev/null)


@dataclass
class QuotaHit:
    """A quota or rate-limit failure: which group, and when it resets (ISO time) if known."""

    group: str | None
    resets_at: str | None
    message: str


@dataclass
class StreamResult:
    """What a finished (or dead) run's output stream says."""

    session_id: str | None = None
    final_seen: bool = False        # the CLI printed its final result event
    status: str | None = None       # the final event's status, as printed
    is_error: bool | None = None    # an explicit error flag in the final event, if any
    response: str | None = None     # the final response text
    response_file: str | None = None  # or: a file holding it (command executor's stdout)
    error: str | None = None        # the backend's error text
    usage: dict | None = None
    model: str | None = None        # the model the CLI reported
    tool_uses: int = 0
    tool_errors: int = 0
    events: int = 0
    bad_lines: int = 0              # lines that were not JSON objects
    text_parts: list[str] = field(default_factory=list)

    def add_text(self, chunk: str) -> None:
        """Collect assistant text (salvage for FALLBACK); a list, since += on a long str copies."""
        self.text_parts.append(chunk)

    @property
    def text(self) -> str:
        """The assistant text seen so far."""
        return "".join(self.text_parts)


@dataclass(frozen=True)
class Judgement:
    ok: bool
    reason: str                     # short slug: ok, exit-nonzero, status-error, no-result-event, ...
    error: str | None = None


class StreamReader:
    """Parses a CLI's stdout one line at a time. Subclasses override ``event``."""

    def __init__(self) -> None:
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

    def event(self, obj: dict) -> None:  # pragma: no cover - every reader overrides it
        raise NotImplementedError

    def finish(self, tail_path: str) -> StreamResult:
        return self.result


class Executor:
    """Base of every executor. Subclasses set the class attributes and override what differs."""

    name: ClassVar[str]
    program: ClassVar[str] = ""          # the CLI's name on PATH
    bin_env: ClassVar[str | None] = None  # environment variable naming the binary
    launches_process: ClassVar[bool] = True
    can_resume: ClassVar[bool] = False
    supports_effort: ClassVar[bool] = False
    read_only_mode: ClassVar[bool] = False
    session_tools: ClassVar[bool] = False
    reports_tool_use: ClassVar[bool] = False
    default_timeout_s: ClassVar[float] = 2700.0
    # Extra time past the unit's timeout before prun ends the process group itself; executors
    # whose CLI enforces the timeout on its own (agy's --print-timeout) get it first.
    timeout_grace_s: ClassVar[float] = 0.0
    timeout_env: ClassVar[str | None] = "PRUN_DISPATCH_TIMEOUT_SECONDS"

    # settings -------------------------------------------------------------------------------
    def settings(self, env: Mapping[str, str], *, model: str | None = None,
                 effort: str | None = None, timeout_s: float | None = None) -> Settings:
        return Settings(model=model, effort=effort, timeout_s=self.timeout(env, timeout_s))

    def timeout(self, env: Mapping[str, str], given: float | None) -> float:
        from ..timeparse import parse_duration

        if given is not None:
            return given
        raw = env.get(self.timeout_env or "", "").strip() if self.timeout_env else ""
        if not raw:
            return self.default_timeout_s
        return parse_duration(raw, what=self.timeout_env)

    def quota_group(self, model: str | None) -> str | None:
        """The quota pool a unit on ``model`` draws from (None when prun does not meter it)."""
        return None

    # launch ---------------------------------------------------------------------------------
    def binary(self, env: Mapping[str, str]) -> str:
        """The CLI's path: ``$<bin_env>`` if set, else ``program`` on PATH."""
        if self.bin_env and env.get(self.bin_env, "").strip():
            path = env[self.bin_env].strip()
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                raise LaunchError(f"{self.bin_env}={path} is not an executable file",
                                  hint=f"point {self.bin_env} at the {self.program} binary")
            return path
        found = shutil.which(self.program, path=env.get("PATH"))
        if not found:
            hint = f"install {self.program} or set {self.bin_env}" if self.bin_env else None
            raise LaunchError(f"{self.program} not found on PATH", hint=hint)
        return found

    def build(self, unit: Unit, env: Mapping[str, str]) -> Launch:
        raise NotImplementedError

    # reading --------------------------------------------------------------------------------
    def reader(self) -> StreamReader:
        raise NotImplementedError

    def judge(self, exit_code: int, stream: StreamResult) -> Judgement:
        """Both signals decide: a non-zero exit fails; after exit 0 the final event decides."""
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
