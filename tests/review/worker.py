"""A command unit for the review fixture: changes files as told, then prints its result.

    worker.py JSON   where JSON is {"write": {path: text}, "binary": {path: n},
                     "rename": {old: new}, "result": text}
"""

import json
import os
import sys

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
sys.stdout.write(job.get("result", ""))
