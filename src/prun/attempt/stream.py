"""The worker's stream as read so far (``Follower``): each new complete line goes to the
executor's reader, the conversation id to the state dir as soon as it is known. A line that is
not a JSON object is counted (``StreamResult.bad_lines``) and the attempt's outcome notes it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .._util.fsutil import UnsafeFile, open_regular
from . import statedir

if TYPE_CHECKING:
    from ..executors.base import StreamReader
    from ..executors.records import StreamResult

SEEK_DATA, SEEK_HOLE = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
READ_BYTES = 1 << 20          # the stream is read this much at a time...
MAX_LINE_BYTES = 4 << 20      # ...and a line longer than this is skipped (counted as bad)


class Follower:
    """The worker's stream (``tail`` in its state dir) as read so far: each new complete line
    goes to the executor's reader, the conversation id to the state dir as soon as it is
    known. A command's output is not an event stream: it is read whole at the end.

    Memory stays bounded whatever the stream's size: it is read ``READ_BYTES`` at a time,
    and a line that grows past ``MAX_LINE_BYTES`` is dropped as it is read (one bad line).
    A tail that is not a regular file (a link, a FIFO the unit put in its place) is never
    read: ``refused`` says what it is, and the attempt fails for it; a hole in it (a stdout
    truncated to gigabytes) is skipped, not read."""

    def __init__(self, reader: StreamReader, state: statedir.StateDir, event_stream: bool):
        self.reader = reader
        self.state = state
        self.event_stream = event_stream
        self.offset = 0              # bytes of the tail read so far
        self.rest = b""              # the last, incomplete line
        self.skipping = False        # inside a line too long to keep
        self.session_known = False   # the conversation id is in the state dir
        self.refused: str | None = None  # what the tail turned out to be, not a regular file

    def pump(self) -> None:
        """Feed the stream's new complete lines to the reader; record the session id early."""
        if not self.event_stream or self.refused:
            return

        try:
            fd = open_regular(self.state.file(statedir.TAIL))
        except UnsafeFile as e:   # the unit put something else in its place: never read
            self.refused = e.what
            return
        except OSError:
            return
        try:
            while True:
                chunk = os.pread(fd, self._data_ahead(fd), self.offset)
                if not chunk:
                    break
                self.offset += len(chunk)
                self._lines(chunk)
        except OSError:
            pass
        finally:
            os.close(fd)
        self.record_session()

    def _data_ahead(self, fd: int) -> int:
        """How much to read next: the data at the read position, a hole before it skipped. A
        stream is written, never made sparse: a hole is a unit's truncation of its stdout, so
        its gigabytes of zeros are never read (the line it cuts is bad)."""
        if SEEK_DATA is None or SEEK_HOLE is None:
            return READ_BYTES
        try:
            data = os.lseek(fd, self.offset, SEEK_DATA)
            hole = os.lseek(fd, data, SEEK_HOLE)
        except OSError:   # no data left (ENXIO), or not on this file system: read on
            return READ_BYTES
        if data > self.offset:
            self.offset = data
            self.rest, self.skipping = b"", True
            self.reader.result.bad_lines += 1
        return max(1, min(READ_BYTES, hole - data))

    def _lines(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        last = lines.pop()
        for i, line in enumerate(lines):
            if i == 0:
                line, self.rest = self.rest + line, b""
                if self.skipping:
                    self.skipping = False
                    continue
            self.reader.feed(line.decode("utf-8", "replace"))
        if lines:
            self.rest = last
        elif not self.skipping:
            self.rest += last
        if len(self.rest) > MAX_LINE_BYTES:
            self.rest, self.skipping = b"", True
            self.reader.result.bad_lines += 1

    def finish(self, read: bool) -> StreamResult:
        """What the whole stream said; ``read``: read what is left of it first, its last line
        even without a newline."""
        if read:
            self.pump()
            if self.rest:
                self.reader.feed(self.rest.decode("utf-8", "replace"))
                self.rest = b""
        stream = self.reader.finish(self.state.file(statedir.TAIL))
        self.record_session()
        return stream

    def record_session(self) -> None:
        sid = self.reader.result.session_id
        if sid and not self.session_known:
            try:
                self.state.write(statedir.CONVERSATION_ID, sid)
            except OSError:   # a full disk: tried again at the next read
                return
            self.session_known = True
