"""After `prun clean` (and `prun clean --force`), `prun reconcile` and the review page show
exactly the verdicts, reasons and diffs they showed before: the clone of an accepted change and
of one that needs review (not integrated yet) is kept, and every clone removed is read from the
change saved in the run dir. A real run of command units, the real `prun review` server."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from reviewrun import MAIN, Fixture, make_repo, serve, unit
from test_review_http import page_token, request

from helpers import prun
from prun.ledger import Ledger

RESULT = "## Summary\n\nDid what the packet asked.\n"


@pytest.fixture
def cleanable(tmp_path) -> Fixture:
    repo, env = make_repo(tmp_path)
    plan = {"packets": [
        unit("acc", ["src/app/**"], {"write": {"src/app/main.py": MAIN,
                                               "src/app/new.py": "NEW = True\n"},
                                     "binary": {"src/app/data.bin": 2},
                                     "rename": {"src/app/util.py": "src/app/helpers.py"},
                                     "result": RESULT}),
        # its own FALLBACK as the result of a success: nobody has decided it yet
        unit("rev", ["src/lib/**"], {"write": {"src/lib/core.py": "CORE = 3\n"},
                                     "result": "FALLBACK: stopped before the tests ran\n"}),
        unit("rej", ["docs/**"], {"write": {"docs/guide.md": "# Guide\n\nMore.\n",
                                            "README.md": "leak\n"}, "result": RESULT}),
    ]}
    (repo / "plan.json").write_text(json.dumps(plan))
    r = prun("run", str(repo / "plan.json"), cwd=repo, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = r.stdout.split()[1]
    return Fixture(repo, env, run_id)


def reconciled(f: Fixture) -> tuple[list[str], list[dict]]:
    """Reconcile's lines and its packets, where each change was read from left out."""
    lines = prun("reconcile", f.run_id, cwd=f.repo, env=f.env).stdout.splitlines()
    packets = json.loads(prun("reconcile", f.run_id, "--json", cwd=f.repo,
                              env=f.env).stdout)["packets"]
    for p in packets:
        for key in ("read_from", "saved"):
            (p["change"] or {}).pop(key, None)
    return lines, packets


def shown(f: Fixture) -> tuple[str, dict]:
    """The review page as the server serves it (its tokens left out) and the data its script
    reads (``/run.json``)."""
    for server in serve(f):
        page = page_token(server)
        status, _, html = request(server, "GET", f"/?token={server.token}")
        assert status == 200, html
        status, _, data = request(server, "GET", "/run.json", headers={"X-Prun-Token": page})
        assert status == 200, data
    # the tokens differ on every page, and the ledger's version moves with each event (a clean)
    html = re.sub(r'(name="prun-token" content|name="token" value|data-version)="[^"]+"',
                  r'\1=""', html)
    return html, {k: v for k, v in json.loads(data).items() if k != "version"}


def test_the_verdicts_and_the_page_are_the_same_after_any_clean(cleanable):
    f = cleanable
    with Ledger.open(f.env["PRUN_LEDGER"]) as ledger:
        ws = {a["packet_id"]: a["workspace"] for a in ledger.attempts(f.run_id)}
    before = reconciled(f)
    assert before[0][:3] == ["ACCEPTED acc files=4",
                             "REJECTED rej reason=scope-leak path=README.md",
                             "REVIEW rev reason=fallback-result path=" + before[1][2]["result_file"]]
    page = shown(f)
    verdicts = {p["packet"]: p["verdict"] for p in page[1]["packets"]}
    assert verdicts == {"acc": "ACCEPTED", "rej": "REJECTED", "rev": "REVIEW"}
    assert "+NEW = True" in page[1]["packets"][0]["diffs"]["src/app/new.py"]

    dry = prun("clean", f.run_id, "--dry-run", cwd=f.repo, env=f.env)
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    # the accepted change and the undecided one are kept; the rejected one goes, saved first
    assert f"KEPT acc {ws['acc']} reason=not-integrated" in lines
    assert f"KEPT rev {ws['rev']} reason=not-integrated" in lines
    assert f"REMOVED rej {ws['rej']}" in lines
    assert not any(line.startswith("LOST") for line in lines)

    r = prun("clean", f.run_id, cwd=f.repo, env=f.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:-1] == lines[:-1]
    assert os.path.isdir(ws["acc"]) and os.path.isdir(ws["rev"]) and not os.path.exists(ws["rej"])
    assert reconciled(f) == before
    assert shown(f) == page

    forced = prun("clean", f.run_id, "--force", cwd=f.repo, env=f.env)
    assert forced.returncode == 0, forced.stderr
    lost = [line for line in forced.stdout.splitlines() if line.startswith("LOST")]
    assert lost == [f"LOST acc {ws['acc']} reason=not-integrated",
                    f"LOST rev {ws['rev']} reason=not-integrated"]     # one line per packet
    assert not any(os.path.exists(w) for w in ws.values())
    assert reconciled(f) == before
    assert shown(f) == page
    assert Path(before[1][0]["result_file"]).exists()
