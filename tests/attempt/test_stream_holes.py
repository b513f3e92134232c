"""A worker's stream is read for its data only: a unit that makes its `tail` sparse (its
stdout truncated to gigabytes of holes) costs prun no more reads than the bytes it wrote, and
a `tail` that is not a regular file is never read."""

from __future__ import annotations

import json
import os

from prun import executors
from prun.attempt.statedir import StateDir
from prun.attempt.stream import Follower

INIT = {"event": "init", "conversation_id": "conv-1", "model": "m"}
RESULT = {"event": "result", "result": {"conversation_id": "conv-1", "status": "SUCCESS",
                                        "response": "the answer, read past the holes"}}


def _read_so_far() -> int:
    """Bytes this process has read through read system calls (Linux ``/proc/self/io``)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def test_the_holes_of_a_sparse_stream_are_skipped_not_read(tmp_path):
    with open(tmp_path / "tail", "wb") as f:
        f.write((json.dumps(INIT) + "\n").encode())
        f.seek(4 << 30)                      # 4 GiB of hole, as a truncated stdout leaves
        f.write(("\n" + json.dumps(RESULT) + "\n").encode())
    follower = Follower(executors.get("agy").reader(), StateDir(str(tmp_path)), True)
    before = _read_so_far()
    stream = follower.finish(read=True)
    assert _read_so_far() - before < 1 << 20
    assert stream.session_id == "conv-1" and stream.response == RESULT["result"]["response"]
    assert (tmp_path / "conversation-id").read_text() == "conv-1\n"


def test_a_tail_that_is_not_a_regular_file_is_never_read(tmp_path):
    os.symlink("/dev/zero", tmp_path / "tail")
    follower = Follower(executors.get("agy").reader(), StateDir(str(tmp_path)), True)
    stream = follower.finish(read=True)
    assert follower.refused == "a symbolic link" and stream.response is None
