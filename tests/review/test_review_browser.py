"""The review page in a real headless Chromium: every packet with its verdict, a diff's
changed lines, a worker's HTML shown as text, reading with JavaScript off, and a rejection
clicked in the page that the ledger records and `prun integrate` honours."""

from __future__ import annotations

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (fails on CI) and says why
    expect = None


from helpers import prun


def rows(page) -> dict[str, dict[str, str]]:
    out = {}
    for row in page.locator("#packets tbody tr").all():
        cells = [c.inner_text().strip() for c in row.locator("td").all()]
        out[cells[0]] = {"kind": cells[1], "executor": cells[2], "model": cells[3],
                         "status": cells[4], "verdict": cells[5], "reasons": cells[6],
                         "cost": cells[7], "decision": cells[8]}
    return out


def test_every_packet_with_its_verdict(browser, server, artifacts):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(server.url)
    got = rows(page)
    assert {k: v["verdict"] for k, v in got.items()} == {
        "feature": "ACCEPTED", "leak": "REJECTED", "hollow": "REVIEW", "report": "REJECTED"}
    assert got["leak"]["reasons"] == "reason=scope-leak path=README.md"
    assert got["hollow"]["reasons"] == "reason=hollow-empty-diff"
    assert got["report"]["reasons"] == "reason=missing-section section=Risks"
    assert all(v["status"] == "succeeded" for v in got.values())
    assert (got["hollow"]["executor"], got["hollow"]["model"]) == ("claude", "sonnet")
    assert (got["hollow"]["cost"], got["feature"]["cost"]) == ("$0.0125", "—")
    expect(page.locator("#p-hollow dd.cost")).to_have_text(
        "$0.0125 · tokens in 1,200, out 30, cached 1,000")
    sections = page.locator("#p-report ul.sections li")
    expect(sections).to_have_text(["Summary: found", "Risks: missing"])
    shot = artifacts / "review.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    page.close()


def test_a_diff_shows_the_changed_lines(browser, server):
    page = browser.new_page()
    page.goto(server.url)
    feature = page.locator("#p-feature")
    main = feature.locator("details.file", has_text="src/app/main.py")
    expect(main.locator("tr.del")).to_have_text(["2-    return 1"])
    expect(main.locator("tr.add")).to_have_text(["2+    value = 2", "3+    return value"])
    expect(feature.locator("details.file summary")).to_have_text([
        "added src/app/data.bin (binary)",
        "renamed src/app/helpers.py from src/app/util.py (+0 −0)",
        "modified src/app/main.py (+2 −1)",
        "added src/app/new.py (+1 −0)"])
    # the result is Markdown, and the worker's HTML in it is shown, never run
    result = feature.locator(".markdown")
    expect(result.locator("h2")).to_have_text(["Summary", "Verification"])
    expect(result.locator("strong")).to_have_text("2")
    assert result.locator("script, img").count() == 0
    expect(result).to_contain_text('<script>document.title = "owned"</script>')
    assert page.title().startswith("prun review ")
    page.close()


def test_reading_works_with_javascript_off(browser, server):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server.url)
    assert rows(page)["leak"]["verdict"] == "REJECTED"
    expect(page.locator("#p-feature details.file tr.add").first).to_have_text("2+    value = 2")
    # the decision forms are plain forms: they post without JavaScript too
    form = page.locator("#p-hollow form.decide")
    form.locator("input[name=note]").fill("read it: nothing to change")
    with page.expect_navigation():
        form.locator("button[value=include]").click()
    expect(page.locator("#row-hollow td.decided")).to_have_text("include by tester")
    context.close()


def test_a_rejection_clicked_is_recorded_and_integrate_leaves_it_out(browser, server,
                                                                      finished_run, artifacts):
    from prun.ledger import Ledger

    f = finished_run
    page = browser.new_page()
    page.goto(server.url)
    form = page.locator("#p-feature form.decide")
    form.locator("input[name=note]").fill("renames the helpers; not now")
    with page.expect_navigation():
        form.locator("button[value=reject]").click()
    expect(page.locator("#row-feature td.decided")).to_have_text("reject by tester")
    expect(page.locator("#p-feature ul.history li").first).to_contain_text(
        "renames the helpers; not now")
    page.screenshot(path=str(artifacts / "review-rejected.png"))

    with Ledger.open(f.env["PRUN_LEDGER"], create=False) as ledger:
        decided = [dict(r) for r in ledger.decisions(f.run_id, "feature")]
        attempt = ledger.attempts(f.run_id, "feature")[-1]["id"]
    assert [(d["decision"], d["who"], d["note"], d["attempt_id"]) for d in decided] == [
        ("reject", "tester", "renames the helpers; not now", attempt)]
    assert decided[0]["at"].endswith("Z")

    r = prun("integrate", f.run_id, cwd=f.repo, env=f.env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SKIPPED feature verdict=accepted decision=reject" in r.stdout.splitlines()
    assert "SKIPPED leak verdict=rejected" in r.stdout.splitlines()
    assert (f.repo / "src/app/main.py").read_text() == "def main():\n    return 1\n"
    assert (f.repo / "src/app/util.py").exists() and not (f.repo / "src/app/new.py").exists()
    assert "CHECK passed exit=0" in r.stdout

    # the integrate is a new event in the run: the page reloads itself and shows the combined
    # check and its log (reloading it here too would race that reload)
    expect(page.locator("#check")).to_contain_text("passed", timeout=60_000)
    expect(page.locator("#check pre.log")).to_have_count(1)
    page.close()
