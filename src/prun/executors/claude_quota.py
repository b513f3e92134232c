"""Claude Code's built-in quota probe: ``python -m prun.executors.claude_quota``, run by
``prun quota`` for the ``claude`` group when the config names no probe of its own. It keeps
the probe contract (``prun.quota.probes``) and always reports an error, so the group stays
``unknown``, never a guess.

Claude Code does report its subscription's 5-hour and 7-day windows (public code reads them
as ``rate_limits.five_hour`` and ``rate_limits.seven_day``, each ``used_percentage`` and
``resets_at``), but only to an interactive session's status line command: headless ``claude
-p`` prints them nowhere, its stream carries no reset time (docs/quota.md), and that shape was
not measured here. Until a headless readout exists, configure a probe of your own (for
example one that reads what your status line command saved) in ``[quota.probes]``.
"""

from __future__ import annotations

import json

UNKNOWN = ("Claude Code reports its 5-hour and 7-day windows only to an interactive status "
           "line, not to a headless command: unknown (configure [quota.probes] claude)")

if __name__ == "__main__":
    print(json.dumps({"error": UNKNOWN}))
