"""Subdispatch: whether a unit may start other agents (its packet's ``subdispatch``, off by
default), and the refusal ``prun run`` and every dispatch (``prun dispatch``, a run's units,
the library's ``prepare``) give inside a unit that may not.

What decides, inside a sandboxed unit, is the file the sandbox mounts read-only at ``MARKER``
(in the sandbox's own ``/dev``, which outside a sandbox only root can write): the unit can
neither change nor remove it. Its source is one of two files shipped with prun
(``prun/hooks/subdispatch-off.json``, ``-on.json``: ``policy_file``). Without the sandbox it is the
unit's ``PRUN_SUBDISPATCH`` variable (``on`` or ``off``), which a unit can unset: there it is a
guard against accidents.
The other halves of the rule are the agent CLIs masked in the sandbox (``prun.attempt.
launching``) and each CLI's own sub-agent tool turned off (``Executor.build``).
"""

from __future__ import annotations

import os

from ..errors import UsageError

TYPE_CHECKING = False  # typing costs milliseconds on the dispatcher's fast path
if TYPE_CHECKING:
    from collections.abc import Mapping

MARKER = "/dev/prun-unit"       # where the sandbox mounts the policy file
ENV = "PRUN_SUBDISPATCH"         # on | off, in every unit's environment


def policy_file(allowed: bool) -> str:
    """The file the sandbox mounts at ``MARKER`` for a unit that may (or may not) start other
    agents: shipped with prun, never written."""
    from .. import hooks

    return os.path.join(os.path.dirname(os.path.abspath(hooks.__file__)),
                        f"subdispatch-{'on' if allowed else 'off'}.json")


def refusal(env: Mapping[str, str] | None = None) -> UsageError | None:
    """The refusal for starting agents here: inside a unit that may not (the sandbox's
    marker, else the environment, says so); None elsewhere."""
    env = os.environ if env is None else env
    allowed = _from_marker()
    if allowed is None:
        value = env.get(ENV, "").strip().lower()
        if value not in ("on", "off"):
            return None                      # not inside a unit
        allowed = value == "on"
    if allowed:
        return None
    unit = env.get("PRUN_UNIT_ID", "").strip()
    return UsageError(f"subdispatch is off for unit {unit or '?'}: a unit starts no other "
                      "agents unless its packet sets subdispatch: true",
                      hint="report back to the coordinator instead")


def _from_marker() -> bool | None:
    """Whether the sandbox's marker allows it; None where there is none (json is imported
    only then: this runs before the dispatcher's first line)."""
    try:
        with open(MARKER, encoding="utf-8") as f:
            text = f.read(4096)
    except OSError:
        return None
    import json

    try:
        data = json.loads(text)
    except ValueError:
        return False                         # a marker that says nothing allows nothing
    return isinstance(data, dict) and data.get("subdispatch") is True
