"""The data boundary: where a unit's material may go, and how long its evidence is kept.

A packet's ``data.may_go_to`` names the recipients its material may reach: executors (any name
the registry ``prun.executors`` knows) or vendor families (``google``, ``anthropic``,
``openai``, ``local``). Each executor declares, per model, where a unit's data
goes (``Executor.recipients``): its own name, then the families it reaches. A unit may run on
an executor when ``may_go_to`` is empty (no boundary given), names the executor, or names every
family the executor reaches for that model. An executor that declares no family is allowed
only where it is named. Configuration is not disclosure authority: routing chooses only among
allowed executors and never sends a unit elsewhere because a pool is empty.

``data.retention`` has a small grammar, parsed once by ``parse_retention``:

* ``keep``: ``prun clean`` never removes the packet's workspace or evidence;
* ``keep <duration>`` (``keep 30d``): kept until that long after the run finished;
* ``delete``: ``prun clean`` removes the workspace and the evidence in the run dir (results
  and the responses beside them, state dirs, quarantined output, frozen prompts);
* anything else is a note for people, and clean removes the workspaces only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .. import executors
from .._util.timeparse import parse_duration
from ..errors import UsageError

FAMILIES = ("google", "anthropic", "openai", "local")

KEEP = "keep"
DELETE = "delete"
NOTE = "note"        # a value outside the grammar, for people
NONE = "none"        # no retention given


def recipients(executor: str, model: str | None) -> tuple[str, ...]:
    """Where a unit on ``executor`` with ``model`` sends its data (name first, then families)."""
    return executors.get(executor).recipients(model)


def allowed(may_go_to: Iterable[str], executor: str, model: str | None) -> bool:
    """True when a unit on ``executor`` with ``model`` stays inside ``may_go_to``."""
    bound = set(may_go_to)
    if not bound or executor in bound:
        return True
    families = set(recipients(executor, model)[1:])
    return bool(families) and families <= bound


def unknown(may_go_to: Iterable[str]) -> str | None:
    """The first entry of ``may_go_to`` that is neither an executor nor a family, or None
    (a built-in's name is known without reading the installed packages' entry points)."""
    return next((e for e in may_go_to if e not in FAMILIES and not executors.known(e)), None)


def outside(who: str, executor: str, model: str | None, may_go_to: Iterable[str],
            where: str | None = None) -> UsageError:
    """The refusal of a unit whose executor is outside its boundary (``where``: file:line)."""
    reaches = ", ".join(recipients(executor, model)[1:]) or "nothing it declares"
    return UsageError((f"{where}: " if where else "") + f"{who}: executor {executor}"
                      + (f" with model {model}" if model else "")
                      + f" reaches {reaches}, outside the data boundary (may_go_to: "
                      + ", ".join(may_go_to) + ")",
                      hint="name an executor inside it, or executor: auto; a new recipient "
                      "needs its own decision, not a change of configuration")


@dataclass(frozen=True)
class Retention:
    """A parsed ``data.retention``: ``rule`` is keep, delete, note or none."""

    rule: str
    keep_s: float | None = None        # keep <duration>: seconds past the run's end
    text: str | None = None            # the value as written

    def until(self, finished: float) -> float | None:
        """When a ``keep <duration>`` ends, for a run that finished at ``finished``."""
        return finished + self.keep_s if self.keep_s is not None else None

    def as_dict(self) -> dict[str, str | float | None]:
        return {"rule": self.rule, "keep_s": self.keep_s, "text": self.text}


def parse_retention(text: str | None) -> Retention:
    """``keep``, ``keep <duration>``, ``delete``, or a note; UsageError for ``keep <bad>``."""
    if text is None or not text.strip():
        return Retention(NONE, text=text)
    word, _, rest = text.strip().partition(" ")
    if word == DELETE and not rest:
        return Retention(DELETE, text=text)
    if word != KEEP:
        return Retention(NOTE, text=text)
    if not rest.strip():
        return Retention(KEEP, text=text)

    try:
        seconds = parse_duration(rest.strip(), what="retention")
    except UsageError:
        raise UsageError(f"bad retention {text!r}: 'keep' takes a duration",
                         hint="write keep, keep <duration> (keep 30d, keep 12h), delete, or a "
                         "note that does not start with the word keep")
    return Retention(KEEP, keep_s=seconds, text=text)
