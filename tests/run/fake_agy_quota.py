"""A fake agy for quota tests: the first call (no --conversation) stops on a quota limit
when FAKE_QUOTA_FIRST=1, a resumed call (--conversation) always succeeds; every call stops
on a quota limit that resets in an hour when FAKE_QUOTA_ALWAYS=1.

FAKE_QUOTA_EDIT=1: the first call also edits ``first-edit.txt`` in its working folder, and
the resumed call says whether it found that edit (a follow-up must keep the workspace)."""

import json
import os
import sys

argv = sys.argv[1:]
resumed = "--conversation" in argv
log = os.environ.get("FAKE_AGY_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": argv, "cwd": os.getcwd()}) + "\n")


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


edit = os.environ.get("FAKE_QUOTA_EDIT") == "1"
emit({"event": "init", "conversation_id": "conv-1"})
if os.environ.get("FAKE_QUOTA_ALWAYS") == "1":
    emit({"event": "result", "result": {"conversation_id": "conv-1", "status": "ERROR",
                                        "response": "",
                                        "error": "Individual quota reached. Resets in 1h."}})
elif os.environ.get("FAKE_QUOTA_FIRST") == "1" and not resumed:
    if edit:
        with open("first-edit.txt", "w") as f:
            f.write("made before the quota stop\n")
    emit({"event": "result", "result": {"conversation_id": "conv-1", "status": "ERROR",
                                        "response": "I started by",
                                        "error": "Individual quota reached. Resets in 2s."}})
else:
    found = os.path.exists("first-edit.txt")
    if edit and found:
        with open("second-edit.txt", "w") as f:
            f.write("made by the follow-up\n")
    emit({"event": "result", "result": {"conversation_id": "conv-1", "status": "SUCCESS",
                                        "response": "The unit finished: " +
                                        ("resumed the conversation" if resumed else "fresh") +
                                        (f"; earlier edit found: {found}" if edit else "")}})
