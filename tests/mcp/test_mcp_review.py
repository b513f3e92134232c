"""The review tools: ``review`` gives what the review page shows as data (it never starts the
page), ``decide`` records the person's decision, and ``prun integrate`` honours it."""

from __future__ import annotations

import anyio
import pytest
from mcpkit import call, cli, connect, git, make_repo, unit, write_plan  # skips without mcp


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "repo")


def test_review_as_data_and_a_rejection_that_integrate_honours(repo, tmp_path):
    write_plan(repo / "plan.json", [
        unit("alpha", "open('alpha.txt', 'w').write('alpha\\n'); "
             "print('## Summary'); print('wrote alpha.txt with one line')",
             kind="code", owns=["alpha.txt"], requires=["Summary"]),
        unit("beta", "open('beta.txt', 'w').write('beta\\n'); "
             "print('## Summary'); print('wrote beta.txt with one line')",
             kind="code", owns=["beta.txt"], requires=["Summary"]),
    ], name="mcp-review")
    git(repo, "add", "plan.json")
    git(repo, "commit", "-q", "-m", "plan")
    ran = cli("run", "plan.json", cwd=repo)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_id = ran.stdout.split()[1]
    assert cli("reconcile", run_id, cwd=repo).returncode == 0

    async def main():
        async with connect(repo, tmp_path / "server.log") as s:
            res, text = await call(s, "review", {"run": run_id})
            assert not res.is_error, text
            sc = res.structured_content
            assert {p["packet"]: p["verdict"] for p in sc["packets"]} == {
                "alpha": "ACCEPTED", "beta": "ACCEPTED"}
            res, text = await call(s, "decide", {"run": run_id, "packet": "beta",
                                                 "decision": "reject", "note": "not now",
                                                 "who": "ada"})
            assert not res.is_error, text
            assert text.startswith("DECIDED beta decision=reject ") and " who=ada " in text
            res, text = await call(s, "decide", {"run": run_id, "packet": "nope",
                                                 "decision": "reject"})
            assert res.is_error and text.startswith("prun: "), text

    anyio.run(main)
    done = cli("integrate", run_id, "--no-check", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "alpha.txt").exists() and not (repo / "beta.txt").exists()
    assert any(line.startswith("SKIPPED beta") and "decision=reject" in line
               for line in done.stdout.splitlines()), done.stdout
