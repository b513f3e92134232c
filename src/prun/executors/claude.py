"""Claude Code headless (``claude -p``): Sonnet units on the current Claude account.

argv:  claude -p <prompt> --output-format stream-json --verbose --model <m> [--effort <e>]
              --permission-mode plan|bypassPermissions|acceptEdits
              --settings <json: prun's PreToolUse guard hook>
              [--disallowedTools Agent,Task,Workflow,SendMessage,ListAgents]
              [--resume <session_id>] [--add-dir <d>]...

``--disallowedTools`` (a unit whose packet does not allot subdispatch, the default): Claude
Code's own sub-agent tool (``Agent``; ``Task`` in the init event's tool list and in older
versions), its multi-agent ``Workflow`` and the tools that message other agents and sessions
(``SendMessage``, ``ListAgents``) are not offered to the model (2.1.332: gone from the request's
tools).

Its home (``home_files``): ``~/.claude.json`` and ``~/.claude`` (or ``$CLAUDE_CONFIG_DIR``,
then pointed at the copy), without its sessions (``projects``), history, todos, logs, caches,
backups and installed versions; the OAuth credentials (``.credentials.json``) are copied with
the rest, and a token Claude Code refreshes in a unit stays in that unit's home.

``--verbose`` is required with stream-json under ``-p`` (without it: no stdout, exit 1). Modes:
``plan`` -> ``--permission-mode plan`` (read-only); ``accept-edits`` -> ``bypassPermissions``,
the same unattended capability agy units get (``acceptEdits`` lets Write through but denies
most shell commands, so a unit could not run its checks). ``PRUN_CLAUDE_PERMISSION_MODE=
acceptEdits`` chooses the narrower mode. Claude refuses bypass as root unless ``IS_SANDBOX=1``;
prun does not set that for the caller (a scratch dir or clone is not a sandbox) and refuses such
a unit before creating anything, naming both ways out.

Every unit gets prun's guard (``prun/hooks/claude_guard.py``) as a PreToolUse hook on Bash: it
refuses commit, push, reset --hard, clean, branch and tag changes; the refusal comes back as
the tool's error result, so it shows in the tail, and is counted in ``denials``.

stream-json (one object per line; key order varies, so lines are parsed, never prefix-matched):
  {"type":"system","subtype":"init","session_id":...,"model":...,"permissionMode":...}
  {"type":"assistant","message":{"id":...,"content":[{"type":"text"|"tool_use",...}]},...}
      one event per content block; blocks sharing ``message.id`` belong to one turn; a shell
      command is a ``tool_use`` block named ``Bash``, its ``input.command``
  {"type":"user","message":{"content":[{"type":"tool_result","is_error":...}]},...}
  {"type":"system","subtype":"permission_denied","tool_name":...,"message":...}
  {"type":"system","subtype":"api_retry","attempt":...,"error_status":429,"error":...}
  {"type":"result","subtype":"success"|"error_during_execution","is_error":...,
   "api_error_status":429|500|null,"result":...,"errors":[...],"permission_denials":[...],
   "total_cost_usd":...,"usage":{"input_tokens","output_tokens",
   "cache_creation_input_tokens","cache_read_input_tokens",...}}

Judgement (both signals): success is exit 0 *and* a ``result`` with ``is_error:false``.
``subtype`` says ``success`` even after a 429, a 500 or Claude's own timeout, so it is not
trusted; an ``error_during_execution`` result (unknown resume id) has ``errors[]`` and no
``result``. A 429 (``api_error_status``) is a quota hit on group ``claude``; its reset time is
known only when the server's message text names one.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping

from ..errors import UsageError
from .base import COMMANDS_KEPT, SONNET, Executor, HomeFiles, StreamReader, as_object
from .settings import Settings

TYPE_CHECKING = False  # the records are imported where used (the dispatcher's fast path)
if TYPE_CHECKING:
    from .base import Event
    from .records import Judgement, Launch, QuotaHit, StreamResult, Unit, Usage

DEFAULT_MODEL = "sonnet"
EFFORTS = ("low", "medium", "high", "xhigh", "max")
EDIT_PERMISSION_MODES = ("bypassPermissions", "acceptEdits")
GROUP = "claude"
# Claude Code's tools that start or message other agents: off unless the packet allots them
SUBAGENT_TOOLS = ("Agent", "Task", "Workflow", "SendMessage", "ListAgents")
HOME = HomeFiles(
    paths=(".claude.json", ".claude"),
    skip=("projects", "sessions", "session-env", "history.jsonl", "todos", "shell-snapshots",
          "file-history", "paste-cache", "plans", "statsig", "telemetry", "logs", "debug",
          "cache", "backups", "ide", "local", "downloads", "marketplaces"),
    env_dirs={"CLAUDE_CONFIG_DIR": ".claude"})


def guard_settings(python: str | None = None) -> str:
    """The ``--settings`` JSON that installs prun's guard as a PreToolUse hook on Bash."""
    from ..hooks import claude_guard

    command = f"{shlex.quote(python or sys.executable)} {shlex.quote(claude_guard.__file__)}"
    return json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": command, "timeout": 30}]}]}},
        separators=(",", ":"))


