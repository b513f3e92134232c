"""agy's built-in quota probe: ``python -m prun.executors.agy_quota``, run by ``prun quota``
(and the quota gate) for ``agy-gemini`` and ``agy-claude-gpt`` when the config names no probe
of its own. It keeps the probe contract (``prun.quota.probes``): one JSON object on stdout.

It runs agy's print-mode ``/quota`` (``agy -p /quota --output-format json``: agy 1.1.11 and
later; it spends no turn) and reads its envelope, whose shape is the one public code uses
(razzant/claudexor, ``agy-quota-source.ts``), not measured here::

    {"status": "SUCCESS", "command": {"data": {"groups": [
        {"name": "Gemini Models", "buckets": [
            {"id": "gemini-5h", "window": "5h", "remaining_fraction": 0.8,
             "reset_time": "2026-12-07T18:00:00Z"},
            {"id": "gemini-weekly", "window": "weekly", "remaining_fraction": 0.25, ...}]},
        {"name": "Claude and GPT models", "buckets": [...]}]}}}

A group's ``left`` is the smallest ``remaining_fraction`` of its windows and its reset that
window's ``reset_time``. ``{"status": "ERROR", "error": ...}``, a group the envelope does not
name, or any other shape is reported as an error: the group stays unknown, never a guess.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

from .._util import bounded
from .agy import GROUP_CLAUDE_GPT, GROUP_GEMINI, Agy

TIMEOUT_S = 30.0
LIMIT = 256 * 1024


def reading(envelope: object, group: str) -> dict[str, object]:
    """The probe contract's object for ``group`` from agy's ``/quota`` envelope."""
    if not isinstance(envelope, dict):
        return {"error": "agy /quota did not print a JSON object"}
    if envelope.get("status") == "ERROR" or envelope.get("error"):
        return {"error": f"agy /quota: {str(envelope.get('error') or 'error')[:300]}"}
    command = envelope.get("command")
    data = command.get("data") if isinstance(command, dict) else None
    groups = data.get("groups") if isinstance(data, dict) else None
    if not isinstance(groups, list):
        return {"error": "agy /quota printed no groups (an unknown shape)"}
    windows = [b for g in groups if isinstance(g, dict) and _group(g.get("name")) == group
               for b in (g.get("buckets") or []) if isinstance(b, dict)
               and isinstance(b.get("remaining_fraction"), int | float)
               and not isinstance(b.get("remaining_fraction"), bool)]
    if not windows:
        return {"error": f"agy /quota reported no window of {group}"}
    tightest = min(windows, key=lambda b: float(b["remaining_fraction"]))
    out: dict[str, object] = {"left": min(1.0, max(0.0, float(tightest["remaining_fraction"]))),
                              "source": "agy /quota " + str(tightest.get("window") or "")}
    if isinstance(tightest.get("reset_time"), str):
        out["resets_at"] = tightest["reset_time"]
    return out


def _group(name: object) -> str | None:
    """prun's quota group of one of the envelope's groups, by its name."""
    text = str(name or "").lower()
    if "gemini" in text:
        return GROUP_GEMINI
    if "claude" in text or "gpt" in text:
        return GROUP_CLAUDE_GPT
    return None


def main(env: Mapping[str, str]) -> dict[str, object]:
    group = env.get("PRUN_QUOTA_GROUP", GROUP_GEMINI)
    argv = [Agy().binary(env), "-p", "/quota", "--output-format", "json"]
    try:
        done = bounded.run(argv, timeout=TIMEOUT_S, env={**env, "AGY_CLI_DISABLE_AUTO_UPDATE":
                                                         "true"}, limit=LIMIT)
    except OSError as e:
        return {"error": f"agy could not start: {e.strerror or e}"}
    if done.timed_out or done.over_limit or done.returncode != 0:
        return {"error": f"agy /quota did not answer (exit {done.returncode})"}
    try:
        envelope = json.loads(done.stdout.decode("utf-8", "replace"))
    except ValueError:
        return {"error": "agy /quota did not print JSON (agy older than 1.1.11?)"}
    return reading(envelope, group)


if __name__ == "__main__":
    print(json.dumps(main(os.environ)))
    sys.exit(0)
