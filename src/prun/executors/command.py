"""Any program as a unit: argv from ``--command '<shell words>'``.

The prompt reaches the program on stdin, or as a path where the argv holds ``{prompt_file}``
(then stdin is closed). Its stdout is the final response; its exit code alone decides success.
Other placeholders: ``{unit_id}``, ``{result_file}``, ``{state_dir}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import UsageError
from .base import Executor, StreamReader

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .records import Judgement, Launch, StreamResult, Unit


def parse_command(text: str | Sequence[object] | None) -> tuple[str, ...]:
    """The argv of a command unit, from shell words or a list; refused when empty or unparsable."""
    if text is None or isinstance(text, str):
        import shlex

        try:
            argv = tuple(shlex.split(text or ""))
        except ValueError as e:
            raise UsageError(f"cannot parse --command: {e}", hint="quote it as shell words")
    else:
        argv = tuple(str(a) for a in text)
    if not argv:
        raise UsageError("the command executor needs a command",
                         hint="pass --command '<program> <args>'")
    return argv


class CommandReader(StreamReader):
    """A command's stdout is its response: the reader points at the file instead of parsing."""

    def finish(self, tail_path: str) -> StreamResult:
        self.result.final_seen = True
        self.result.response_file = tail_path
        return self.result


class Command(Executor):
    name = "command"
    usage_default = (0, 0.0)
    program = ""
    event_stream = False   # stdout is the response, read whole at the end
    takes_command = True

    def build(self, unit: Unit, env: Mapping[str, str]) -> Launch:
        from .records import Launch

        values = {"prompt_file": unit.prompt_file, "unit_id": unit.unit_id,
                  "result_file": unit.result_file, "state_dir": unit.state_dir}
        uses_file = any("{prompt_file}" in a for a in unit.command)
        argv = [_fill(a, values) for a in unit.command]
        return Launch(argv=argv, env=dict(env), stdin_path=None if uses_file else unit.prompt_file)

    def recipients(self, model: str | None) -> tuple[str, ...]:
        """A program on this machine: its data stays local (what the program itself sends is
        the packet author's to bound)."""
        return ("command", "local")

    def reader(self) -> StreamReader:
        return CommandReader()

    def judge(self, exit_code: int, stream: StreamResult) -> Judgement:
        from .records import Judgement

        if exit_code != 0:
            return Judgement(False, "exit-nonzero", f"command exited with code {exit_code}")
        return Judgement(True, "ok")


def _fill(arg: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        arg = arg.replace("{" + key + "}", value)
    return arg
