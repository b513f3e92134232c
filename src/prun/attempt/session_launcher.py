"""The session way to launch an attempt: nothing is launched, the unit is handed to the
coordinator (``executors.session``). ``SessionLauncher.start`` writes what the coordinator
hands its subagent (``handoff.md``, and ``unit.json`` with the workspace) and returns its
handle, a ``handoff.HandedOff``.
"""

from __future__ import annotations

from . import statedir
from .handoff import HandedOff

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from .core import Dispatch
    from .launcher import Planned


class SessionLauncher:
    """A session unit, handed to the coordinator (``Launcher``): nothing to plan, no opening
    files kept (no process starts with them), each file synced as it is written."""

    __slots__ = ()

    durable = True
    stages = False

    def plan(self, d: Dispatch) -> Planned:
        return None

    def start(self, d: Dispatch, planned: Planned) -> HandedOff:
        from ..ledger.statuses import OutcomeKind
        from .outcome import Outcome

        text, lines = d.p.executor.hand_off(d.unit())
        d.state.write(statedir.HANDOFF, text)
        d.state.write_json(statedir.UNIT, d.unit_record())  # with its workspace
        outcome = Outcome(OutcomeKind.HANDED_OFF, "handed-off", unit_id=d.p.request.unit_id,
                          attempt_id=d.p.request.attempt_id, executor=d.p.executor.name,
                          state_dir=d.state.path, lines=tuple(lines))
        return HandedOff(outcome, d.state, d.p.result_file)

    async def start_async(self, d: Dispatch, planned: Planned) -> HandedOff:
        return self.start(d, planned)
