"""Best of several candidates: which candidate of a packet wins, by a rule that is recorded.

The candidates of a packet (``prun.plan.candidates``) are judged each like any unit; then,
for each packet, the rule orders them and the first wins:

1. its acceptance check passed (``passed``, then no check, then ``failed``/``timeout``/``error``);
2. no scope problem (``scope-leak``, ``shared-not-owner``, ``prun-folder``);
3. every required result section (``missing-section``, ``empty-section``);
4. its verdict (accepted, then needs-review, then rejected for any other reason);
5. the smaller diff (lines added and deleted, plus one per file);
6. the earlier finish;
7. the lower candidate number.

A candidate the person picked (an ``accept`` or ``include`` decision on its attempt) wins
over the rule. The winner keeps its verdict (``ACCEPTED <packet> candidate=<k> of=<n>
why="..."``); every other is ``NOT-CHOSEN <packet> candidate=<k> reason=<word>``, the word
saying the first step of the rule it lost by (``accept-failed``, ``scope``, ``sections``,
its own first reason for step 4, ``larger-diff``, ``later-finish``, ``higher-number``; or
``picked``: the person picked another).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .verdict import ACCEPTED, NEEDS_REVIEW, NOT_CHOSEN, Candidacy, Report, Verdict

SCOPE = frozenset({"scope-leak", "shared-not-owner", "prun-folder"})
SECTIONS = frozenset({"missing-section", "empty-section"})
_ACCEPT_RANK = {"passed": 0, None: 1}          # anything else (failed, timeout, error): 2
_VERDICT_RANK = {ACCEPTED: 0, NEEDS_REVIEW: 1}  # rejected: 2
# each step of the rule: the word a candidate that lost by it gets, and what the winner's
# ``why`` says of it
_STEPS = (("accept-failed", "its acceptance check passed"),
          ("scope", "it stayed in scope"),
          ("sections", "it has every required section"),
          ("", "its verdict is better"),
          ("larger-diff", "the smaller diff"),
          ("later-finish", "the earlier finish"),
          ("higher-number", "the lower candidate number on a tie"))


@dataclass(frozen=True)
class Entry:
    """One candidate as the rule sees it."""

    verdict: Verdict
    number: int
    finished: float | None

    def key(self) -> tuple[int, int, int, int, int, float, int]:
        v, codes = self.verdict, {r.code for r in self.verdict.reasons}
        accept = v.accept.status if v.accept is not None else None
        return (_ACCEPT_RANK.get(accept, 2), int(bool(codes & SCOPE)),
                int(bool(codes & SECTIONS)), _VERDICT_RANK.get(v.verdict, 2), self.size(),
                self.finished if self.finished is not None else float("inf"), self.number)

    def size(self) -> int:
        change = self.verdict.change
        if change is None:
            return 0
        return sum((f.added or 0) + (f.deleted or 0) + 1 for f in change.files)


def choose(report: Report, groups: Mapping[str, Mapping[str, int]],
           finished: Mapping[str, float | None], picked: Mapping[str, str]) -> dict[str, Candidacy]:
    """Pick the winner of each packet with candidates in ``report`` and mark every candidate
    (``groups``: packet id -> its candidates' unit ids -> their numbers; ``finished``: attempt
    id -> when it finished; ``picked``: unit id -> who picked it, the latest pick last).
    Returns packet id -> the winner's candidacy (what reconcile records)."""
    by_unit = {v.packet_id: v for v in report.verdicts}
    won: dict[str, Candidacy] = {}
    for packet, units in groups.items():
        entries = [Entry(by_unit[u], k, finished.get(by_unit[u].attempt_id or ""))
                   for u, k in units.items() if u in by_unit]
        if not entries:
            continue
        entries.sort(key=Entry.key)
        order = list(picked)   # the latest pick last
        chosen = [e for e in entries if e.verdict.packet_id in picked]
        winner = (max(chosen, key=lambda e: order.index(e.verdict.packet_id)) if chosen
                  else entries[0])
        why = (f"picked by {picked[winner.verdict.packet_id]}" if chosen
               else _why(winner, entries[1] if len(entries) > 1 else None))
        n = len(units)
        winner.verdict.candidate = won[packet] = Candidacy(packet, winner.number, n, why=why)
        for e in entries:
            if e is not winner:
                e.verdict.candidate = Candidacy(packet, e.number, n,
                                                lost="picked" if chosen else _lost(e, winner))
                e.verdict.verdict = NOT_CHOSEN
    return won


def _step(loser: Entry, winner: Entry) -> int:
    """The first step of the rule by which ``winner`` beats ``loser``."""
    return next(i for i, (a, b) in enumerate(zip(winner.key(), loser.key(), strict=True))
                if a != b)


def _lost(loser: Entry, winner: Entry) -> str:
    step = _step(loser, winner)
    word = _STEPS[step][0]
    if not word:   # lost by its verdict: its own first reason
        return loser.verdict.reasons[0].code if loser.verdict.reasons else "verdict"
    return word


def _why(winner: Entry, runner_up: Entry | None) -> str:
    """What made ``winner`` first: the step of the rule that set it above the runner-up."""
    if runner_up is None:
        return "the only candidate judged"
    step = _step(runner_up, winner)
    text = _STEPS[step][1]
    if step == 4:
        return f"{text} ({winner.size()} against {runner_up.size()})"
    return text
