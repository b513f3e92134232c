"""The checks of ``prun doctor``, one function per part of the machine, in ``CHECKS``'s order:
each takes the ``Context`` and returns its facts (a later check is one function added to the
list)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from pathlib import Path

from .. import executors
from .._util import bounded
from .._util.gitcmd import toplevel
from .._util.timeparse import epoch, format_duration
from ..attempt import overlay, sandbox
from ..errors import LaunchError, UsageError
from ..executors.base import Executor
from ..git import layered
from ..ledger import default_path
from ..mcp import config as mcp_config
from ..plan import candidates, routing
from ..quota.snapshot import load as load_snapshot
from ..quota.snapshot import snapshot_path
from ..run.limits import enforcement
from ..settings import load as load_settings
from ..skill import install as skill_install
from .facts import MISSING, OK, WARN, Check, Context, Fact

VERSION_TIMEOUT_S = 10.0
DISTRIBUTION = "prun-agents"
# extra -> (the modules it brings, what it is for)
EXTRAS = {"mcp": (("mcp",), "prun mcp, the MCP server"),
          "dask": (("distributed",), "prun run --cluster"),
          "review": (("aiohttp", "markdown_it", "pygments"), "prun review, the review page")}


def agents(ctx: Context) -> list[Fact]:
    """Each executor's CLI: found (where), its version, signed in where that can be told
    offline. Executors that launch no CLI of their own are always there."""
    return [_agent(ex, ctx) for ex in executors.all()]


def _agent(ex: Executor, ctx: Context) -> Fact:
    if not (ex.launches_process and ex.program):
        how = "run by the coordinator itself" if not ex.launches_process else \
            "runs the packet's own command"
        return Fact("executor", ex.name, OK, f"nothing to install: {how}")
    try:
        path = ex.binary(ctx.env)
    except LaunchError as e:
        return Fact("executor", ex.name, MISSING, f"{executors.base.NOT_INSTALLED}: {e.message}",
                    ex.install_hint())
    signed_in = ex.signed_in(ctx.env)
    signed = {True: "yes", False: "no", None: "cannot be told offline"}[signed_in]
    detail = f"{path}, version {_version(path, dict(ctx.env))}, signed in: {signed}"
    if signed_in is False:
        return Fact("executor", ex.name, MISSING, f"{executors.base.NOT_SIGNED_IN}: {detail}",
                    f"sign in: run {ex.program} once by hand")
    return Fact("executor", ex.name, OK, detail)


def _version(path: str, env: dict[str, str]) -> str:
    """The first line ``path --version`` prints, or ``unknown``."""
    try:
        done = bounded.run([path, "--version"], timeout=VERSION_TIMEOUT_S, env=env, limit=4096)
    except OSError:
        return "unknown"
    text = (done.stdout or done.stderr).decode("utf-8", "replace").strip()
    return text.splitlines()[0][:80] if done.returncode == 0 and text else "unknown"


def sandboxing(ctx: Context) -> list[Fact]:
    """The bubblewrap sandbox units run in: can one be made here, with its own /proc."""
    why = sandbox.unavailable()
    if why is not None:
        return [Fact("sandbox", "bwrap", MISSING, why,
                     "install bubblewrap and allow unprivileged user namespaces "
                     "(docs/sandbox.md); until then units run without a sandbox")]
    proc = "its own /proc" if sandbox.fresh_proc() else "the host's /proc (ps sees other processes)"
    return [Fact("sandbox", "bwrap", OK, f"{shutil.which('bwrap') or 'bwrap'}: overlays of "
                 f"the repository read-only, {proc}"), overlays(ctx)]


def overlays(ctx: Context) -> Fact:
    """Whether a unit's sandbox can mount an overlay in the workspace root: copy-on-write
    shared paths, and code units' checkouts over one checkout per run (docs/workspaces.md)."""
    setting = ctx.env.get(overlay.SETTING, "").strip().lower()
    if setting == "off":
        return Fact("sandbox", "overlay", WARN, f"{overlay.SETTING}=off: clones and copies",
                    f"unset {overlay.SETTING} for copy-on-write workspaces")
    root = load_settings(ctx.env).workspace_root
    why = overlay.overlays_unavailable(root) or (
        None if shutil.which("nsenter") else "no nsenter on PATH (util-linux)")
    if why is not None:
        return Fact("sandbox", "overlay", WARN, f"{why}: code units get clones, shared paths "
                    "copies", "Linux 5.11+ with unprivileged user namespaces, util-linux")
    size = "" if setting == "on" else f" from {layered.MIN_FILES} tracked files at the base"
    return Fact("sandbox", "overlay", OK, f"in {root}: shared paths copy-on-write, code "
                f"units' checkouts overlays{size}")


def limits(ctx: Context) -> list[Fact]:
    """How each per-unit limit of ``resources:`` is held here (``prun.run.limits``): one line
    each, ``memory``, ``pids``, ``cpus``; a limit nothing holds is a warning with its fix."""
    out = []
    for e in enforcement():
        if e.how != "none":
            out.append(Fact("limits", e.name, OK, f"held by the {e.how}; {e.detail}"))
        else:
            out.append(Fact("limits", e.name, WARN, e.detail,
                            "leave the limit out, or run with --allow-unenforced (it runs "
                            "unheld: prun makes no cgroups yet)"))
    return out


