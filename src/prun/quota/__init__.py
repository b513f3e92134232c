"""Quota: what each subscription pool has left, and the dispatcher's gate (docs/quota.md).

    snapshot.py   the JSON snapshot file (schema, tolerant reading, locked atomic updates)
    probes.py     the probe commands that read a group's meter, and their output contract
    gate.py       the gate before launch: asks the executor's own hook (agy's is in its module)

Public surface:

    group_states(env, known) -> {group: GroupState}  every group, stale readings refreshed first
    current(env, groups, force) -> Snapshot     the snapshot, refreshed where due
    record_hit(group, resets_at, message, env)  a run just failed on a quota error: record empty
    after_backend_failure(groups, env)          force a re-read of the executor's groups

Nothing here raises into the dispatcher: a broken config, snapshot or probe becomes one
``prun: warning:`` line on stderr and the dispatch goes on as asked.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from ..errors import PrunError
from ..settings import config
from .snapshot import FileLock, GroupState, Snapshot, iso, load, snapshot_path, update

if TYPE_CHECKING:
    from ..settings.config import QuotaConfig

__all__ = [
    "GroupState", "Snapshot", "after_backend_failure", "current",
    "group_states", "group_states_of", "record_hit",
    "snapshot_path", "warn",
]


OFF = {"off", "0", "false", "no"}
_warned: set[str] = set()


def warn(text: str) -> None:
    """One warning line on stderr (once per process for the same text: a supervisor running
    many units in one process does not repeat itself)."""
    line = " ".join(text.splitlines())
    if line in _warned:
        return
    _warned.add(line)
    try:
        print(f"prun: warning: {line}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _config(env: Mapping[str, str], strict: bool) -> QuotaConfig:
    try:
        return config.quota(env)
    except PrunError as e:
        if strict:
            raise
        warn(f"{e.line()}; quota probes not run")
        return config.QuotaConfig()


ProbeOf = Callable[[str], "tuple[str, ...] | None"]   # a group's built-in probe command


def _probes(cfg: QuotaConfig, env: Mapping[str, str], groups: Iterable[str],
            probe_of: ProbeOf | None) -> dict[str, tuple[str, ...]]:
    """The probe of each group: the configured one, else the built-in one ``probe_of`` gives
    for a group of ``groups`` (the executors' ``quota_probe``; none with
    ``PRUN_QUOTA_BUILTIN=off``)."""
    probes = dict(cfg.probes)
    if probe_of is None or env.get("PRUN_QUOTA_BUILTIN", "").strip().lower() in OFF:
        return probes
    for group in groups:
        if group not in probes and (argv := probe_of(group)):
            probes[group] = argv
    return probes


def current(env: Mapping[str, str] | None = None, groups: Iterable[str] | None = None,
            force: bool = False, strict: bool = False, also: Iterable[str] = (),
            probe_of: ProbeOf | None = None) -> Snapshot:
    """The snapshot, after re-reading ``groups`` (default: every group with a configured
    probe, and those of ``also`` with a built-in one, ``probe_of``) whose reading is older
    than the TTL, or all of them when ``force``. Bounded by the probe timeout.

    ``strict``: a bad config file raises ConfigError instead of being warned about.
    """
    env = os.environ if env is None else env
    cfg = _config(env, strict)
    path = snapshot_path(env)
    snap = load(path)
    groups = None if groups is None else tuple(groups)
    probes = _probes(cfg, env, groups if groups is not None else also, probe_of)
    wanted = [g for g in (probes if groups is None else groups) if g in probes]
    due = [g for g in wanted if force or _due(snap, g, cfg.ttl_s)]
    if not due:
        return snap
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    # One refresh at a time: a dispatch that finds another one running uses what is there
    # (a forced refresh runs anyway: it carries newer evidence).
    with FileLock(path + ".refresh", wait_s=0) as lock:
        if not lock.acquired and not force:
            return snap
        if not force:
            snap = load(path)
            due = [g for g in due if _due(snap, g, cfg.ttl_s)]
            if not due:
                return snap
        from .probes import run_all

        readings = run_all({g: probes[g] for g in due}, cfg.probe_timeout_s, env)
        return _merge(path, readings)


def _due(snap: Snapshot, group: str, ttl_s: float) -> bool:
    return snap.problem is not None or group in snap.bad or snap.state(group).stale(ttl_s)


def _merge(path: str, readings: list[GroupState]) -> Snapshot:
    def change(groups: dict[str, GroupState]) -> None:
        for reading in readings:
            old = groups.get(reading.group)
            if _hit_stands(old) and not reading.empty:
                # The meter a run just hit is better evidence than a probe until it resets.
                continue
            if _is_hit(old) and not reading.known:
                continue    # a probe that read nothing says nothing against a hit, estimated or not
            groups[reading.group] = reading

    return update(path, change)


def _is_hit(state: GroupState | None) -> bool:
    return state is not None and state.source == "hit" and state.empty


def _hit_stands(state: GroupState | None) -> bool:
    return state is not None and _is_hit(state) and not state.reset_estimated


def record_hit(group: str | None, resets_at: str | None, message: str,
               env: Mapping[str, str] | None = None) -> None:
    """A run failed on a quota error (an executor's ``QuotaHit``): record its ``group`` as empty
    until it resets. Never raises.

    With no reset time in the error (``resets_at`` None), the group counts as empty for
    ``[quota] hit_reset`` (default 15 minutes), marked ``reset_estimated``.
    """
    env = os.environ if env is None else env
    try:
        group = (group or "").strip()
        if not group:
            return
        from .snapshot import normalise_time, update

        resets_at = normalise_time(resets_at)
        estimated = resets_at is None
        if estimated:
            resets_at = iso(time.time() + _config(env, strict=False).hit_reset_s)
        note = " ".join((message or "").split())[:500] or None
        entry = GroupState(group, 0.0, resets_at, iso(), "hit", None, note, estimated)

        def change(groups: dict[str, GroupState]) -> None:
            groups[group] = entry

        update(snapshot_path(env), change)
    except Exception as e:  # never break the dispatcher's finish
        warn(f"could not record the quota error in the snapshot: {e}")


def after_backend_failure(groups: Iterable[str], env: Mapping[str, str] | None = None,
                          probe_of: ProbeOf | None = None) -> None:
    """Re-read an executor's quota ``groups`` now, past the TTL (bounded by the probe timeout).

    Never raises; does nothing when no probe is configured for those groups.
    """
    env = os.environ if env is None else env
    try:
        groups = list(groups)
        if groups:
            current(env, groups, force=True, probe_of=probe_of)
    except Exception as e:
        warn(f"quota refresh after the failure did not complete: {e}")


def group_states(env: Mapping[str, str] | None = None, known: Iterable[str] = (),
                 probe_of: ProbeOf | None = None) -> dict[str, GroupState]:
    """Every quota group (the ``known`` ones, ``executors.quota_groups()``, and any the
    snapshot or config names), after
    refreshing stale readings where probes exist. Never raises: trouble shows in ``error``."""
    env = os.environ if env is None else env
    known = tuple(known)
    try:
        snap = current(env, also=known, probe_of=probe_of)
    except Exception as e:
        return {g: GroupState(g, error=f"quota snapshot not available: {e}")
                for g in known}

    try:
        cfg = config.quota(env)
    except Exception:
        cfg = config.QuotaConfig()
    return group_states_of(snap, cfg, known)


def group_states_of(snap: Snapshot, cfg: QuotaConfig,
                    known: Iterable[str] = ()) -> dict[str, GroupState]:
    """The states of the ``known`` groups and of every group ``snap`` or ``cfg``'s probes
    name."""
    names = list(dict.fromkeys(known))
    names += sorted({*snap.groups, *snap.bad, *cfg.probes} - set(names))
    states = {g: snap.state(g) for g in names}
    if snap.problem and not snap.missing:
        from dataclasses import replace

        states = {g: s if s.known or s.error else
                  replace(s, error=f"quota snapshot unreadable: {snap.problem}")
                  for g, s in states.items()}
    return states
