"""A fake "echo-agent" CLI for the executor registered from outside prun (tests/executors/outside).

Its stream, one JSON object per line on stdout:

    {"kind": "hello", "session": "<id>"}
    {"kind": "say", "text": "<assistant text>"}
    {"kind": "end", "ok": true|false, "answer": "<final answer>", "error": "<text>"|null}

echo-agent --mode write|read, the prompt on stdin. Scripted by env:

FAKE_ECHO_SCENARIO  success (default), or fail (an end event with ok false, exit 3)
FAKE_ECHO_WRITE     in write mode, a path (relative to the working folder) it writes the
                    prompt's first line to, as an agent editing the code would
FAKE_ECHO_LOG       append one JSON line per call: argv, cwd
"""

import json
import os
import pathlib
import sys

argv = sys.argv[1:]
prompt = sys.stdin.read()
log = os.environ.get("FAKE_ECHO_LOG")
if log:
    with open(log, "a") as f:
        f.write(json.dumps({"argv": argv, "cwd": os.getcwd()}) + "\n")


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


first = next((line.strip() for line in prompt.splitlines() if line.strip()), "(empty prompt)")
emit({"kind": "hello", "session": f"echo-{os.getpid()}"})
emit({"kind": "say", "text": f"Reading the prompt: {first}\n"})
if os.environ.get("FAKE_ECHO_SCENARIO", "success") == "fail":
    emit({"kind": "end", "ok": False, "answer": None, "error": "echo-agent gave up"})
    sys.exit(3)
target = os.environ.get("FAKE_ECHO_WRITE")
written = ""
if target and "--mode" in argv and argv[argv.index("--mode") + 1] == "write":
    path = pathlib.Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(first + "\n")
    written = f" I wrote {target}."
emit({"kind": "end", "ok": True, "error": None,
      "answer": f"## Result\n\nEcho agent finished the unit: {first}.{written}\n"})