def quota(ctx: Context) -> list[Fact]:
    """The quota snapshot routing and the gates read: its age, or why it cannot be read."""
    path = snapshot_path(ctx.env)
    snap = load_snapshot(path)
    if snap.missing:
        return [Fact("quota", "snapshot", OK, f"none yet at {path}: every pool counts as "
                     "unknown (never empty)")]
    if snap.problem:
        return [Fact("quota", "snapshot", WARN, f"{path}: {snap.problem}",
                     f"remove {path}; `prun quota` writes a new one")]
    at = epoch(snap.updated_at)
    age = f"updated {format_duration(time.time() - at)} ago" if at else "never updated"
    return [Fact("quota", "snapshot", OK, f"{path}, {age}, {len(snap.groups)} group(s) read")]


def ledger(ctx: Context) -> list[Fact]:
    """The ledger this folder's runs are recorded in."""
    path = default_path(ctx.cwd, create=False)
    if path.is_file():
        return [Fact("ledger", "ledger", OK, f"{path}, {path.stat().st_size} bytes")]
    folder = next((p for p in path.parents if p.exists()), None)
    if folder is not None and os.access(folder, os.W_OK):
        return [Fact("ledger", "ledger", OK, f"{path}: made by the first run")]
    return [Fact("ledger", "ledger", MISSING, f"{path}: its folder cannot be written",
                 "set PRUN_LEDGER to a file in a folder you can write")]


def extras(ctx: Context) -> list[Fact]:
    """The optional extras installed (``pip install 'prun-agents[mcp]'``...)."""
    out = []
    for extra, (modules, what) in EXTRAS.items():
        absent = [m for m in modules if importlib.util.find_spec(m) is None]
        if absent:
            out.append(Fact("extra", extra, MISSING, f"for {what}: {', '.join(absent)} not "
                            "installed", f"pip install '{DISTRIBUTION}[{extra}]'"))
        else:
            out.append(Fact("extra", extra, OK, f"for {what}: installed"))
    return out


def installs(ctx: Context) -> list[Fact]:
    """This project's skill and MCP installs (``prun skill install``, ``prun mcp install``)."""
    top = toplevel(ctx.cwd)
    if top is None:
        return [Fact("skill", "project", WARN, "not inside a git repository",
                     "run prun doctor in the project's repository")]
    root = Path(top)
    out = []
    for loc in (skill_install.location(t, project=root) for t in skill_install.TARGETS):
        state = skill_install.inspect(loc).state
        fix = None if state == skill_install.CURRENT else \
            f"prun skill install --for {loc.target}" + \
            ("" if state == skill_install.ABSENT else " --force")
        status = OK if fix is None else MISSING if state == skill_install.ABSENT else WARN
        out.append(Fact("skill", loc.target, status, f"{loc.path}: {state}", fix))
    for target in mcp_config.TARGETS:
        cfg = mcp_config.config_file(target, project=root)
        entry = mcp_config.current(cfg)
        if entry is None:
            out.append(Fact("mcp", target, MISSING, f"{cfg.path}: no prun server",
                            f"prun mcp install --for {target}"))
        else:
            command = " ".join(str(a) for a in [entry.get("command"), *entry.get("args", [])])
            out.append(Fact("mcp", target, OK, f"{cfg.path}: {command}"))
    return out


def plan(ctx: Context) -> list[Fact]:
    """What the plan needs that routing can tell: each unit goes to an executor here, or the
    plan is refused (the refusal's line and its fix)."""
    if ctx.plan is None:
        return []
    try:
        routing.check(ctx.plan.packets, ctx.env)
    except UsageError as e:
        return [Fact("plan", "routing", MISSING, e.message, e.hint, needed=True)]
    return [Fact("plan", "routing", OK, f"each of its {len(ctx.plan.packets)} packet(s) goes "
                 "to an executor found here")]


def needs(ctx: Context) -> frozenset[str]:
    """``Fact.key`` of each part the plan needs: the executors its units are routed to (no
    quota read), the sandbox when a packet asks for ``sandbox: on``, Dask for a cluster, each
    limit a packet's ``resources`` names."""
    p = ctx.plan
    if p is None:
        return frozenset()
    keys = set()
    try:
        units = [u for pk in p.packets for u in candidates.units(pk)]
        decisions = routing.route([routing.Need.of(u) for u in units], {},
                                  routing.load_policy(routing.find_policy(ctx.env)), ctx.env,
                                  executors.missing(ctx.env))
        keys |= {f"executor:{d.executor}" for d in decisions}
    except UsageError:
        keys |= {f"executor:{u.executor}" for pk in p.packets for u in candidates.units(pk)
                 if u.executor != "auto"}
    if any((pk.sandbox or p.sandbox) == "on" for pk in p.packets):
        keys.add("sandbox:bwrap")
    if p.cluster:
        keys.add("extra:dask")
    held = [pk.resources for pk in p.packets]
    keys |= {f"limits:{name}" for name in ("memory", "pids", "cpus")
             if any(getattr(r, name) is not None for r in held)}
    return frozenset(keys)


CHECKS: tuple[Check, ...] = (agents, sandboxing, limits, quota, ledger, extras, installs, plan)
