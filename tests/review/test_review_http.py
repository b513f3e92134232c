"""`prun review` over plain HTTP: a token is required for every piece of data, none is ever
kept in a cookie, a decision needs a token of a page the server served and its own Origin,
only 127.0.0.1 is bound, and `--decide` / `--json` work without a browser."""

from __future__ import annotations

import http.client
import json
import re
import urllib.parse

from helpers import prun


def request(server, method: str, path: str, *, body: dict | None = None,
            headers: dict | None = None, host: str | None = None) -> tuple[int, dict, str]:
    parts = urllib.parse.urlsplit(server.base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = urllib.parse.urlencode(body) if body is not None else None
    hdrs = dict(headers or {})
    if data is not None:
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    if host:
        hdrs["Host"] = host
    try:
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read().decode()
    finally:
        conn.close()


def page_token(server) -> str:
    """The token of a page the server serves (its forms and its script carry it)."""
    status, _, body = request(server, "GET", f"/?token={server.token}")
    assert status == 200, body
    found = re.search(r'<meta name="prun-token" content="([^"]+)">', body)
    assert found, body[:500]
    forms = set(re.findall(r'<input type="hidden" name="token" value="([^"]+)">', body))
    assert forms == {found.group(1)}
    return found.group(1)


def test_the_token_is_required_and_never_a_cookie(server):
    tok = server.token
    port = urllib.parse.urlsplit(server.base).port
    for path in ("/", "/?token=wrong", "/?token=%C3%A9t%C3%A9", "/version", "/run.json",
                 f"/?token={tok[:-1]}", f"/?token={tok}x"):
        assert request(server, "GET", path)[0] == 403, path
    # a cookie means nothing, even one that holds the secret
    for path in ("/", "/version", "/run.json"):
        status, _, _ = request(server, "GET", path, headers={"Cookie": f"prun_review={tok}"})
        assert status == 403, path
    # another Host (a name rebound to 127.0.0.1, or localhost) is refused even with the token
    for host in ("evil.example:80", f"localhost:{port}", f"127.0.0.1:{port + 1}"):
        assert request(server, "GET", f"/?token={tok}", host=host)[0] == 403, host
        assert request(server, "GET", "/static/review.css", host=host)[0] == 403, host
    # a request from another page: its Origin, or the browser's word that it is not ours
    for hdrs in ({"Origin": "http://127.0.0.1:1"}, {"Origin": "null"},
                 {"Sec-Fetch-Site": "same-site"}, {"Sec-Fetch-Site": "cross-site"}):
        assert request(server, "GET", f"/?token={tok}", headers=hdrs)[0] == 403, hdrs
        assert request(server, "GET", "/static/review.js", headers=hdrs)[0] == 403, hdrs

    status, headers, body = request(server, "GET", f"/?token={tok}",
                                    headers={"Sec-Fetch-Site": "none"})
    assert status == 200 and "prun review" in body
    assert "Set-Cookie" not in headers and tok not in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["Cross-Origin-Resource-Policy"] == "same-origin"
    assert headers["Referrer-Policy"] == "same-origin"    # the address never goes elsewhere
    # the style sheets and the script are the same for every run: no token needed
    assert request(server, "GET", "/static/review.css")[0] == 200

    # the page's own token, in the header its script sends, reads the data
    page = page_token(server)
    assert page != page_token(server)                     # each page has its own
    for path in ("/version", "/run.json"):
        status, headers, body = request(server, "GET", path, headers={
            "X-Prun-Token": page, "Sec-Fetch-Site": "same-origin"})
        assert status == 200 and "Set-Cookie" not in headers, body
    assert json.loads(request(server, "GET", "/version",
                              headers={"X-Prun-Token": page})[2])["live"] is False
    # the secret is for the address only; a page token's signature cannot be made up
    nonce = page.split(".")[0]
    for forged in (tok, f"{nonce}.{'A' * 43}", f"{nonce}.", page[:-1], page + "A"):
        assert request(server, "GET", "/run.json", headers={"X-Prun-Token": forged})[0] == 403


def test_a_decision_needs_a_page_token_and_its_own_origin(server, finished_run):
    origin = {"Origin": server.base}
    page = page_token(server)
    form = {"packet": "hollow", "decision": "include", "note": "forged"}
    for hdrs, token in (
            ({"Cookie": f"prun_review={server.token}", **origin}, None),   # the old cookie
            (origin, server.token),                                         # the secret
            (origin, "wrong"),
            (origin, "A" * 43),                                             # a guess
            ({}, page),                                                     # no Origin
            ({"Origin": "http://127.0.0.1:1"}, page),                       # another port's
            ({"Origin": "null"}, page),
            ({**origin, "Sec-Fetch-Site": "same-site"}, page),
            ({**origin, "Sec-Fetch-Site": "none"}, page)):
        body = form if token is None else {**form, "token": token}
        status, _, text = request(server, "POST", "/decide", body=body, headers=hdrs)
        assert status == 403 and text.startswith("forbidden: "), (hdrs, token, text)
    status, _, _ = request(server, "POST", "/decide", body=form, host="evil.example:80",
                           headers={**origin, "X-Prun-Token": page})
    assert status == 403
    r = prun("ledger", "--json", cwd=finished_run.repo, env=finished_run.env)
    assert "forged" not in r.stdout


def test_bad_decisions_are_refused(server):
    page = page_token(server)
    hdrs = {"Origin": server.base, "Sec-Fetch-Site": "same-origin", "Accept": "text/plain"}
    for form in ({"packet": "nope", "decision": "reject"},
                 {"packet": "hollow", "decision": "maybe"},
                 {"packet": "hollow", "decision": "reject", "attempt": "not-the-attempt"}):
        status, _, body = request(server, "POST", "/decide", body={**form, "token": page},
                                  headers=hdrs)
        assert status == 409 and body.startswith("not recorded: "), body
    # the page token may come in the header its script would send instead
    status, _, body = request(server, "POST", "/decide", body={"packet": "nope",
                              "decision": "reject"}, headers={**hdrs, "X-Prun-Token": page})
    assert status == 409, body


def test_json_and_decide_from_the_command_line(finished_run):
    f = finished_run
    r = prun("review", f.run_id, "--json", cwd=f.repo, env=f.env)
    assert r.returncode == 0, r.stderr
    page = json.loads(r.stdout)
    verdicts = {p["packet"]: p["verdict"] for p in page["packets"]}
    assert verdicts == {"feature": "ACCEPTED", "leak": "REJECTED", "hollow": "REVIEW",
                        "report": "REJECTED"}
    report = next(p for p in page["packets"] if p["packet"] == "report")
    assert report["sections"] == {"Summary": "found", "Risks": "missing"}
    cost = {p["packet"]: p["cost"] for p in page["packets"]}
    assert cost["feature"] == {"tokens": {"in": None, "out": None, "cached": None},
                               "cost_usd": None}                  # a command reports nothing
    assert cost["hollow"] == {"tokens": {"in": 1200, "out": 30, "cached": 1000},
                              "cost_usd": 0.0125}
    assert page["cost"] == cost["hollow"]
    hollow = next(p for p in page["packets"] if p["packet"] == "hollow")
    assert (hollow["executor"], hollow["model"]) == ("claude", "sonnet")

    r = prun("review", f.run_id, "--decide", "hollow", "include", "--note", "looked: fine",
             "--as", "Ada", cwd=f.repo, env=f.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("DECIDED hollow decision=include attempt=")
    assert " who=Ada at=" in r.stdout
    r = prun("review", f.run_id, "--json", cwd=f.repo, env=f.env)
    hollow = next(p for p in json.loads(r.stdout)["packets"] if p["packet"] == "hollow")
    assert hollow["decision"]["decision"] == "include"
    assert hollow["decision"]["note"] == "looked: fine" and hollow["decision"]["who"] == "Ada"


def test_bad_usage_is_one_line(finished_run):
    f = finished_run
    for args, words in ((["nope"], "no run 'nope'"),
                        ([f.run_id, "--decide", "ghost", "reject"], "no such packet"),
                        ([f.run_id, "--decide", "leak", "approve"], "no such decision"),
                        ([f.run_id, "--note", "x"], "--note goes with --decide"),
                        ([f.run_id, "--port", "70000"], "is not a port")):
        r = prun("review", *args, cwd=f.repo, env=f.env)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and words in r.stderr, r.stderr


def test_a_port_in_use_is_refused_in_one_line(finished_run):
    import socket

    f = finished_run
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = prun("review", f.run_id, "--port", str(port), cwd=f.repo, env=f.env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == "" and f"cannot listen on 127.0.0.1:{port}" in r.stderr


def test_the_web_libraries_are_imported_only_to_serve(finished_run, tmp_path):
    import os
    import subprocess
    import sys

    f = finished_run
    probe = ("import sys\nfrom prun.cli import main\n"
             f"code = main(['review', {f.run_id!r}, '--json'])\n"
             "import prun.review.decide, prun.review.model, prun.cli.integrate\n"
             "web = sorted(m for m in sys.modules\n"
             "             if m.split('.')[0] in ('aiohttp', 'markdown_it', 'pygments'))\n"
             "print('WEB', *web, file=sys.stderr)\nsys.exit(code)\n")
    p = subprocess.run([sys.executable, "-c", probe], cwd=f.repo, env={**os.environ, **f.env},
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip() == "WEB", p.stderr


def test_open_hands_the_browser_a_one_time_address_never_the_secret(finished_run, tmp_path):
    """A browser's command line can be read by any local user: --open gives it an address
    good once, which the server sends on to the page."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from reviewrun import read_line

    from helpers import poll

    f = finished_run
    out = tmp_path / "browser.json"
    fake = Path(__file__).with_name("fake_browser.py")
    env = {**os.environ, **f.env, "BROWSER": f"{sys.executable} {fake} {out} %s"}
    proc = subprocess.Popen([sys.executable, "-m", "prun", "review", f.run_id, "--open"],
                            cwd=f.repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = read_line(proc)
        assert line.startswith("REVIEW http://127.0.0.1:"), line
        secret = line.split("/?token=")[1].strip()
        seen = json.loads(poll(lambda: out.exists() and out.read_text(), limit=120))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert secret not in " ".join(seen["argv"]) and "/?launch=" in seen["argv"][-1], seen
    assert seen["first"][0] == 200 and seen["page"], seen
    assert seen["first"][1].endswith(f"/?token={secret}")       # sent on to the page
    assert seen["again"] == 403, seen                             # good once
