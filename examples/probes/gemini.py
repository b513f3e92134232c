#!/usr/bin/env python3
"""Example quota probe for the `gemini` group (Gemini CLI's pool).

Gemini CLI prints no quota readout in headless mode; its quota errors carry at most "Please
retry in Ns" (per-minute limits) or nothing (the daily limit). The Gemini API's requests-per-day
quota resets at midnight Pacific time, and its limits per model are listed in Google AI Studio
and, for a Cloud project, on the Cloud console's Quotas page, which is what a real probe would
read (through the console's quota API, with the project's credentials).

Offline, this example counts instead: it reads a daily request counter (a JSON file that a
wrapper around `gemini` increments, {"date": "2026-11-30", "requests": 812}) and a daily limit,
and reports what is left until the next midnight Pacific:

    gemini.py --limit 1000 counter.json

Prints one JSON object of the probe contract (docs/quota.md).
"""

import json
import sys
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

PACIFIC = ZoneInfo("America/Los_Angeles")


def main(argv):
    if len(argv) != 3 or argv[0] != "--limit":
        print(json.dumps({"error": "usage: gemini.py --limit N COUNTER.json"}))
        return 0
    try:
        limit = int(argv[1])
        with open(argv[2], encoding="utf-8") as f:
            counter = json.load(f)
        used = int(counter["requests"])
        date = str(counter["date"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(json.dumps({"group": "gemini", "error": f"cannot read the counter: {e}"}))
        return 0
    now = datetime.now(PACIFIC)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    if date != now.date().isoformat():
        used = 0  # the counter is from an earlier day: the quota has reset since
    print(json.dumps({"group": "gemini", "remaining": max(0, limit - used), "limit": limit,
                      "resets_at": midnight.isoformat(), "source": "daily request counter"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
