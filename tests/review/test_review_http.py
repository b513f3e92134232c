"""`prun review` over plain HTTP: the token is required everywhere, the POST carries it too,
only 127.0.0.1 is bound, and `--decide` / `--json` work without a browser."""

from __future__ import annotations

import http.client
import json
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


def test_the_token_is_required(server):
    tok = server.token
    assert request(server, "GET", "/")[0] == 403
    assert request(server, "GET", "/?token=wrong")[0] == 403
    assert request(server, "GET", "/?token=%C3%A9t%C3%A9")[0] == 403       # not ASCII
    assert request(server, "GET", "/version")[0] == 403
    assert request(server, "GET", "/static/review.css")[0] == 403
    assert request(server, "GET", "/", headers={"Cookie": "prun_review=wrong"})[0] == 403
    # another Host (a name rebound to 127.0.0.1) is refused even with the token
    assert request(server, "GET", f"/?token={tok}", host="evil.example:80")[0] == 403
    status, headers, body = request(server, "GET", f"/?token={tok}")
    assert status == 200 and "prun review" in body
    assert f"prun_review={tok}" in headers["Set-Cookie"]
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    status, _, body = request(server, "GET", "/version", headers={"Cookie": f"prun_review={tok}"})
    assert status == 200 and json.loads(body)["live"] is False


def test_a_decision_needs_the_token_in_its_form(server, finished_run):
    cookie = {"Cookie": f"prun_review={server.token}"}
    form = {"packet": "hollow", "decision": "include", "note": "forged"}
    status, _, _ = request(server, "POST", "/decide", body=form, headers=cookie)
    assert status == 403
    status, _, _ = request(server, "POST", "/decide", body={**form, "token": "wrong"},
                           headers=cookie)
    assert status == 403
    r = prun("ledger", "--json", cwd=finished_run.repo, env=finished_run.env)
    assert "forged" not in r.stdout


def test_bad_decisions_are_refused(server):
    cookie = {"Cookie": f"prun_review={server.token}", "Accept": "text/plain"}
    for form in ({"packet": "nope", "decision": "reject"},
                 {"packet": "hollow", "decision": "maybe"},
                 {"packet": "hollow", "decision": "reject", "attempt": "not-the-attempt"}):
        status, _, body = request(server, "POST", "/decide",
                                  body={**form, "token": server.token}, headers=cookie)
        assert status == 409 and body.startswith("not recorded: "), body


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
