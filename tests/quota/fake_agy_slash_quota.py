"""A fake agy answering print-mode ``/quota`` (``agy -p /quota --output-format json``) with the
envelope in FAKE_AGY_QUOTA (JSON text) and logging each call's argv to FAKE_AGY_LOG."""

import json
import os
import sys

log = os.environ.get("FAKE_AGY_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": sys.argv[1:]}) + "\n")
sys.stdout.write(os.environ.get("FAKE_AGY_QUOTA", "") + "\n")
