"""``python -m prun.panel.detached RUN``: a panel's supervisor in the background
(``prun panel --detach``), its output in the run's ``supervisor.log``.

It drives the run as ``prun panel`` does in the foreground: an invalid answer gets its one
follow-up, and once the run is over the evidence, ``crosscheck.json`` and the ``panel`` event
are written. ``prun panel --run RUN`` prints the cross-check.
"""

from __future__ import annotations

import sys

from ..ledger import Ledger
from ..run.detached import ready_signal
from ..run.events import LineRenderer
from . import drive


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    run_id = args[0]
    with Ledger.open() as ledger:
        _, asked = drive.asked(ledger, run_id)
        renderer = LineRenderer(sys.stdout, verbose=True)

        def say(line: str) -> None:
            print(line, flush=True)

        try:
            drive.supervise(ledger, run_id, renderer.handle,
                            drive.FollowUps(run_id, asked["schema"], say),
                            on_claimed=ready_signal())
        finally:
            renderer.close()
        report = drive.finish(ledger, run_id)
        for line in report.lines():
            print(line, flush=True)
        return report.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
