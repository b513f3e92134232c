"""Antigravity CLI (``agy``): Gemini by default, a second quota group for Claude and GPT models.

argv:  agy -p <prompt> --output-format stream-json --model <m> [--effort <e>]
           --print-timeout <N>s [--dangerously-skip-permissions] [--sandbox]
           [--add-dir <d>]... [--conversation <id>]

stream-json (one object per line):
  {"event":"init","conversation_id":...}
  {"event":"step_update","step_update":{"step_type":"agent_response","text_delta":...}}
  {"event":"step_update","step_update":{"step_type":"tool","tool_name":...}}
      a tool call (counted); the command a tool ran is not in the event as known, so agy's
      reader records no shell commands (``StreamResult.commands`` None)
  {"event":"result","result":{"conversation_id","status":"SUCCESS|ERROR","response","error",
                              "num_turns","duration_seconds","usage"}}

Its home (``home_files``): ``~/.gemini/antigravity-cli`` without its conversations, brain,
history, browser recordings and logs. No flag of agy is known to turn a sub-agent off: none is
passed (the other agent CLIs are masked and ``prun`` refuses, as for every unit).

agy exits 0 even when the final status is ERROR (a quota stop carries the opening narration in
``response``), so the final status is consulted after exit 0. ``--continue`` resumes the most
recent conversation globally and is never used; ``--conversation <id>`` names one.

The quota gate (``Agy.gate``, decided before every launch; docs/quota.md). agy meters two
groups apart: Gemini models (``agy-gemini``) and the Claude-and-GPT models (``agy-claude-gpt``).
Reading the snapshot (``prun.quota.gate.readings``):

1. Claude-and-GPT empty, Gemini not, a Claude-or-GPT model asked: run the Gemini default
   instead; the decision carries the ``MODEL-FALLBACK ...`` line.
2. Gemini empty and a Gemini model would run: refuse (exit 75); never move into the metered
   group on its own; the message names ANTIGRAVITY_DISPATCH_MODEL.
3. Both empty: refuse (exit 75) with both reset times.
4. A group the snapshot does not report is unknown, never empty; an unreadable snapshot skips
   the gate with one warning line; ``PRUN_AGY_QUOTA_GATE=off`` disables it.

Anything else: launch as asked.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping

from ..errors import UsageError
from .base import ORDINARY, Executor, HomeFiles, StreamReader
from .settings import Settings

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from datetime import datetime
    from typing import ClassVar

    from ..quota.gate import GateDecision
    from .base import Event
    from .records import Launch, QuotaHit, StreamResult, Unit, Usage

DEFAULT_MODEL = "gemini-3.8-flash-high"
DEFAULT_EFFORT = "high"
# Agy Ultra's second quota group: metered apart from Gemini, and --effort is rejected for them.
CLAUDE_GPT_MODELS = ("claude-sonnet-4-6", "claude-opus-4-6-thinking", "gpt-oss-120b-medium")

HOME = HomeFiles(paths=(".gemini/antigravity-cli",),
                 skip=("conversations", "brain", "implicit", "history.jsonl",
                       "browser_recordings", "logs", "cache"))

GROUP_GEMINI = "agy-gemini"
GROUP_CLAUDE_GPT = "agy-claude-gpt"
FALLBACK_REASON = "claude-and-gpt-quota-exhausted"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def is_gemini(model: str) -> bool:
    return model.strip().lower().startswith("gemini")


def parse_sandbox(raw: str | None) -> bool:
    """PRUN_AGY_SANDBOX: 1/true/yes/on adds --sandbox; 0/false/no/off, empty or unset omit it."""
    value = (raw or "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise UsageError(f"bad PRUN_AGY_SANDBOX value {raw!r}",
                     hint="use 1/true/yes/on to add --sandbox, or 0/false/no/off/empty to omit it")


_RESETS_RE = re.compile(
    r"resets?\s+in\s+((?:\d+\s*(?:d|h|m|s)[a-z]*\s*)+)", re.IGNORECASE)
_RESET_PART = re.compile(r"(\d+)\s*(d|h|m|s)", re.IGNORECASE)
_QUOTA_RE = re.compile(r"quota (?:reached|exceeded|exhausted)|rate.?limit|resource.?exhausted",
                       re.IGNORECASE)


def resets_at_from_text(text: str, now: datetime | None = None) -> str | None:
    """``... Resets in 1h 34m.`` -> an ISO time, or None when the text names no reset."""
    from datetime import UTC, datetime, timedelta

    m = _RESETS_RE.search(text or "")
    if not m:
        return None
    scale = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    seconds = sum(int(n) * scale[u.lower()] for n, u in _RESET_PART.findall(m.group(1)))
    now = now or datetime.now(UTC)
    return (now + timedelta(seconds=seconds)).isoformat(timespec="seconds")


class AgyReader(StreamReader):
    def event(self, obj: Event) -> None:
        r = self.result
        kind = obj.get("event")
        if kind == "init":
            r.session_id = _str(obj.get("conversation_id")) or r.session_id
            r.model = _str(obj.get("model")) or r.model
        elif kind == "step_update":
            step = obj.get("step_update")
            if not isinstance(step, dict):
                return
            stype = step.get("step_type")
            if stype == "agent_response" and isinstance(step.get("text_delta"), str):
                r.add_text(step["text_delta"])
            elif stype == "tool":
                r.tool_uses += 1
            if isinstance(step.get("error"), str) and step["error"]:
                r.error = step["error"]
        elif kind == "result":
            res = obj.get("result")
            if not isinstance(res, dict):
                res = {}
            r.final_seen = True
            r.status = _str(res.get("status"))
            r.response = res.get("response") if isinstance(res.get("response"), str) else None
            r.error = _str(res.get("error")) or r.error
            r.usage = res.get("usage") if isinstance(res.get("usage"), dict) else None
            r.spend = spend(r.usage, res)
            r.session_id = _str(res.get("conversation_id")) or r.session_id


def spend(usage: Event | None, result: Event) -> Usage | None:
    """The result's ``usage``, read by these names only: ``input_tokens`` (cached ones
    included), ``output_tokens``, ``cached_tokens``; a cost only as ``cost_usd`` in the usage
    or the result. agy's usage record has not been measured field by field: any other field
    stays in the raw ``usage`` and counts for nothing."""
    from .records import Usage, count, dollars

    u = usage or {}
    cost = u.get("cost_usd") if u.get("cost_usd") is not None else result.get("cost_usd")
    spent = Usage(tokens_in=count(u.get("input_tokens")), tokens_out=count(u.get("output_tokens")),
                  tokens_cached=count(u.get("cached_tokens")), cost_usd=dollars(cost))
    return spent if spent.reported else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _unknown_last(when: str) -> str:
    return "~" if when == "unknown" else when  # normalised ISO times sort as text


class Agy(Executor):
    name = "agy"
    program = "agy"
    bin_env = "PRUN_AGY_BIN"
    can_resume = True
    usage_default = (200_000, None)
    supports_effort = True
    read_only_mode = True
    reports_tool_use = True
    prompt_in_argv = True
    timeout_env = "ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS"
    timeout_grace_s = 30.0
    split_role = ORDINARY
    # the gate runs the Gemini default when the Claude-and-GPT group is empty (MODEL-FALLBACK)
    model_fallback: ClassVar[Mapping[str, str]] = {GROUP_CLAUDE_GPT: GROUP_GEMINI}
    fallback_label = "the Gemini default"

    def settings(self, env: Mapping[str, str], *, model: str | None = None,
                 effort: str | None = None, timeout_s: float | None = None) -> Settings:
        model = (model or env.get("ANTIGRAVITY_DISPATCH_MODEL", "").strip() or DEFAULT_MODEL)
        effort = (effort or env.get("ANTIGRAVITY_DISPATCH_EFFORT", "").strip() or DEFAULT_EFFORT)
        sandbox = parse_sandbox(env.get("PRUN_AGY_SANDBOX"))
        return Settings(model=model, effort=effort if is_gemini(model) else None,
                        timeout_s=self.timeout(env, timeout_s), extra={"sandbox": sandbox})

    def quota_group(self, model: str | None) -> str:
        if not model or is_gemini(model):
            return GROUP_GEMINI
        return GROUP_CLAUDE_GPT

    def quota_groups(self) -> tuple[str, ...]:
        return (GROUP_GEMINI, GROUP_CLAUDE_GPT)

    def quota_probe(self, group: str) -> tuple[str, ...]:
        """agy's print-mode ``/quota`` (``prun.executors.agy_quota``)."""
        return (sys.executable, "-m", "prun.executors.agy_quota")

    def gate(self, settings: Settings, env: Mapping[str, str]) -> GateDecision | None:
        """agy's quota gate (the module's docstring has the rules)."""
        from ..errors import GateRefusal
        from ..quota.gate import GateDecision, readings, reset_of, switched_off

        if switched_off(env, "PRUN_AGY_QUOTA_GATE"):
            return None
        requested = self.quota_group(settings.model)
        states = readings((GROUP_GEMINI, GROUP_CLAUDE_GPT), env, self.quota_probe)
        if states is None:
            return None
        gem, other = states[GROUP_GEMINI], states[GROUP_CLAUDE_GPT]
        model = settings.model or DEFAULT_MODEL
        if gem.empty and other.empty:
            # When could this unit run again: on its own group's reset, or (for a Claude-or-GPT
            # model) on either reset, since Gemini would then take it as a fallback.
            candidates = [gem, other] if requested == GROUP_CLAUDE_GPT else [gem]
            first = min((reset_of(s) for s in candidates), key=_unknown_last)
            raise GateRefusal(
                f"both agy quota groups are empty ({GROUP_GEMINI} resets {reset_of(gem)}, "
                f"{GROUP_CLAUDE_GPT} resets {reset_of(other)}); {model} was not launched",
                group=requested, resets_at=None if first == "unknown" else first,
                hint="wait for a reset or route the unit to another executor (claude, gemini)",
                note=(f"QUOTA-EXHAUSTED model={model} groups={GROUP_GEMINI},{GROUP_CLAUDE_GPT} "
                      f"resets={reset_of(gem)},{reset_of(other)}"))
        if requested == GROUP_GEMINI and gem.empty:
            when = reset_of(gem)
            raise GateRefusal(
                f"the agy Gemini quota group ({GROUP_GEMINI}) is empty until {when}; "
                f"{model} was not launched. prun never moves a unit into the metered "
                "Claude-and-GPT group on its own: to spend that group, set "
                f"ANTIGRAVITY_DISPATCH_MODEL to one of its models ({', '.join(CLAUDE_GPT_MODELS)})",
                group=GROUP_GEMINI, resets_at=None if when == "unknown" else when,
                hint="or wait for the reset, or route the unit to another executor",
                note=f"QUOTA-EXHAUSTED model={model} groups={GROUP_GEMINI} resets={when}")
        if requested == GROUP_CLAUDE_GPT and other.empty:
            effort = env.get("ANTIGRAVITY_DISPATCH_EFFORT", "").strip() or DEFAULT_EFFORT
            return GateDecision(
                settings.replace(model=DEFAULT_MODEL, effort=effort),
                f"MODEL-FALLBACK from={model} to={DEFAULT_MODEL} reason={FALLBACK_REASON} "
                f"resets={reset_of(other)}")
        return None

    def recipients(self, model: str | None) -> tuple[str, ...]:
        """Antigravity is a Google service, so every unit reaches google; its Claude models
        (``CLAUDE_GPT_MODELS``) reach anthropic too, gpt-oss reaches openai. A model prun does
        not know is taken to reach both."""
        if not model or is_gemini(model):
            return ("agy", "google")
        name = model.strip().lower()
        if name.startswith("claude"):
            return ("agy", "google", "anthropic")
        if name.startswith("gpt"):
            return ("agy", "google", "openai")
        return ("agy", "google", "anthropic", "openai")

    def build(self, unit: Unit, env: Mapping[str, str]) -> Launch:
        from .records import Launch

        s = unit.settings
        argv = [self.binary(env), "-p", unit.prompt, "--output-format", "stream-json",
                "--model", s.model or DEFAULT_MODEL]
        if s.effort and is_gemini(s.model or DEFAULT_MODEL):
            argv += ["--effort", s.effort]
        argv += ["--print-timeout", f"{int(s.timeout_s)}s"]
        if unit.mode == "accept-edits":
            argv.append("--dangerously-skip-permissions")
        if s.extra.get("sandbox"):
            argv.append("--sandbox")
        for d in unit.add_dirs:
            argv += ["--add-dir", d]
        if unit.resume_id:
            argv += ["--conversation", unit.resume_id]
        return Launch(argv=argv, env=dict(env))

    def home_files(self) -> HomeFiles:
        return HOME

    def reader(self) -> StreamReader:
        return AgyReader()

    def quota_hit(self, stream: StreamResult, exit_code: int, stderr: str) -> QuotaHit | None:
        from .records import QuotaHit

        text = stream.error or ""
        if (stream.status or "").upper() == "SUCCESS" or not _QUOTA_RE.search(text):
            return None
        return QuotaHit(group=None, resets_at=resets_at_from_text(text),
                        message=text.strip().splitlines()[0] if text.strip() else text)
