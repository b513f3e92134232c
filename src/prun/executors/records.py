"""The records an executor builds and reads: a unit to launch, the launch, what its stream
said, the judgement, a quota hit. Imported when a unit is launched or read, not before."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from .settings import Settings

TEXT_KEPT = 1 << 20     # characters of assistant text kept for a FALLBACK's salvage


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
    briefed: bool = False           # the prompt is a run's brief, contract included
    subdispatch: bool = False       # the unit may start other agents (its packet allots it)


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


class Denial(TypedDict):
    """A tool call refused: the tool, who refused it (permission, prun-guard, the CLI's error
    type) and the message."""

    tool: str
    by: str
    message: str


@dataclass(frozen=True)
class Usage:
    """What one run of an agent CLI reported it used, normalised by its executor's reader.

    ``tokens_in`` counts every input token the model read, cached ones included;
    ``tokens_cached`` is the part of ``tokens_in`` read from a cache; ``tokens_out`` what the
    model wrote. ``cost_usd`` is the CLI's own figure. Each is None when the CLI did not
    report it: never estimated."""

    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    cost_usd: float | None = None

    @property
    def reported(self) -> bool:
        """The CLI reported at least one of the four."""
        return any(v is not None for v in (self.tokens_in, self.tokens_out,
                                           self.tokens_cached, self.cost_usd))


def count(value: object) -> int | None:
    """A token count as reported: a non-negative integer, else None (not reported)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 0 and float(value).is_integer() else None


def dollars(value: object) -> float | None:
    """A cost as reported: a non-negative number, else None (not reported)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value < float("inf") else None


def total(*parts: int | None) -> int | None:
    """The sum of the counts reported; None when none was."""
    known = [p for p in parts if p is not None]
    return sum(known) if known else None


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
    usage: dict[str, Any] | None = None    # the CLI's own usage record, as printed
    spend: Usage | None = None      # ... normalised by the executor (None: nothing reported)
    model: str | None = None        # the model the CLI reported
    tool_uses: int = 0
    tool_errors: int = 0
    denials: list[Denial] = field(default_factory=list)  # tools refused (permission, guard)
    events: int = 0
    bad_lines: int = 0              # lines that were not JSON objects
    text_parts: list[str] = field(default_factory=list)
    text_len: int = 0               # characters in text_parts
    turns: int = 0                  # the model's turns, where the stream tells them (claude)
    retries: int = 0                # API calls the CLI announced it retries (claude)
    api_error_status: int | None = None  # the HTTP status of an API error (claude)
    api_error_type: str | None = None    # ... and its type, e.g. rate_limit_error (claude)
    # the shell commands the worker ran, in order, refused ones left out (the first
    # ``base.COMMANDS_KEPT``); None where the reader does not record them
    commands: list[str] | None = None

    def add_text(self, chunk: str) -> None:
        """Collect assistant text (salvage for FALLBACK); a list, since += on a long str copies.
        Only the last ``TEXT_KEPT`` characters or so are kept: a FALLBACK quotes the end."""
        self.text_parts.append(chunk)
        self.text_len += len(chunk)
        while self.text_len > TEXT_KEPT and len(self.text_parts) > 1:
            self.text_len -= len(self.text_parts.pop(0))

    @property
    def text(self) -> str:
        """The assistant text seen so far."""
        return "".join(self.text_parts)


@dataclass(frozen=True)
class Judgement:
    ok: bool
    reason: str                     # short slug: ok, exit-nonzero, status-error, no-result-event, ...
    error: str | None = None


@dataclass(frozen=True)
class ToolCalls:
    """What a worker's stream records of its tool calls (``Executor.tool_calls``): how many it
    made, and the shell commands it ran, in order (None: the stream records tool calls but not
    the commands they ran, as agy's does)."""

    count: int
    commands: tuple[str, ...] | None
