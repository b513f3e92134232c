"""A hostile local web server for the review page's tests: another process on another port of
127.0.0.1, as any local program can run. Its page, opened in the same browser as the review
page, tries every way to read the run and to decide for the person; the server itself tries
with whatever the browser sent it (a cookie, say). Everything it sees is recorded.

    with Hostile(review_base) as h:
        page.goto(h.url)        # its script runs its tricks, then asks for /done
        h.done.wait(...)
        h.headers_seen          # every request's headers, as the browser sent them
        h.direct                # (what, status) of each request it made itself
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GUESS = "A" * 43     # a token of the printed token's shape, guessed

# Each trick ends in /done?n=<tricks tried>; a trick that throws (CORS, a refused preflight)
# counts as tried: the browser did send it, or refused to.
PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>free stuff</title></head>
<body><iframe name="sink" id="sink"></iframe>
<script>
(async function () {
  const R = %(review)s, G = %(guess)s;
  const form = new URLSearchParams({packet: "leak", decision: "include", note: "forged",
                                    token: G});
  const tricks = [
    () => fetch(R + "/run.json", {credentials: "include"}),
    () => fetch(R + "/run.json", {mode: "no-cors", credentials: "include"}),
    () => fetch(R + "/version", {mode: "no-cors", credentials: "include"}),
    () => fetch(R + "/?token=" + G, {mode: "no-cors", credentials: "include"}),
    () => fetch(R + "/run.json", {headers: {"X-Prun-Token": G}, credentials: "include"}),
    () => fetch(R + "/decide", {method: "POST", mode: "no-cors", credentials: "include",
                               body: form}),
    () => fetch(R + "/decide", {method: "POST", credentials: "include", body: form,
                               headers: {"X-Prun-Token": G}}),
    () => fetch(R + "/decide?token=" + G, {method: "POST", mode: "no-cors",
                                          credentials: "include", body: form}),
    () => new Promise(function (done) {          // a plain form posted into a frame
      const f = document.createElement("form");
      f.method = "POST"; f.action = R + "/decide"; f.target = "sink";
      for (const [k, v] of form) {
        const i = document.createElement("input");
        i.type = "hidden"; i.name = k; i.value = v; f.appendChild(i);
      }
      document.body.appendChild(f);
      document.getElementById("sink").addEventListener("load", done, {once: true});
      f.submit();
    }),
    () => new Promise(function (done) {          // the run's data as a script
      const s = document.createElement("script");
      s.src = R + "/run.json"; s.onload = s.onerror = done;
      document.body.appendChild(s);
    }),
  ];
  let n = 0;
  for (const t of tricks) {
    try { await t(); } catch (e) { /* refused: counted all the same */ }
    n += 1;
  }
  await fetch("/done?n=" + n);
})();
</script></body></html>
"""


class Hostile:
    def __init__(self, review_base: str):
        self.review = review_base
        self.headers_seen: list[dict[str, str]] = []
        self.direct: list[tuple[str, int]] = []
        self.tried = 0
        self.done = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                owner.headers_seen.append(dict(self.headers.items()))
                url = urllib.parse.urlsplit(self.path)
                if url.path == "/done":
                    owner.tried = int(urllib.parse.parse_qs(url.query)["n"][0])
                    self._send(204, "")
                    owner.done.set()
                    return
                owner.with_what_the_browser_sent(self.headers.get("Cookie", ""))
                self._send(200, PAGE % {"review": json.dumps(owner.review),
                                        "guess": json.dumps(GUESS)})

            def _send(self, status: int, body: str) -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def with_what_the_browser_sent(self, cookie: str) -> None:
        """The server side of the attack: every cookie value the browser sent here is tried as
        the review page's token, in the query, in a form and as the cookie itself; and a
        guess."""
        values = [v.split("=", 1)[1] for v in cookie.split("; ") if "=" in v] + [GUESS]
        for value in values:
            self.direct.append(("read", self.request("GET", f"/run.json?token={value}",
                                                     headers={"Cookie": cookie})))
            self.direct.append(("decide", self.request(
                "POST", "/decide", headers={"Cookie": cookie, "X-Prun-Token": value},
                body={"packet": "leak", "decision": "include", "note": "forged",
                      "token": value})))

    def request(self, method: str, path: str, *, headers: dict[str, str],
                body: dict[str, str] | None = None) -> int:
        parts = urllib.parse.urlsplit(self.review)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        hdrs = {k: v for k, v in headers.items() if v}
        data = None
        if body is not None:
            data = urllib.parse.urlencode(body)
            hdrs["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            conn.request(method, path, body=data, headers=hdrs)
            response = conn.getresponse()
            response.read()
            return response.status
        finally:
            conn.close()

    def __enter__(self) -> Hostile:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=30)
