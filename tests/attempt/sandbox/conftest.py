"""Fixtures for containment tests: a sandbox that must exist on CI, and a pipe whose end shows
when every process holding it is gone."""

from __future__ import annotations

import os
import select

import pytest


class Holders:
    """A pipe handed to a process tree: ``fd`` is the write end to pass down (``pass_fds``);
    ``gone(timeout)`` closes our copy and waits for the end of file, which comes only when every
    process that inherited it has exited."""

    def __init__(self) -> None:
        self.read_fd, self.fd = os.pipe()

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def gone(self, timeout: float = 30.0) -> bool:
        self.release()
        while True:
            ready, _, _ = select.select([self.read_fd], [], [], timeout)
            if not ready:
                return False
            if not os.read(self.read_fd, 4096):
                return True

    def close(self) -> None:
        self.release()
        os.close(self.read_fd)


@pytest.fixture
def holders():
    h = Holders()
    yield h
    h.close()
