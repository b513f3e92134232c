"""A page on another local port tries to decide for the person: the review page is open in
the browser, then a hostile page served by another local process is opened in the same
browser. Its script reads the run and posts an include for the rejected packet every way a
page can (credentials, no-cors, a plain form, a script tag, a guessed token); its server tries
whatever the browser sent it. Every request reaching the review server is refused (403), the
browser sends the hostile server nothing of the review page's, no decision is recorded, and
`prun integrate` leaves the rejected change out."""

from __future__ import annotations

from hostile import Hostile

from helpers import prun


def test_a_page_on_another_port_cannot_read_or_decide(browser, server, finished_run):
    f = finished_run
    context = browser.new_context()
    seen: list[tuple[str, str, int]] = []
    context.on("response", lambda r: seen.append((r.request.method, r.url, r.status))
               if r.url.startswith(server.base) else None)

    mine = context.new_page()
    mine.goto(server.url)               # the person's own page: whatever it leaves is there
    assert mine.locator("#packets tbody tr").count() == 4
    mine_seen = len(seen)

    with Hostile(server.base) as hostile:
        page = context.new_page()
        page.goto(hostile.url)
        assert hostile.done.wait(120), "the hostile page's script did not finish"
        page.close()
    context.close()

    assert hostile.tried == 10
    theirs = seen[mine_seen:]
    assert theirs, "the hostile page's requests reached the review server"
    assert {status for _, _, status in theirs} == {403}, theirs
    assert any(method == "POST" for method, _, _ in theirs), theirs
    # the browser gave the other port nothing of the review page's
    assert all(server.token not in str(h) for h in hostile.headers_seen), hostile.headers_seen
    assert all("cookie" not in {k.lower() for k in h} for h in hostile.headers_seen)
    assert hostile.direct and {status for _, status in hostile.direct} == {403}, hostile.direct

    r = prun("ledger", f.run_id, "--json", cwd=f.repo, env=f.env)
    assert r.returncode == 0 and "forged" not in r.stdout, r.stdout
    r = prun("review", f.run_id, "--json", cwd=f.repo, env=f.env)
    assert '"decision": null' in r.stdout and '"decision": "include"' not in r.stdout

    readme = (f.repo / "README.md").read_text()
    r = prun("integrate", f.run_id, "--no-check", cwd=f.repo, env=f.env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SKIPPED leak verdict=rejected" in r.stdout.splitlines(), r.stdout
    assert (f.repo / "README.md").read_text() == readme == "readme\n"
