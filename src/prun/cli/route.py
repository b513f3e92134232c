"""Choose the executor of each unit, and say why (the seed's Executors rule).

Give packet files (Markdown with YAML front matter), plan files (YAML with `packets:`), or no
file and one unit's needs by flags (--session-tools, --kind, --executor, --model, --id).
Quota readings come from `prun quota`'s snapshot (unknown groups count as healthy); the split
can be changed by a policy file: --policy, else $PRUN_POLICY, else `.prun/policy.toml` at the
repository root (see docs/routing.md).

stdout, one line per unit in the order given, then a summary:
  ROUTE <packet-id> executor=<x> model=<m> action=<assign|reroute> reason="<why>"
  WAIT <packet-id> executor=<x> model=<m> action=wait reason="<why>"
  ROUTE-SUMMARY units=<n> now=<k> wait=<w> <executor>=<count>...
--json prints one object instead: {"units": [...], "summary": {...}, "policy": path|null}.

exit codes: 0 every unit can start now; 75 at least one unit waits for a pool; 2 bad usage
(unreadable packet, bad policy file, refused executor such as codex).
"""

from __future__ import annotations

import sys


def add_arguments(p) -> None:
    from .options import ExecutorName

    p.add_argument("packets", nargs="*", metavar="PACKET_FILE",
                   help="packet files (.md with front matter) or plan files (.yaml)")
    p.add_argument("--executor", action=ExecutorName, default=None,
                   help="one unit: the executor it names (default: auto)")
    p.add_argument("--session-tools", action="store_true",
                   help="one unit: it needs the coordinator's session tools (MCP, connectors)")
    p.add_argument("--kind", choices=["read-only", "code"], default="read-only",
                   help="one unit: read-only (default) or code-writing")
    p.add_argument("--model", help="one unit: the model it asks for")
    p.add_argument("--id", default="unit", help="one unit: its id (default: unit)")
    p.add_argument("--policy", metavar="FILE", help="the routing policy file to use")
    p.add_argument("--no-quota", action="store_true",
                   help="do not read quota: every pool counts as unknown (healthy)")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")


def run(args) -> int:
    import json
    import os

    from .. import routing
    from ..errors import EXIT_OK, EXIT_QUOTA, UsageError

    if args.packets:
        if args.executor or args.session_tools or args.model or args.kind != "read-only":
            raise UsageError("unit flags (--executor, --session-tools, --kind, --model) are for "
                             "one unit given without packet files",
                             hint="put the needs in the packets' front matter instead")
        needs = [need for path in args.packets for need in _needs_from_file(path)]
    else:
        needs = [routing.Need(id=args.id, executor=args.executor or "auto",
                              session_tools=args.session_tools, kind=args.kind, model=args.model)]
    env = dict(os.environ)
    if args.policy and not os.path.isfile(args.policy):
        raise UsageError(f"policy file not found: {args.policy}")
    policy = routing.load_policy(args.policy or routing.find_policy(env))
    states = {} if args.no_quota else _group_states(env)
    decisions = routing.route(needs, states, policy, env)
    waiting = any(d.waits for d in decisions)
    if args.json:
        json.dump({"units": [d.as_dict() for d in decisions],
                   "summary": routing.counts(decisions),
                   "policy": policy.source}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for d in decisions:
            print(d.line())
        print(routing.summary(decisions))
    return EXIT_QUOTA if waiting else EXIT_OK


def _group_states(env) -> dict:
    """The quota readings per group; none (all unknown) when they cannot be read."""
    try:
        from ..quota import group_states
    except ImportError:
        return {}
    try:
        return dict(group_states(env))
    except Exception as e:  # an unreadable snapshot skips the check, as the quota gate does
        print(f"prun: quota readings unavailable ({e}); every pool counts as unknown",
              file=sys.stderr)
        return {}


def _needs_from_file(path: str):
    """Routing needs from a packet or plan file (prun.plan's loader when it is there)."""
    from .. import plan, routing

    loader = getattr(plan, "load_plan" if path.endswith((".yaml", ".yml")) else "load_packet",
                     None)
    if loader is not None:
        loaded = loader(path)
        packets = loaded.packets if hasattr(loaded, "packets") else [loaded]
        return [routing.Need.of(p) for p in packets]
    return [routing.Need(**fields) for fields in _minimal_fields(path)]


def _minimal_fields(path: str):
    """Front matter or plan YAML, read just far enough for routing (id, executor,
    session_tools, kind, model); used until the full plan loader is present."""
    import glob
    import os

    import yaml

    from ..errors import UsageError

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"cannot read packet file {path}: {e.strerror}")
    stem = os.path.splitext(os.path.basename(path))[0]
    try:
        if path.endswith((".yaml", ".yml")):
            data = yaml.safe_load(text) or {}
            if not isinstance(data, dict) or not isinstance(data.get("packets"), list):
                raise UsageError(f"{path}: a plan needs a `packets:` list")
            folder = os.path.dirname(os.path.abspath(path))
            for item in data["packets"]:
                if isinstance(item, dict):
                    yield _fields(item, None, path)
                elif isinstance(item, str):
                    matches = sorted(glob.glob(os.path.join(folder, item))) or [
                        os.path.join(folder, item)]
                    for m in matches:
                        yield from _minimal_fields(m)
                else:
                    raise UsageError(f"{path}: each packet is a mapping or a file path")
            return
        if not text.startswith("---"):
            raise UsageError(f"{path}: no front matter", hint="start the file with a --- block")
        end = text.find("\n---", 3)
        front = yaml.safe_load(text[3:end] if end > 0 else "") or {}
    except yaml.YAMLError as e:
        raise UsageError(f"{path}: bad YAML: {str(e).splitlines()[0]}")
    if not isinstance(front, dict):
        raise UsageError(f"{path}: front matter must be a mapping")
    yield _fields(front, stem, path)


def _fields(data: dict, default_id: str | None, path: str) -> dict:
    from ..errors import UsageError

    pid = data.get("id", default_id)
    if not pid:
        raise UsageError(f"{path}: a packet without an id")
    return {"id": str(pid), "executor": str(data.get("executor") or "auto"),
            "session_tools": bool(data.get("session_tools", False)),
            "kind": str(data.get("kind") or "read-only"), "model": data.get("model")}
