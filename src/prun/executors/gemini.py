"""Gemini CLI headless (``gemini -p``): Gemini on its own API key or Google account.

argv:  gemini -p <prompt> --output-format stream-json -m <model>
              --approval-mode plan | --yolo [--policy <prun's gemini-no-subagents.toml>]
              [--include-directories <d>]... [--resume <session_id>]

``--policy`` (a unit whose packet does not allot subdispatch, the default): a policy file whose
deny rule for ``invoke_agent`` (Gemini CLI 0.61.0's sub-agent tool) takes the tool out of what
the model is offered.

Its home (``home_files``): ``~/.gemini`` (or ``$GEMINI_CLI_HOME/.gemini``, the variable then
pointed at the unit's home) without its sessions and per-project history (``tmp``,
``history``), agy's folders and bulky downloads; its settings, OAuth credentials and accounts
are copied, and a token it refreshes in a unit stays in that unit's home.

``-m`` is always passed: without it the CLI first makes a classifier call (one more request
and one more source of 429s). Modes: ``plan`` -> ``--approval-mode plan`` (read-only);
``accept-edits`` -> ``--yolo``, the same unattended capability agy units get (without it the
write and shell tools are simply not registered headless, and ``auto_edit`` still leaves the
shell out). No effort flag exists, so a requested effort is dropped (``unit.json`` shows null).

Environment added for the child unless the caller set it: ``GEMINI_CLI_TRUST_WORKSPACE=true``
(without a trust signal the CLI refuses to start, exit 55) and ``GEMINI_CLI_NO_RELAUNCH=true``
(one node process instead of a parent relaunching a child in the same group; about 0.9 s
faster to start). The dispatcher ends whole process groups either way.

stream-json:
  {"type":"init","session_id":...,"model":...}            the only event with the session id
  {"type":"message","role":"user","content":...}
  {"type":"message","role":"assistant","content":"...","delta":true}   concatenated
  {"type":"tool_use","tool_name":...,"tool_id":...,"parameters":{...}}
  {"type":"tool_result","tool_id":...,"status":"success"|"error","error":{...}}
      a shell command is tool ``run_shell_command``, its ``parameters.command``
  {"type":"result","status":"success"|"error","error":{"type","message"},
   "stats":{"total_tokens","input_tokens","output_tokens","cached","input",...,"models":{...}}}

Judgement (both signals): success is exit 0 *and* a ``result`` with ``status:"success"``; exit 0
without a result is a failure (SIGTERM makes the CLI exit 0). Exit codes: HTTP status & 0xFF on
API errors (429 -> 173, 500 -> 244); 41 (auth), 42 (resume), 55 (untrusted folder) are start-up
refusals. Quota (group ``gemini``): exit 173, a quota message, or ``...QuotaError`` on stderr;
``Please retry in Ns`` gives the reset time, the daily quota gives none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .base import COMMANDS_KEPT, ORDINARY, Executor, HomeFiles, StreamReader, as_object
from .settings import Settings

TYPE_CHECKING = False  # the records are imported where used (the dispatcher's fast path)
if TYPE_CHECKING:
    from .base import Event
    from .records import Judgement, Launch, QuotaHit, StreamResult, Unit, Usage

DEFAULT_MODEL = "gemini-3.8-flash"
HOME = HomeFiles(
    paths=(".gemini",),
    skip=("tmp", "history", "antigravity", "antigravity-cli", "whisper_models", "sandbox.venv",
          "cli-browser-profile", "projects.json"),
    env_dirs={"GEMINI_CLI_HOME": ""})
GROUP = "gemini"
EXIT_QUOTA = 173          # 429 & 0xFF
EXIT_RESUME = 42          # the session could not be resumed
STARTUP_REFUSALS = {
    41: "gemini refused to start: invalid auth method (with GOOGLE_GEMINI_BASE_URL set "
        "security.auth.selectedType in ~/.gemini/settings.json)",
    EXIT_RESUME: "gemini could not resume the session (unknown id, or another working folder)",
    55: "gemini refused to start: the folder is not trusted (GEMINI_CLI_TRUST_WORKSPACE=true "
        "or --skip-trust)",
}
_QUOTA_RE = re.compile(r"exceeded your current quota|exhausted your daily quota|quota exceeded|"
                       r"RESOURCE_EXHAUSTED|\b429\b|(?:Terminal|Retryable)QuotaError",
                       re.IGNORECASE)


SHELL_TOOL = "run_shell_command"   # its parameters.command is the shell command


class GeminiReader(StreamReader):
    def __init__(self) -> None:
        super().__init__()
        self._tools: dict[str, str] = {}
        self._shell: dict[str, str] = {}      # run_shell_command tool_id -> its command
        self._refused: set[str] = set()       # tool_ids whose tool_result carries an error
        self.result.commands = []

    def event(self, obj: Event) -> None:
        r = self.result
        kind = obj.get("type")
        if kind == "init":
            r.session_id = _str(obj.get("session_id")) or r.session_id
            r.model = _str(obj.get("model")) or r.model
        elif kind == "message" and obj.get("role") == "assistant":
            if isinstance(obj.get("content"), str):
                r.add_text(obj["content"])
        elif kind == "tool_use":
            r.tool_uses += 1
            tid = str(obj.get("tool_id"))
            self._tools[tid] = _str(obj.get("tool_name")) or "?"
            command = as_object(obj.get("parameters")).get("command")
            if (obj.get("tool_name") == SHELL_TOOL and isinstance(command, str)
                    and len(self._shell) < COMMANDS_KEPT):
                self._shell[tid] = command
        elif kind == "tool_result" and obj.get("status") == "error":
            r.tool_errors += 1
            err = as_object(obj.get("error"))
            if err:
                self._refused.add(str(obj.get("tool_id")))
            r.denials.append({"tool": self._tools.get(str(obj.get("tool_id")), "?"),
                              "by": _str(err.get("type")) or "error",
                              "message": (_str(err.get("message")) or _str(obj.get("output"))
                                          or "tool error")[:500]})
        elif kind == "result":
            r.final_seen = True
            r.status = _str(obj.get("status"))
            err = as_object(obj.get("error"))
            r.error = _str(err.get("message")) or r.error
            r.is_error = r.status != "success"
            stats = obj.get("stats")
            r.usage = stats if isinstance(stats, dict) else None
            r.spend = spend(r.usage)
            if not r.is_error:
                r.response = r.text

    def finish(self, tail_path: str) -> StreamResult:
        """The shell commands run: every ``run_shell_command`` tool_use's
        ``parameters.command``, in order, but those whose tool_result carries an ``error``
        object (the CLI did not run it: ``tool_not_registered``, a policy's refusal)."""
        self.result.commands = [c for tid, c in self._shell.items() if tid not in self._refused]
        return self.result


def spend(stats: Event | None) -> Usage | None:
    """The result event's ``stats``: ``input_tokens`` (cached ones included: its ``input``
    is the uncached part), ``output_tokens``, ``cached``; the per-model entries under
    ``models`` are summed only when the totals are missing. Gemini CLI reports no cost."""
    from .records import Usage, count, total

    s = stats or {}
    models = [m for m in as_object(s.get("models")).values() if isinstance(m, dict)]

    def field(key: str) -> int | None:
        top = count(s.get(key))
        return top if top is not None else total(*(count(m.get(key)) for m in models))

    spent = Usage(tokens_in=field("input_tokens"), tokens_out=field("output_tokens"),
                  tokens_cached=field("cached"))
    return spent if spent.reported else None


class Gemini(Executor):
    name = "gemini"
    program = "gemini"
    bin_env = "PRUN_GEMINI_BIN"
    can_resume = True
    usage_default = (200_000, None)
    read_only_mode = True
    reports_tool_use = True
    prompt_in_argv = True
    split_role = ORDINARY

    def settings(self, env: Mapping[str, str], *, model: str | None = None,
                 effort: str | None = None, timeout_s: float | None = None) -> Settings:
        model = model or env.get("PRUN_GEMINI_MODEL", "").strip() or DEFAULT_MODEL
        return Settings(model=model, effort=None, timeout_s=self.timeout(env, timeout_s))

    def quota_group(self, model: str | None) -> str | None:
        return GROUP

    def recipients(self, model: str | None) -> tuple[str, ...]:
        """Gemini CLI talks to Google, whatever the model."""
        return ("gemini", "google")

    def build(self, unit: Unit, env: Mapping[str, str]) -> Launch:
        from .records import Launch

        argv = [self.binary(env), "-p", unit.prompt, "--output-format", "stream-json",
                "-m", unit.settings.model or DEFAULT_MODEL]
        argv += ["--approval-mode", "plan"] if unit.mode == "plan" else ["--yolo"]
        if not unit.subdispatch:
            argv += ["--policy", no_subagents_policy()]
        for d in unit.add_dirs:
            argv += ["--include-directories", d]
        if unit.resume_id:
            argv += ["--resume", unit.resume_id]
        child_env = dict(env)
        child_env.setdefault("GEMINI_CLI_TRUST_WORKSPACE", "true")
        child_env.setdefault("GEMINI_CLI_NO_RELAUNCH", "true")
        return Launch(argv=argv, env=child_env)

    def home_files(self) -> HomeFiles:
        return HOME

    def reader(self) -> StreamReader:
        return GeminiReader()

    def judge(self, exit_code: int, stream: StreamResult) -> Judgement:
        from .records import Judgement

        if exit_code in STARTUP_REFUSALS:
            return Judgement(False, "startup-refused",
                             f"{STARTUP_REFUSALS[exit_code]} (exit {exit_code})")
        if exit_code != 0:
            what = {EXIT_QUOTA: "HTTP 429", 244: "HTTP 500"}.get(exit_code)
            detail = f" ({what})" if what else ""
            return Judgement(False, "exit-nonzero", stream.error or
                             f"gemini exited with code {exit_code}{detail}")
        if not stream.final_seen:
            return Judgement(False, "no-result-event",
                             "gemini exited 0 with no result event (it does so when stopped)")
        if stream.status != "success":
            return Judgement(False, "status-error",
                             stream.error or f"final result status {stream.status}")
        return Judgement(True, "ok")

    def resume_refused(self, exit_code: int, stream: StreamResult, stderr: str) -> bool:
        return exit_code == EXIT_RESUME   # unknown id, or resumed from another folder

    def quota_hit(self, stream: StreamResult, exit_code: int, stderr: str) -> QuotaHit | None:
        from .records import QuotaHit
        from .resets import reset_from_text

        text = (stream.error or "").strip()
        if not (exit_code == EXIT_QUOTA or _QUOTA_RE.search(text)
                or re.search(r"(?:Terminal|Retryable)QuotaError", stderr or "")):
            return None
        # the daily quota's reset (the server's RetryInfo) is dropped by the CLI: unknown
        daily = "daily quota" in text.lower()
        resets = None if daily else reset_from_text(text) or reset_from_text(stderr)
        first = text.splitlines()[0] if text else "gemini: quota or rate limit (exit 173)"
        return QuotaHit(group=GROUP, resets_at=resets, message=first)


def no_subagents_policy() -> str:
    """The policy file that turns Gemini CLI's sub-agent tool off (shipped with prun)."""
    import os

    from .. import hooks

    return os.path.join(os.path.dirname(os.path.abspath(hooks.__file__)),
                        "gemini-no-subagents.toml")


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None