class ClaudeReader(StreamReader):
    def __init__(self) -> None:
        super().__init__()
        self._messages: set[str] = set()
        self._tools: dict[str, str] = {}      # tool_use id -> tool name
        self._denied: set[str] = set()        # tool_use ids already in denials
        self._bash: dict[str, str] = {}       # Bash tool_use id -> its input.command
        self.result.commands = []

    def event(self, obj: Event) -> None:
        r = self.result
        kind, sub = obj.get("type"), obj.get("subtype")
        sid = _str(obj.get("session_id"))
        if kind == "system" and sub == "init":
            r.session_id = sid or r.session_id
            r.model = _str(obj.get("model")) or r.model
        elif sid and not r.session_id and kind != "result":
            r.session_id = sid
        if kind == "assistant":
            self._assistant(obj)
        elif kind == "user":
            self._user(obj)
        elif kind == "system" and sub == "permission_denied":
            self._deny(_str(obj.get("tool_use_id")), _str(obj.get("tool_name")),
                       _str(obj.get("message")) or "permission denied")
        elif kind == "system" and sub == "api_retry":
            r.retries += 1
        elif kind == "result":
            self._result(obj)

    def _assistant(self, obj: Event) -> None:
        r = self.result
        msg = as_object(obj.get("message"))
        mid = _str(msg.get("id"))
        if mid and mid not in self._messages:  # one turn may arrive as several events
            self._messages.add(mid)
            r.turns += 1
            if r.text_parts and not r.text_parts[-1].endswith("\n"):
                r.add_text("\n")
        for block in msg.get("content") or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                r.add_text(block["text"])
            elif block.get("type") == "tool_use":
                tid = _str(block.get("id")) or f"tool-{r.tool_uses}"
                if tid not in self._tools:
                    r.tool_uses += 1
                self._tools[tid] = _str(block.get("name")) or "?"
                command = as_object(block.get("input")).get("command")
                if (block.get("name") == "Bash" and isinstance(command, str)
                        and len(self._bash) < COMMANDS_KEPT):
                    self._bash[tid] = command
        if obj.get("is_api_error_message"):
            r.error = _block_text(msg) or r.error
            if isinstance(status := obj.get("api_error_status"), int):
                r.api_error_status = status

    def finish(self, tail_path: str) -> StreamResult:
        """The shell commands run: every Bash ``tool_use`` block's ``input.command``, in
        order, but those refused (a ``permission_denied`` event, the result's
        ``permission_denials``, prun's guard)."""
        self.result.commands = [c for tid, c in self._bash.items() if tid not in self._denied]
        return self.result

    def _user(self, obj: Event) -> None:
        msg = as_object(obj.get("message"))
        content = msg.get("content")
        for block in content if isinstance(content, list) else ():
            if not (isinstance(block, dict) and block.get("type") == "tool_result"
                    and block.get("is_error") is True):
                continue
            self.result.tool_errors += 1
            text = _content_text(block.get("content"))
            if "prun guard:" in text:
                tid = _str(block.get("tool_use_id"))
                self._deny(tid, self._tools.get(tid or "", "Bash"), text, by="prun-guard")

    def _deny(self, tool_id: str | None, tool: str | None, message: str,
              by: str = "permission") -> None:
        if tool_id and tool_id in self._denied:
            return
        if tool_id:
            self._denied.add(tool_id)
        self.result.denials.append({"tool": tool or "?", "by": by,
                                    "message": message.strip()[:500]})

    def _result(self, obj: Event) -> None:
        r = self.result
        r.final_seen = True
        r.is_error = obj.get("is_error") is True
        subtype = _str(obj.get("subtype"))
        r.status = "error" if r.is_error else subtype
        if subtype and subtype != "success":
            r.is_error = True
            r.status = subtype
        # (its session_id is not taken: without an init, e.g. an unknown resume id, it is a
        # placeholder uuid that names no conversation)
        text = obj.get("result") if isinstance(obj.get("result"), str) else None
        errors = [e for e in obj.get("errors") or () if isinstance(e, str)]
        if isinstance(status := obj.get("api_error_status"), int):
            r.api_error_status = status
        r.api_error_type = _str(obj.get("api_error_type")) or r.api_error_type
        r.usage = obj.get("usage") if isinstance(obj.get("usage"), dict) else None
        r.spend = spend(r.usage, obj.get("total_cost_usd"))
        if r.is_error:
            r.error = "; ".join(errors) or text or r.error or "claude reported an error"
            if r.api_error_status:
                r.error = f"{r.error} [api_error_status={r.api_error_status}]"
        else:
            r.response = text
        for d in obj.get("permission_denials") or ():
            if isinstance(d, dict):
                self._deny(_str(d.get("tool_use_id")), _str(d.get("tool_name")),
                           json.dumps(d.get("tool_input"))[:300] if d.get("tool_input") else
                           "permission denied")


