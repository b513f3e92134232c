"""Shared fixtures: fake agent CLIs started with this interpreter, isolated state locations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import FAKES, make_fake_cli, working_repo
from prun.attempt import sandbox
from prun.attempt.overlay import overlays_unavailable

TESTS = Path(__file__).resolve().parent
# When this checkout lies under /tmp, which a unit's own tmp hides, the sandboxed units of the
# tests still see the fakes they run from the test tree (session fixtures' runs too).
UNDER_TMP = any(str(TESTS).startswith(t + "/") for t in sandbox.TMP_FOLDERS)
if UNDER_TMP:
    os.environ.setdefault("PRUN_SANDBOX_WRITABLE", str(TESTS))

# End-to-end tests of seconds each (faults injected into whole runs, the Dask cluster, the
# benchmarks, the real agent CLIs, the browser, output in the tens of MB): `pytest -m "not
# slow"` leaves them out for a quick pass (about 40% of the suite's time); CI runs them all.
SLOW = ("faults/", "cluster/", "bench/", "executors/test_real_clis.py", "test_first_fan_out.py",
        "review/test_review_browser.py", "attempt/test_command_output_memory.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.relative_to(TESTS).as_posix().startswith(SLOW):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def cache_home(tmp_path_factory):
    """One cache folder for the session (compiled schema checks), never the user's."""
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch, cache_home):
    """Every test gets its own state root, quota snapshot and config; no real agent CLI."""
    monkeypatch.setenv("PRUN_STATE_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("PRUN_QUOTA_SNAPSHOT", str(tmp_path / "quota.json"))
    monkeypatch.setenv("PRUN_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("PRUN_LEDGER", str(tmp_path / "ledger.sqlite"))
    monkeypatch.setenv("PRUN_KILL_GRACE_SECONDS", "1")
    monkeypatch.setenv("PRUN_QUOTA_BUILTIN", "off")   # the fake CLIs answer no /quota
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))  # nothing in the home
    # overlays as a run makes them (a test's small repository: code units get clones, which
    # a test reads on the host); the `overlay` fixture overlays code units' checkouts too
    monkeypatch.delenv("PRUN_OVERLAY", raising=False)
    # what a test hands its units (fake CLIs' logs and sessions) stays writable in the sandbox;
    # a containment test removes it
    shown = [str(tmp_path), *([str(TESTS)] if UNDER_TMP else [])]
    monkeypatch.setenv("PRUN_SANDBOX_WRITABLE", ":".join(shown))
    for var in ("ANTIGRAVITY_DISPATCH_MODEL", "ANTIGRAVITY_DISPATCH_EFFORT",
                "ANTIGRAVITY_DISPATCH_TIMEOUT_SECONDS", "PRUN_AGY_SANDBOX", "PRUN_SCRATCH_CWD",
                "PRUN_AGY_QUOTA_GATE", "PRUN_AGY_BIN", "PRUN_CLAUDE_BIN", "PRUN_GEMINI_BIN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A real git repository as the working directory (workspaces and the ledger beside it)."""
    return working_repo(tmp_path, monkeypatch, {"README": "a repository for tests\n"})


@pytest.fixture
def fake_agy(tmp_path, monkeypatch):
    """Install the fake agy at PRUN_AGY_BIN; returns the path of its call log."""
    path = make_fake_cli(tmp_path / "bin", "agy", FAKES / "fake_agy.py")
    monkeypatch.setenv("PRUN_AGY_BIN", str(path))
    log = tmp_path / "agy-calls.jsonl"
    monkeypatch.setenv("FAKE_AGY_LOG", str(log))
    return log


@pytest.fixture
def bwrap() -> None:
    """Skip where no sandbox can be made here; on CI (CI=true) that is a failure instead."""
    why = sandbox.unavailable()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must have the sandbox: {why}")
    pytest.skip(f"no sandbox here: {why}")


@pytest.fixture
def overlay(tmp_path, bwrap, monkeypatch) -> None:
    """Overlays on (code units' workspaces, primed templates' shared paths); skip where the
    kernel mounts no unprivileged overlay for a unit's sandbox."""
    why = overlays_unavailable(str(tmp_path / "workspaces"))
    if why is not None:
        pytest.skip(f"no overlay here: {why}")
    monkeypatch.setenv("PRUN_OVERLAY", "on")   # whatever the size of the test's repository
