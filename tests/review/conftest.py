"""A finished run made for real (a small repository, a plan of command units, `prun run`, then
`prun reconcile`), and `prun review` serving it, shared by the module's tests.

Packets:
    feature   changes its owned files (a modification, an addition, a rename, a binary): ACCEPTED
    leak      also changes README.md, outside what it owns: REJECTED (scope-leak)
    hollow    a Claude Code unit (the fake CLI) that changes nothing: REVIEW (hollow-empty-diff);
              it reports what it used (1,200 tokens in, 30 out, 1,000 cached, $0.0125)
    report    changes its owned file, but its result lacks a required section: REJECTED
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from reviewrun import CHROMIUM_ARGS, MAIN, RESULT, Fixture, Server, chromium, make_repo, serve, unit

from helpers import prun


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Fixture:
    repo, env = make_repo(tmp_path_factory.mktemp("review"))
    check = (f"{sys.executable} -c \"import pathlib; "
             f"assert pathlib.Path('src/lib/core.py').read_text() == 'CORE = 1\\n'\"")
    plan = {"check": check, "packets": [
        unit("feature", ["src/app/**"], {
            "write": {"src/app/main.py": MAIN, "src/app/new.py": "NEW = True\n"},
            "binary": {"src/app/data.bin": 4}, "rename": {"src/app/util.py": "src/app/helpers.py"},
            "result": RESULT}, requires=["Summary", "Verification"]),
        unit("leak", ["src/lib/**"], {
            "write": {"src/lib/core.py": "CORE = 2\n", "README.md": "changed\n"},
            "result": "## Summary\n\nChanged core and the readme.\n"}),
        {"id": "hollow", "kind": "code", "executor": "claude", "model": "sonnet",
         "owns": ["tests/**"], "prompt": "Check the tests; change them only if needed."},
        unit("report", ["docs/**"], {"write": {"docs/guide.md": "# Guide\n\nMore.\n"},
                                      "result": "## Summary\n\nWrote the guide.\n"},
              requires=["Summary", "Risks"]),
    ]}
    (repo / "plan.json").write_text(json.dumps(plan))
    r = prun("run", str(repo / "plan.json"), cwd=repo, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    run_id = next(line.split()[1] for line in r.stdout.splitlines() + r.stderr.splitlines()
                  if line.startswith("RUN "))
    r = prun("reconcile", run_id, cwd=repo, env=env)
    assert r.returncode == 1, r.stdout + r.stderr          # something was rejected
    return Fixture(repo, env, run_id)


@pytest.fixture(scope="module")
def server(finished_run) -> Server:
    yield from serve(finished_run)


@pytest.fixture(scope="module")
def browser():
    """Chromium from the distribution, driven by Playwright (its own browser builds are never
    downloaded). Skipped where either is missing; on CI (CI=true) that is a failure."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    path = chromium()
    if sync_playwright is None or path is None:
        why = "no Playwright for Python" if sync_playwright is None else "no chromium"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must have the review page's browser: {why}")
        pytest.skip(f"cannot drive a browser here: {why}")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def artifacts(tmp_path_factory) -> Path:
    """Where screenshots go: $PRUN_TEST_ARTIFACTS, else a temporary folder (printed)."""
    where = os.environ.get("PRUN_TEST_ARTIFACTS")
    path = Path(where) if where else tmp_path_factory.mktemp("artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path
