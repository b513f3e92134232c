"""The page follows a run that is still going: with JavaScript on it reloads itself when the
run's version changes; with JavaScript off a refresh in the page does the same."""

from __future__ import annotations

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (fails on CI) and says why
    expect = None

import json

from reviewrun import Fixture, make_repo, serve, unit

from helpers import prun


def test_the_page_follows_a_live_run(tmp_path, browser):
    repo, env = make_repo(tmp_path / "live")
    release = tmp_path / "release"
    (repo / "plan.json").write_text(json.dumps({"packets": [
        unit("slow", ["src/app/**"], {"write": {"src/app/main.py": "LIVE = 1\n"},
                                      "wait_for": str(release),
                                      "result": "## Summary\n\nDone at last.\n"})]}))
    r = prun("run", str(repo / "plan.json"), "--detach", cwd=repo, env=env)
    assert r.returncode == 0, r.stderr
    run_id = r.stdout.split()[1]
    try:
        for srv in serve(Fixture(repo, env, run_id)):
            with_js = browser.new_page()
            with_js.goto(srv.url)
            context = browser.new_context(java_script_enabled=False)
            without = context.new_page()
            without.goto(srv.url)
            status = "#row-slow td.status"
            expect(with_js.locator(status)).to_have_text("running", timeout=60_000)
            expect(with_js.locator(".live")).to_have_count(1)
            expect(without.locator('meta[http-equiv="refresh"]')).to_have_count(1)
            release.write_text("go")
            expect(with_js.locator(status)).to_have_text("succeeded", timeout=60_000)
            expect(with_js.locator("#row-slow td:nth-child(6)")).to_have_text("ACCEPTED")
            expect(without.locator(status)).to_have_text("succeeded", timeout=60_000)
            expect(with_js.locator(".live")).to_have_count(0)
            context.close()
    finally:
        release.write_text("go")
        r = prun("wait", run_id, cwd=repo, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
