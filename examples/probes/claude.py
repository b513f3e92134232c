#!/usr/bin/env python3
"""Example quota probe for the `claude` group, from Anthropic's rate-limit response headers.

Every Messages API response carries headers such as

    anthropic-ratelimit-tokens-limit: 400000
    anthropic-ratelimit-tokens-remaining: 120000
    anthropic-ratelimit-tokens-reset: 2026-11-30T17:05:00Z

(and the same for `requests`, `input-tokens`, `output-tokens`). A real probe makes one tiny
request and reads them, e.g.  curl -sS -D headers.txt -o /dev/null https://api.anthropic.com/...
This example reads such a header dump from a file (or stdin with `-`), so it runs offline:

    claude.py headers.txt

A subscription account (claude.ai, Claude Code) shows its limits under Settings > Usage and in
Claude Code's /usage; a probe for it would read the same percentages and reset times.

Prints one JSON object (see docs/quota.md, "probe contract"): the scarcest of the metered
kinds, as a fraction left, with its reset time. Exit 0 with {"error": ...} when it cannot tell.
"""

import json
import sys
from pathlib import Path

KINDS = ("requests", "tokens", "input-tokens", "output-tokens")


def main(argv):
    if len(argv) != 1:
        print(json.dumps({"error": "usage: claude.py HEADERS_FILE|-"}))
        return 0
    try:
        text = sys.stdin.read() if argv[0] == "-" else Path(argv[0]).read_text(encoding="utf-8")
    except OSError as e:
        print(json.dumps({"error": f"cannot read {argv[0]}: {e.strerror}"}))
        return 0
    headers = {}
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    best = None
    for kind in KINDS:
        prefix = f"anthropic-ratelimit-{kind}-"
        try:
            limit = float(headers[prefix + "limit"])
            remaining = float(headers[prefix + "remaining"])
        except (KeyError, ValueError):
            continue
        if limit <= 0:
            continue
        left = max(0.0, min(1.0, remaining / limit))
        if best is None or left < best[0]:
            best = (left, headers.get(prefix + "reset"), kind)
    if best is None:
        print(json.dumps({"error": "no anthropic-ratelimit-* headers found"}))
        return 0
    left, reset, kind = best
    out = {"group": "claude", "left": round(left, 4), "source": f"ratelimit headers ({kind})"}
    if reset:
        out["resets_at"] = reset
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
