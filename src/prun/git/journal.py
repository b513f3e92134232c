"""The integration journal: what `prun integrate` did to a target, written as it does it, so
that an integrate killed half-way is found and finished by the next one.

One JSON object per line, appended and flushed to disk before the step it announces is relied
on (``<run>/integrate/journal.jsonl``):

    {"op": "begin", "target": T}           an integrate of the run into T started
    {"op": "applying", "target": T, "packet": P}   P's patch is about to be applied
    {"op": "applied", "target": T, "packet": P}    it was
    {"op": "end", "target": T}             that integrate finished

``previous(target)`` reads what earlier integrates left in that target: the packets applied
there, the one that may have been applied in part (``applying`` with no ``applied``), and
whether the last one was interrupted (a ``begin`` with no ``end``). A torn last line (a kill
while writing it) is ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field


@dataclass
class Previous:
    applied: list[str] = field(default_factory=list)   # in the order they were applied
    partial: str | None = None                         # applying, never applied
    interrupted: bool = False


class Journal:
    def __init__(self, path: str):
        self.path = path

    def previous(self, target: str) -> Previous:
        prev = Previous()
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            return prev
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill
            if not isinstance(entry, dict) or entry.get("target") != target:
                continue
            op, pid = entry.get("op"), entry.get("packet")
            if op == "begin":
                prev.interrupted, prev.partial = True, None
            elif op == "end":
                prev.interrupted = False
            elif op == "applying" and isinstance(pid, str):
                prev.partial = pid
            elif op == "applied" and isinstance(pid, str):
                prev.partial = None
                if pid not in prev.applied:
                    prev.applied.append(pid)
        return prev

    def write(self, op: str, target: str, packet: str | None = None) -> None:
        entry: dict[str, str] = {"op": op, "target": target}
        if packet is not None:
            entry["packet"] = packet
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(entry) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
