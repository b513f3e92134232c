"""A command unit that prints SIZE bytes on stdout: a ``## Summary`` heading, then every byte
value, a numbered block at a time (not UTF-8, no two blocks alike), written as it goes (its
own memory stays flat). ``sha256(size)`` is what it prints, for a test to compare with.
With MB_PER_S it prints at about that rate (a unit whose output is pushed while it runs).

    python big_output.py SIZE [MB_PER_S]
"""

from __future__ import annotations

import hashlib
import sys
import time

HEAD = b"## Summary\n"


def blocks(size: int):
    yield HEAD[:size]
    size -= len(HEAD)
    i = 0
    while size > 0:
        block = (b"%08d " % i + bytes(range(256)) * 255)[:size]
        yield block
        size -= len(block)
        i += 1


def sha256(size: int) -> str:
    h = hashlib.sha256()
    for block in blocks(size):
        h.update(block)
    return h.hexdigest()


if __name__ == "__main__":
    out = sys.stdout.buffer
    pause = 65536 / (float(sys.argv[2]) * (1 << 20)) if len(sys.argv) > 2 else 0.0
    for b in blocks(int(sys.argv[1])):
        out.write(b)
        if pause:
            out.flush()
            time.sleep(pause)
    out.flush()
