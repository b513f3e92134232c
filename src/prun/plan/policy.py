"""The routing policy (``prun.plan.routing``): which executors carry the ordinary share and the
Sonnet units, the ordinary share, per-pool batch capacities and per-executor models; the
seed's split by default, else a project-local TOML file (``.prun/policy.toml``, see
docs/routing.md).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import executors
from .._util import gitcmd
from ..errors import UsageError
from ..executors.base import ORDINARY, SONNET

POLICY_FILE = os.path.join(".prun", "policy.toml")


def members(role: str) -> tuple[str, ...]:
    """The executors whose ``split_role`` is ``role``: those with session tools first (the
    in-session Sonnet before headless claude), then in the registry's order."""
    found = [ex for ex in executors.all() if ex.split_role == role]
    return tuple(ex.name for ex in sorted(found, key=lambda ex: not ex.session_tools))


def pools() -> tuple[str, ...]:
    """Every routing pool an executor takes from (the keys a policy's ``[capacity]`` may use)."""
    return tuple(sorted({p for ex in executors.all() if (p := ex.routing_pool())}))


@dataclass(frozen=True)
class Policy:
    """The seed's split by default; a policy file names other executors of the same roles."""

    ordinary: str = "agy"               # executor of the ordinary share (split_role ordinary)
    ordinary_share: float = 1.0         # share of ordinary units it takes while healthy (0..1)
    sonnet: str = "session"             # Sonnet executor for ordinary units (split_role sonnet)
    session_tools: str = "session"      # executor for units needing session tools
    capacity: Mapping[str, int] = field(default_factory=dict)  # pool -> most units per batch
    models: Mapping[str, str] = field(default_factory=dict)    # executor -> model
    source: str | None = None           # the file it came from


def find_policy(env: Mapping[str, str], cwd: str | None = None) -> str | None:
    """``$PRUN_POLICY``, else the nearest ``.prun/policy.toml`` in ``cwd`` or a folder above it,
    up to the repository root (``gitcmd.toplevel``; outside a repository, up to the top)."""
    given = env.get("PRUN_POLICY", "").strip()
    if given:
        if not os.path.isfile(given):
            raise UsageError(f"PRUN_POLICY names no file: {given}",
                             hint="point it at a policy TOML file, or unset it")
        return os.path.abspath(given)
    folder = Path(os.path.abspath(cwd or os.getcwd()))
    root = gitcmd.toplevel(folder)
    for above in (folder, *folder.parents):
        candidate = above / POLICY_FILE
        if candidate.is_file():
            return str(candidate)
        if root is not None and os.path.realpath(above) == root:
            return None  # the repository root: stop here
    return None


def load_policy(path: str | None) -> Policy:
    """Read a policy file (TOML, table ``[routing]``, optional ``[capacity]`` and ``[models]``)."""
    if not path:
        return Policy()
    data = _read_toml(path)
    routing = _table(data, "routing", path)
    bad = sorted(set(data) - {"routing", "capacity", "models"})
    bad += [f"routing.{k}" for k in sorted(set(routing) - {"ordinary", "ordinary_share", "sonnet",
                                                            "session_tools"})]
    if bad:
        raise UsageError(f"policy file {path}: unknown key(s) {', '.join(bad)}",
                         hint="see docs/routing.md for the keys")

    def pick(key: str, role: str, default: str) -> str:
        value = routing.get(key, default)
        allowed = members(role)
        if not isinstance(value, str) or value not in allowed:
            raise UsageError(f"policy file {path}: routing.{key} = {value!r}",
                             hint="use one of " + ", ".join(allowed))
        return value

    share = routing.get("ordinary_share", 1.0)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise UsageError(f"policy file {path}: routing.ordinary_share = {share!r}",
                         hint="use a number from 0 to 1")
    capacity = _capacity(_table(data, "capacity", path), path)
    models = _models(_table(data, "models", path), path)
    default = Policy()
    return Policy(ordinary=pick("ordinary", ORDINARY, default.ordinary),
                  ordinary_share=float(share),
                  sonnet=pick("sonnet", SONNET, default.sonnet),
                  session_tools=pick("session_tools", SONNET, default.session_tools),
                  capacity=capacity, models=models, source=path)


def _read_toml(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise UsageError(f"cannot read policy file {path}: {e.strerror}")
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"policy file {path} is not valid TOML: {e}")


def _table(data: Mapping[str, object], key: str, path: str) -> dict[str, object]:
    """The table ``[key]`` of a policy file (empty when there is none)."""
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise UsageError(f"policy file {path}: {key} = {table!r}",
                         hint=f"write it as a table: [{key}]")
    return table


def _capacity(table: Mapping[str, object], path: str) -> dict[str, int]:
    """``[capacity]``: pool -> most units per batch, each a known pool and a whole number."""
    out: dict[str, int] = {}
    for pool, cap in table.items():
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0 or pool not in pools():
            raise UsageError(f"policy file {path}: capacity.{pool} = {cap!r}",
                             hint=f"pools are {', '.join(pools())}; capacities whole numbers >= 0")
        out[pool] = cap
    return out


def _models(table: Mapping[str, object], path: str) -> dict[str, str]:
    """``[models]``: executor -> model name."""
    out: dict[str, str] = {}
    for executor, model in table.items():
        if not isinstance(model, str) or not model:
            raise UsageError(f"policy file {path}: [models] values must be model names")
        out[executor] = model
    return out
