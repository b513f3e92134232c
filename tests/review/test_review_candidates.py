"""A packet's candidates on the review page: side by side, and the person's pick (its button,
posted as a browser would) recorded in the ledger, then honoured by prun reconcile and prun
integrate."""

from __future__ import annotations

import json
import re
import sys

from reviewrun import Fixture, make_repo, serve
from test_review_http import page_token, request

from helpers import prun

WRITE = ("import os\nk = os.environ['PRUN_CANDIDATE']\nos.makedirs('out/fix', exist_ok=True)\n"
         "open('out/fix/a.txt', 'w').write('one\\n' if k == '1' else 'two\\n')\n"
         "if k == '1':\n    open('out/fix/b.txt', 'w').write('x\\ny\\nz\\n')\n"
         "print('candidate', k, 'wrote its files')")


def test_the_pick_button_records_a_decision_that_integrate_applies(tmp_path):
    repo, env = make_repo(tmp_path)
    plan = {"packets": [{"id": "fix", "kind": "code", "executor": "command",
                         "owns": ["out/fix/**"], "prompt": "fix it", "candidates": 2,
                         "command": [sys.executable, "-c", WRITE]}]}
    (repo / "plan.json").write_text(json.dumps(plan))
    r = prun("run", "plan.json", cwd=repo, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    lines = prun("reconcile", cwd=repo, env=env).stdout.splitlines()
    assert "NOT-CHOSEN fix candidate=1 reason=larger-diff" in lines, lines

    server = serve(Fixture(repo, env, run_id))
    s = next(server)
    try:
        token = page_token(s)
        _, _, body = request(s, "GET", f"/?token={s.token}")
        group = body[body.index("Candidates of fix"):]
        form = re.search(r'<form method="post" action="/decide" class="pick">(.*?)</form>',
                         group, re.S)
        assert form, group[:2000]
        fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">',
                                 form.group(1)))
        assert fields["packet"] == "fix.c1"
        status, _, text = request(s, "POST", "/decide",
                                  body={**fields, "token": token, "decision": "accept"},
                                  headers={"Origin": s.base, "Sec-Fetch-Site": "same-origin",
                                           "Accept": "text/plain"})
        assert status in (200, 303), text
    finally:
        next(server, None)

    lines = prun("reconcile", cwd=repo, env=env).stdout.splitlines()
    assert "NOT-CHOSEN fix candidate=2 reason=picked" in lines, lines
    assert any(line.startswith('ACCEPTED fix candidate=1 of=2 why="picked by tester"')
               for line in lines), lines
    merged = prun("integrate", cwd=repo, env=env, timeout=120)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert (repo / "out" / "fix" / "a.txt").read_text() == "one\n"
    assert (repo / "out" / "fix" / "b.txt").exists()
