#!/usr/bin/env python3
"""dispatch-task-agy: run one unit on the Antigravity CLI (`prun dispatch --executor agy`).

Usage: <python> scripts/dispatch-task-agy.py --prompt-file <prompt> --result-file <result>
                                             --unit-id <id> [--mode ...] [--add-dir ...]
                                             [--continue-from STATE_DIR]
Same flags, output and exit codes as `prun dispatch --executor agy`.
"""

import os
import sys

try:
    from prun.cli import main
except ImportError:  # running from a checkout without prun installed
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "..", "src"))
    from prun.cli import main

if __name__ == "__main__":
    sys.exit(main(["dispatch", "--executor", "agy", *sys.argv[1:]]))
