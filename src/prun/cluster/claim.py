"""prun's claim on an attempt, kept in the scheduler's metadata: what makes a unit run at most
once on a scheduler left at Dask's defaults, which runs a task again when its worker dies.

Each attempt has a record ``[META, attempt id, "claims"]``: one entry per claimer. A worker's
task writes its own entry (keyed by the worker's unique id, valued with its address) *before*
it reads the record, and launches only if its entry is the only one; any other entry means
the attempt was launched already, or given up, and it launches nothing. The coordinator
writes an entry of its own (``COORDINATOR``) to give an attempt up: when it is cancelled
before it started, or when the worker running it died. Every write and read is one message
the scheduler handles in order, so of any two claimers the later one sees the earlier: at most
one worker ever launches an attempt, and once the coordinator's entry is in, none will.
"""

from __future__ import annotations

from typing import Any, NamedTuple

META = "prun-attempts"        # the scheduler's metadata: attempt id -> {"claims": {...}}
CLAIMS = "claims"
COORDINATOR = "coordinator"   # the coordinator's entry; its value says why it gave up
CANCEL, LOST = "cancel", "lost"


def keys(attempt_id: str, claimer: str | None = None) -> list[str]:
    """The metadata keys of the attempt's claims (of one claimer's entry)."""
    return [META, attempt_id, CLAIMS, *([claimer] if claimer else [])]


class Refusal(NamedTuple):
    """Why a claimer must not launch: ``by`` is ``claimed`` (a worker launched it already),
    ``cancel`` (cancelled before it started) or ``lost`` (given up after its worker died)."""

    by: str
    text: str


def verdict(claims: Any, me: str, attempt_id: str) -> Refusal | None:
    """The claim of ``me`` given the record read after writing it: None (launch), or why
    not."""
    others = {k: v for k, v in (claims if isinstance(claims, dict) else {}).items() if k != me}
    if not others:
        return None
    why = others.get(COORDINATOR)
    if why == CANCEL:
        return Refusal(CANCEL, f"attempt {attempt_id} was cancelled before it started")
    if why is not None:
        return Refusal(LOST, f"attempt {attempt_id} was given up after its worker died; "
                             "it is not run again")
    return Refusal("claimed", f"attempt {attempt_id} was launched already (on "
                              f"{next(iter(others.values()))}); not run twice")


def workers(claims: Any) -> list[str]:
    """The addresses of the workers that claimed the attempt, first claimer first."""
    if not isinstance(claims, dict):
        return []
    return [str(v) for k, v in claims.items() if k != COORDINATOR]


def claimed(client: Any, attempt_id: str) -> list[str]:
    """The workers that claimed the attempt, first first, read through ``client`` (a
    ``distributed.Client``)."""
    return workers(client.get_metadata(keys(attempt_id), None))


def give_up(client: Any, attempt_id: str, why: str) -> list[str]:
    """The coordinator's entry written into the attempt's claims through ``client`` (a
    ``distributed.Client``), then the record read back: from now on no worker launches it.
    Returns the workers that claimed it before, first first; any of them may have
    launched it."""
    client.set_metadata(keys(attempt_id, COORDINATOR), why)
    return claimed(client, attempt_id)
