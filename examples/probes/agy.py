#!/usr/bin/env python3
"""Example quota probe for agy's two groups, `agy-gemini` and `agy-claude-gpt`.

Antigravity meters Gemini models and the Claude-and-GPT models (claude-sonnet-4-6,
claude-opus-4-6-thinking, gpt-oss-120b-medium) as two separate groups and shows, per model, how
much is left and when it resets. A real probe reads that per-model readout from wherever the
installed Antigravity exposes it (its quota view, or a status command of your version) and
reduces it to one group. That source differs between versions, so this example reads an export
of it from a JSON file, which keeps it runnable offline:

    {"models": [{"model": "gemini-3.8-flash-high", "left": 0.62,
                 "resets_at": "2026-11-30T21:00:00Z"},
                {"model": "claude-sonnet-4-6", "left": 0.0, "resets_in": 2040}]}

    agy.py --group agy-gemini quota-export.json      (or PRUN_QUOTA_GROUP, set by prun)

A group's reading is its scarcest model: the smallest `left`, with that model's reset. One call
per group; prints one JSON object of the probe contract (docs/quota.md).
"""

import json
import os
import sys


def group_of(model):
    return "agy-gemini" if model.strip().lower().startswith("gemini") else "agy-claude-gpt"


def main(argv):
    group = os.environ.get("PRUN_QUOTA_GROUP", "")
    if len(argv) >= 2 and argv[0] == "--group":
        group, argv = argv[1], argv[2:]
    if group not in ("agy-gemini", "agy-claude-gpt") or len(argv) != 1:
        print(json.dumps({"error": "usage: agy.py --group agy-gemini|agy-claude-gpt EXPORT.json"}))
        return 0
    try:
        with open(argv[0], encoding="utf-8") as f:
            models = json.load(f)["models"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(json.dumps({"group": group, "error": f"cannot read {argv[0]}: {e}"}))
        return 0
    rows = [m for m in models if isinstance(m, dict) and isinstance(m.get("model"), str)
            and group_of(m["model"]) == group and isinstance(m.get("left"), int | float)]
    if not rows:
        print(json.dumps({"group": group, "error": "no model of this group in the export"}))
        return 0
    scarcest = min(rows, key=lambda m: m["left"])
    out = {"group": group, "left": scarcest["left"], "source": f"agy export ({scarcest['model']})"}
    for key in ("resets_at", "resets_in"):
        if scarcest.get(key) is not None:
            out[key] = scarcest[key]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
