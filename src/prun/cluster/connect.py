"""Reaching a Dask scheduler: whether Dask distributed is installed (``require``) and a
client connected to an address (``connect_client``), or one line saying why not."""

from __future__ import annotations

from typing import Any

from ..errors import UsageError

EXTRA_HINT = "install it with: pip install 'prun-agents[dask]'"


def require() -> None:
    """Raise ``UsageError`` (exit 2) when Dask distributed is not installed."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise UsageError("a cluster run needs Dask distributed, which is not installed",
                         hint=EXTRA_HINT)


CONNECT_S = 10.0      # to reach the scheduler


def connect_client(address: str, timeout: float = CONNECT_S) -> Any:
    """A ``distributed.Client`` connected to ``address``, or ``UsageError`` (exit 2) in one
    line: Dask missing, or the scheduler unreachable."""
    require()
    from distributed import Client

    try:
        client: Any = Client(address, timeout=timeout, set_as_default=False)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as e:
        raise UsageError(f"cannot reach the Dask scheduler at {address}: {str(e) or type(e).__name__}",
                         hint="start it (`prun cluster local`, or `dask scheduler`) or fix "
                              "--cluster / PRUN_CLUSTER")
    return client


def probe(address: str) -> None:
    """Check that ``address`` is a scheduler prun can use, before a run is made."""
    connect_client(address).close()
