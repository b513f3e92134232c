"""``prun doctor``: what this machine gives prun, one fact a line, with the fix for each
missing part, and whether a plan has everything it needs.

Each fact comes from one check function in ``CHECKS`` (``checks``): a later check is one
function added there. A plan's needs (``needs``) mark the facts it depends on; a needed fact
that is not ``ok``, or a plan routing refuses here, makes ``report.ok`` false (exit 1).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from ..plan import Plan
from .checks import CHECKS, needs
from .facts import Context, Fact, Report, examine

__all__ = ["CHECKS", "Context", "Fact", "Report", "doctor", "examine"]


def doctor(env: Mapping[str, str], cwd: Path, plan: Plan | None = None,
           plan_source: str | None = None) -> Report:
    """Every fact of this machine (``CHECKS``), the ones ``plan`` needs marked."""
    ctx = Context(env, cwd, plan)
    return examine(dataclasses.replace(ctx, needs=needs(ctx)), CHECKS, plan_source)
