"""Choose the executor of each unit, and say why (the seed's Executors rule).

Give packet files (Markdown with YAML front matter) or plan files (YAML with `packets:`), both
loaded and checked as `prun check` does, or no file and one unit's needs by flags
(--session-tools, --kind, --executor, --model, --id).
Quota readings come from `prun quota`'s snapshot (unknown groups count as healthy); the split
can be changed by a policy file: --policy, else $PRUN_POLICY, else `.prun/policy.toml` at the
repository root (see docs/routing.md).

Only executors that are here are chosen: one whose CLI is not found (or says, offline, that
no one is signed in) is skipped, said in a line before the unit's; a unit that can go only to
missing executors is refused, naming what to install (`prun doctor` shows what is here).

stdout, one line per unit in the order given, then a summary:
  SKIP <packet-id> skipped=<executor> reason=<not-installed|not-signed-in>
  ROUTE <packet-id> executor=<x> model=<m> action=<assign|reroute> reason="<why>"
  WAIT <packet-id> executor=<x> model=<m> action=wait reason="<why>"
  ROUTE-SUMMARY units=<n> now=<k> wait=<w> <executor>=<count>...
--json prints one object instead: {"units": [...], "summary": {...}, "policy": path|null}.

A packet's data boundary (`data.may_go_to`) narrows every choice: a unit goes only to an
executor its data may reach, and waits rather than overflowing to a pool outside it.

exit codes: 0 every unit can start now; 75 at least one unit waits for a pool; 2 bad usage
(unreadable packet, bad policy file, refused executor such as codex, a named executor outside
the packet's data boundary, a unit no executor inside its boundary can run, or one that can
go only to executors missing here).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING

from .. import executors
from ..errors import ExitCode, UsageError
from ..plan import load_packet, load_plan, routing
from ..quota import group_states
from . import options
from .options import ExecutorName

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..plan.routing import Need
    from ..quota import GroupState


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("packets", nargs="*", metavar="PACKET_FILE", type=options.path,
                   help="packet files (.md with front matter) or plan files (.yaml)")
    p.add_argument("--executor", action=ExecutorName, default=None,
                   help="one unit: the executor it names (default: auto)")
    p.add_argument("--session-tools", action="store_true",
                   help="one unit: it needs the coordinator's session tools (MCP, connectors)")
    p.add_argument("--kind", choices=["read-only", "code"], default="read-only",
                   help="one unit: read-only (default) or code-writing")
    p.add_argument("--model", type=options.name("model"), help="one unit: the model it asks for")
    p.add_argument("--id", default="unit", type=options.packet_id,
                   help="one unit: its id (default: unit)")
    p.add_argument("--policy", metavar="FILE", type=options.path,
                   help="the routing policy file to use")
    p.add_argument("--no-quota", action="store_true",
                   help="do not read quota: every pool counts as unknown (healthy)")
    p.add_argument("--json", action="store_true", help="print JSON instead of lines")


def run(args: argparse.Namespace) -> int:
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
    states: dict[str, GroupState] = {} if args.no_quota else _group_states(env)
    decisions = routing.route(needs, states, policy, env, executors.missing(env))
    waiting = any(d.waits for d in decisions)
    if args.json:
        json.dump({"units": [d.as_dict() for d in decisions],
                   "summary": routing.counts(decisions),
                   "policy": policy.source}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for d in decisions:
            for line in d.skip_lines():
                print(line)
            print(d.line())
        print(routing.summary(decisions))
    return ExitCode.QUOTA if waiting else ExitCode.OK


def _group_states(env: Mapping[str, str]) -> dict[str, GroupState]:
    """The quota readings per group (stale ones refreshed where probes exist; never raises:
    an unreadable snapshot leaves every group unknown, with the reason in its ``error``)."""
    return dict(group_states(env, executors.quota_groups(), executors.quota_probe))


def _needs_from_file(path: str) -> list[Need]:
    """Routing needs from a plan file (.yaml/.yml) or a packet file, loaded and validated."""
    if path.endswith((".yaml", ".yml")):
        return [routing.Need.of(p) for p in load_plan(path).packets]
    return [routing.Need.of(load_packet(path))]
