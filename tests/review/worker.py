"""A command unit for the review fixture: changes files as told, then prints its result.

    worker.py JSON   where JSON is {"write": {path: text}, "binary": {path: n},
                     "rename": {old: new}, "wait_for": path, "result": text}

With "wait_for", it writes its files, then waits until that path exists before it finishes.
"""

import json
import os
import sys
import threading

job = json.loads(sys.argv[1])
for path, text in job.get("write", {}).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
for path, n in job.get("binary", {}).items():
    with open(path, "wb") as f:
        f.write(bytes(range(256)) * n)
for old, new in job.get("rename", {}).items():
    os.rename(old, new)
release = job.get("wait_for")
tick = threading.Event()
while release and not os.path.exists(release):
    tick.wait(0.05)
sys.stdout.write(job.get("result", ""))
