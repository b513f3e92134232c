"""A unit the coordinator runs itself, as an in-session subagent (the seed's Sonnet subagent).

It is the only route to the coordinator's own tools (MCP servers, connectors, Artifacts), which
no separate process can reach. prun launches nothing: ``prun dispatch --executor session``
makes the state dir, the workspace and ``handoff.md`` (the prompt plus the unit's contract),
and prints what the coordinator hands its subagent, after the ``STATE-DIR`` line:

    HANDOFF executor=session unit=<id> model=<m> mode=<accept-edits|plan>
    PROMPT-FILE <abs>       the unit's prompt (a copy in the state dir)
    HANDOFF-FILE <abs>      the prompt plus the contract: give this text to the subagent
    RESULT-FILE <abs>       where the subagent writes its result, in one write
    WORKSPACE <abs>         the subagent's working folder
    ADD-DIR <abs>           one line per extra directory (only when given)
    RECEIPT-CMD prun receipt <state-dir> --attempt-id <AGENT-ID>

Each line is a key, one space, then a value running to the end of the line. When the runtime
returns the subagent's identifier, ``prun receipt`` attaches it (``receipt`` in the state dir);
no receipt means not dispatched. There is no process, so no ``dispatch-pid``, ``tail`` or
worker in ``unit.json``; the unit is done when its result file lands. ``outcome.json`` is not written:
there is no exit code to judge.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from .base import SONNET, Executor, StreamReader
from .settings import Settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .base import Event
    from .records import Unit

DEFAULT_MODEL = "sonnet"


class _NoStream(StreamReader):
    def event(self, obj: Event) -> None:  # pragma: no cover - a session unit has no stream
        pass


class Session(Executor):
    name = "session"
    program = ""
    launches_process = False
    session_tools = True
    pool = "sonnet"
    split_role = SONNET

    def settings(self, env: Mapping[str, str], *, model: str | None = None,
                 effort: str | None = None, timeout_s: float | None = None) -> Settings:
        return Settings(model=model or DEFAULT_MODEL, effort=effort,
                        timeout_s=self.timeout(env, timeout_s))

    def quota_group(self, model: str | None) -> str | None:
        return "claude"  # a Sonnet subagent draws on the coordinator's Claude account

    def recipients(self, model: str | None) -> tuple[str, ...]:
        """A subagent of the coordinator's Claude session: Anthropic."""
        return ("session", "anthropic")

    def reader(self) -> StreamReader:
        return _NoStream()

    def hand_off(self, unit: Unit) -> tuple[str, list[str]]:
        receipt = (f"prun receipt {shlex.quote(unit.state_dir)} --attempt-id <AGENT-ID>")
        from .._util.quoting import quote
        from .._util.quoting import rest_of_line as path

        lines = [f"HANDOFF executor=session unit={quote(unit.unit_id)} "
                 f"model={quote(unit.settings.model)} mode={unit.mode}",
                 f"PROMPT-FILE {path(unit.prompt_file)}",
                 f"HANDOFF-FILE {path(unit.state_dir + '/handoff.md')}",
                 f"RESULT-FILE {path(unit.result_file)}",
                 f"WORKSPACE {path(unit.workspace)}",
                 *(f"ADD-DIR {path(d)}" for d in unit.add_dirs),
                 f"RECEIPT-CMD {receipt}"]
        return handoff_text(unit), lines


def handoff_text(unit: Unit) -> str:
    """The prompt followed by the contract every unit works under (a run's brief already
    states it: ``prun.run.brief``)."""
    if unit.briefed:
        return unit.prompt
    if unit.mode == "plan":
        may = "Read-only: do not create, change or delete files anywhere except the result file."
    else:
        may = ("You may edit files in the working folder freely (it is a scratch folder or a "
               "throwaway clone).")
    extra = "".join(f"\n- Extra folder you may use: {d}" for d in unit.add_dirs)
    return (f"{unit.prompt.rstrip()}\n\n"
            f"---\n## Unit contract (prun unit {unit.unit_id})\n\n"
            f"- Working folder: {unit.workspace}{extra}\n"
            f"- {may}\n"
            f"- Never run git commit, push, reset --hard or clean, and never create, delete or "
            f"move branches or tags; leave changes in the working tree for review.\n"
            f"- Write your result to {unit.result_file} in one single write, when you are done.\n")
