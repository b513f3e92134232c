"""A browser for `prun review --open`'s test: records the command line it was started with,
opens the address it was given (following redirects), then opens it once more.

    fake_browser.py OUT URL     writes OUT (JSON): argv, first: [status, final url],
                                page: the page came back, again: the second status
"""

import json
import os
import sys
import urllib.error
import urllib.request


def fetch(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.geturl(), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, url, ""


out, url = sys.argv[1], sys.argv[2]
status, final, body = fetch(url)
again = fetch(url)[0]
with open(out + ".tmp", "w") as f:
    json.dump({"argv": sys.argv, "first": [status, final], "page": "prun review" in body,
               "again": again}, f)
os.rename(out + ".tmp", out)
