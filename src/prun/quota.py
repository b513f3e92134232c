"""Quota snapshot and the dispatcher's quota gate (see docs/quota.md).

Placeholder surface used by the dispatcher; the snapshot, probes and gate live here.
"""

from __future__ import annotations


def gate(executor, settings, env):
    """Decide before launch; None means: launch as asked."""
    return None


def record_hit(hit, env) -> None:
    """Record a quota error the backend just reported."""


def after_backend_failure(executor, env) -> None:
    """Force a snapshot refresh after a backend failure."""
