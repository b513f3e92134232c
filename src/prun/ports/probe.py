"""Free ports: the lowest runs of ports the registry does not hold and no ``bind()`` on
127.0.0.1 finds in use right now."""

from __future__ import annotations

import socket
from collections.abc import Iterable

from ..errors import PortsExhausted
from ..settings import PORT_LIMIT
from .registry import PortRange


class FreePorts:
    """Ports to assign from ``start`` up: not taken (held in the registry or already given
    out by this reservation) and not in use right now."""

    def __init__(self, start: int, taken: Iterable[PortRange]):
        self.start = start
        self.taken = _merged([(r.base, r.last) for r in taken])
        self._in_use: dict[int, bool] = {}

    def take(self, count: int) -> PortRange:
        """The lowest free run of ``count`` ports, from then on taken."""
        taken = self.taken
        base, i = self.start, 0
        while base + count <= PORT_LIMIT:
            while i < len(taken) and taken[i][1] < base:
                i += 1
            if i < len(taken) and taken[i][0] < base + count:
                base = taken[i][1] + 1
                continue
            busy = next((p for p in range(base, base + count) if self._bound(p)), None)
            if busy is None:
                self.taken = _merged([*taken, (base, base + count - 1)])
                return PortRange(base, count)
            base = busy + 1
        raise PortsExhausted(count, self.start)

    def _bound(self, port: int) -> bool:
        if port not in self._in_use:
            self._in_use[port] = in_use(port)
        return self._in_use[port]


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ``(low, high)`` spans as disjoint spans, lowest first."""
    out: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return out


def in_use(port: int) -> bool:
    """True when a ``bind()`` of ``port`` on 127.0.0.1 fails right now (someone listens there,
    or it is still in TIME_WAIT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False