class Claude(Executor):
    name = "claude"
    program = "claude"
    bin_env = "PRUN_CLAUDE_BIN"
    can_resume = True
    usage_default = (200_000, 1.0)
    supports_effort = True
    read_only_mode = True
    reports_tool_use = True
    prompt_in_argv = True
    pool = "sonnet"
    split_role = SONNET

    def settings(self, env: Mapping[str, str], *, model: str | None = None,
                 effort: str | None = None, timeout_s: float | None = None) -> Settings:
        model = model or env.get("PRUN_CLAUDE_MODEL", "").strip() or DEFAULT_MODEL
        effort = effort or env.get("PRUN_CLAUDE_EFFORT", "").strip() or None
        if effort and effort not in EFFORTS:
            raise UsageError(f"bad claude effort {effort!r}", hint="use " + ", ".join(EFFORTS))
        edit_mode = env.get("PRUN_CLAUDE_PERMISSION_MODE", "").strip() or "bypassPermissions"
        if edit_mode not in EDIT_PERMISSION_MODES:
            raise UsageError(f"bad PRUN_CLAUDE_PERMISSION_MODE {edit_mode!r}",
                             hint="use bypassPermissions (default) or acceptEdits")
        return Settings(model=model, effort=effort, timeout_s=self.timeout(env, timeout_s),
                        extra={"edit_permission_mode": edit_mode})

    def preflight(self, mode: str, settings: Settings, env: Mapping[str, str]) -> None:
        bypass = settings.extra.get("edit_permission_mode") == "bypassPermissions"
        if (mode == "accept-edits" and bypass and hasattr(os, "geteuid") and os.geteuid() == 0
                and env.get("IS_SANDBOX", "").strip() != "1"):
            raise UsageError(
                "claude refuses bypass permissions as root unless IS_SANDBOX=1",
                hint="set IS_SANDBOX=1 if the unit's workspace is disposable, or "
                     "PRUN_CLAUDE_PERMISSION_MODE=acceptEdits (edits only), or --mode plan")

    def quota_group(self, model: str | None) -> str | None:
        return GROUP

    def quota_probe(self, group: str) -> tuple[str, ...]:
        """Claude Code's rate-limit readout (``prun.executors.claude_quota``)."""
        return (sys.executable, "-m", "prun.executors.claude_quota")

    def recipients(self, model: str | None) -> tuple[str, ...]:
        """Claude Code talks to Anthropic, whatever the model."""
        return ("claude", "anthropic")

    def build(self, unit: Unit, env: Mapping[str, str]) -> Launch:
        s = unit.settings
        from .records import Launch

        argv = [self.binary(env), "-p", unit.prompt, "--output-format", "stream-json",
                "--verbose", "--model", s.model or DEFAULT_MODEL]
        if s.effort:
            argv += ["--effort", s.effort]
        perm = "plan" if unit.mode == "plan" else str(
            s.extra.get("edit_permission_mode") or "bypassPermissions")
        argv += ["--permission-mode", perm, "--settings", guard_settings()]
        if not unit.subdispatch:
            argv += ["--disallowedTools", ",".join(SUBAGENT_TOOLS)]
        if unit.resume_id:
            argv += ["--resume", unit.resume_id]
        for d in unit.add_dirs:  # variadic in claude: kept last, after every other option
            argv += ["--add-dir", d]
        return Launch(argv=argv, env=dict(env))

    def home_files(self) -> HomeFiles:
        return HOME

    def signed_in(self, env: Mapping[str, str]) -> bool | None:
        """Yes when a key or token is in the environment or its OAuth credentials file
        exists; else it cannot be told offline (a Mac keeps them in the Keychain)."""
        if any(env.get(k, "").strip() for k in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN")):
            return True
        folder = env.get("CLAUDE_CONFIG_DIR", "").strip() or \
            os.path.join(env.get("HOME", "") or os.path.expanduser("~"), ".claude")
        return True if os.path.isfile(os.path.join(folder, ".credentials.json")) else None

    def reader(self) -> StreamReader:
        return ClaudeReader()

    def judge(self, exit_code: int, stream: StreamResult) -> Judgement:
        from .records import Judgement

        if stream.final_seen and stream.is_error:
            return Judgement(False, "api-error" if stream.api_error_status else "status-error",
                             stream.error)
        if exit_code != 0:
            return Judgement(False, "exit-nonzero",
                             stream.error or f"claude exited with code {exit_code}")
        if not stream.final_seen:
            return Judgement(False, "no-result-event", "claude's stream ended with no result event")
        return Judgement(True, "ok")

    def resume_refused(self, exit_code: int, stream: StreamResult, stderr: str) -> bool:
        # an unknown --resume id: no init event (no session id), one error_during_execution
        # result before any turn ran
        return (stream.final_seen and stream.session_id is None
                and stream.status == "error_during_execution"
                and not stream.turns)

    def quota_hit(self, stream: StreamResult, exit_code: int, stderr: str) -> QuotaHit | None:
        from .records import QuotaHit
        from .resets import reset_from_text

        if stream.api_error_status != 429 and stream.api_error_type != "rate_limit_error":
            return None
        text = (stream.error or "").strip()
        return QuotaHit(group=GROUP, resets_at=reset_from_text(text),
                        message=text.splitlines()[0] if text else "claude: rate limited (429)")


def spend(usage: Event | None, cost: object) -> Usage | None:
    """The result event's ``usage`` and ``total_cost_usd``. Anthropic's ``input_tokens``
    leaves out the prompt tokens written to or read from the cache, so they are added back:
    in = input + cache creation + cache read; cached = cache read."""
    from .records import Usage, count, dollars, total

    u = usage or {}
    read = count(u.get("cache_read_input_tokens"))
    spent = Usage(tokens_in=total(count(u.get("input_tokens")),
                                  count(u.get("cache_creation_input_tokens")), read),
                  tokens_out=count(u.get("output_tokens")), tokens_cached=read,
                  cost_usd=dollars(cost))
    return spent if spent.reported else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content
                         if isinstance(c, dict) and isinstance(c.get("text"), str))
    return ""


def _block_text(msg: Event) -> str | None:
    return _content_text(msg.get("content")) or None
