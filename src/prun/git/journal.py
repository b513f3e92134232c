"""The integration journal: what `prun integrate` did to a target, written as it does it, so
that an integrate killed half-way is found and finished by the next one.

One JSON object per line, appended and flushed to disk before the step it announces is relied
on (``<run>/integrate/journal.jsonl``):

    {"op": "begin", "target": T}           an integrate of the run into T started
    {"op": "applying", "target": T, "packet": P, "attempt": A, "backup": B}
                                           P's patch (the change of its attempt A) is about to
                                           be applied; the pre-image of every path it touches
                                           is saved in folder B
    {"op": "applied", "target": T, "packet": P, "attempt": A}    it was
    {"op": "restored", "target": T, "packet": P}   it was not: its paths were put back
    {"op": "holding", "target": T, "packet": P, "attempt": A, "backup": B}
                                           P's applied change is about to be taken out again
                                           (it made the combined check fail), as "applying"
    {"op": "held", "target": T, "packet": P, "attempt": A}       it was: the target no longer
                                           holds it ("restored" if it could not be)
    {"op": "end", "target": T}             that integrate finished

``previous(target)`` reads what earlier integrates left in that target: the packets applied
there, the one that may have been applied in part (``applying`` with neither ``applied`` nor
``restored``) with the folder of its pre-images, and whether the last one was interrupted (a
``begin`` with no ``end``). ``integrated()`` reads which attempts' changes were applied into
any target and not held out of it since (what ``prun clean`` counts as integrated: a later
attempt of the same packet is not, and neither is a line written before attempts were
recorded). A torn last line (a kill while writing it) is ignored.

Each patch's pre-images go in ``backup_dir(target, packet)``: ``<journal's folder>/backup/
<target's key>/<packet>/`` (``prun.git.backup``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field


@dataclass
class Previous:
    applied: list[str] = field(default_factory=list)   # in the order they were applied
    partial: str | None = None                         # applying, never applied
    backup: str | None = None                          # where the partial one's pre-images are
    interrupted: bool = False


class Journal:
    def __init__(self, path: str):
        self.path = path

    def _entries(self) -> list[dict[str, object]]:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill
            if isinstance(entry, dict):
                out.append(entry)
        return out

    def integrated(self) -> set[tuple[str, str]]:
        """(packet, attempt) of every change applied into any target (and not held since)."""
        held: set[tuple[object, str, str]] = set()      # (target, packet, attempt)
        for e in self._entries():
            pid, attempt, op = e.get("packet"), e.get("attempt"), e.get("op")
            if op in ("applied", "held") and isinstance(pid, str) and isinstance(attempt, str):
                (held.add if op == "applied" else held.discard)((e.get("target"), pid, attempt))
        return {(pid, attempt) for _, pid, attempt in held}

    def previous(self, target: str) -> Previous:
        prev = Previous()
        for entry in self._entries():
            if entry.get("target") != target:
                continue
            op, pid = entry.get("op"), entry.get("packet")
            if op == "begin":
                prev.interrupted, prev.partial = True, None
            elif op == "end":
                prev.interrupted = False
            elif op in ("applying", "holding") and isinstance(pid, str):
                backup = entry.get("backup")
                prev.partial, prev.backup = pid, backup if isinstance(backup, str) else None
            elif op == "applied" and isinstance(pid, str):
                prev.partial = prev.backup = None
                if pid not in prev.applied:
                    prev.applied.append(pid)
            elif op == "restored" and isinstance(pid, str):
                prev.partial = prev.backup = None
            elif op == "held" and isinstance(pid, str):
                prev.partial = prev.backup = None
                if pid in prev.applied:
                    prev.applied.remove(pid)
        return prev

    def backup_dir(self, target: str, packet: str) -> str:
        key = hashlib.sha256(target.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        return os.path.join(os.path.dirname(os.path.abspath(self.path)), "backup", key, packet)

    def write(self, op: str, target: str, packet: str | None = None, *,
              attempt: str | None = None, backup: str | None = None) -> None:
        entry: dict[str, str] = {"op": op, "target": target}
        if packet is not None:
            entry["packet"] = packet
        if attempt is not None:
            entry["attempt"] = attempt
        if backup is not None:
            entry["backup"] = backup
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                os.write(fd, (json.dumps(entry) + "\n").encode())
                os.fsync(fd)
            except OSError:   # a full disk: no torn line for the next entry to be glued to
                os.ftruncate(fd, size)
                raise
        finally:
            os.close(fd)
