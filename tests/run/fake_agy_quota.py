"""A fake agy for quota tests: the first call (no --conversation) stops on a quota limit
when FAKE_QUOTA_FIRST=1, a resumed call (--conversation) always succeeds."""

import json
import os
import sys

argv = sys.argv[1:]
resumed = "--conversation" in argv
log = os.environ.get("FAKE_AGY_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": argv}) + "\n")


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


emit({"event": "init", "conversation_id": "conv-1"})
if os.environ.get("FAKE_QUOTA_FIRST") == "1" and not resumed:
    emit({"event": "result", "result": {"conversation_id": "conv-1", "status": "ERROR",
                                        "response": "I started by",
                                        "error": "Individual quota reached. Resets in 2s."}})
else:
    emit({"event": "result", "result": {"conversation_id": "conv-1", "status": "SUCCESS",
                                        "response": "The unit finished: " +
                                        ("resumed the conversation" if resumed else "fresh")}})
