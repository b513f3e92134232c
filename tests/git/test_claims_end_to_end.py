"""A result's claims checked against what the worker did, through `prun run` with the fake
Claude Code and Gemini CLIs (whose streams record each shell command as the real ones do),
then `prun reconcile`."""

from __future__ import annotations

import json

from helpers import FAKES, make_fake_cli, prun

OK = """## Changes

- `src/app/main.py`: returns A now

## Verification

```
$ test -s src/app/main.py
(no output)
$ grep -c A src/app/main.py
1
```
"""

LIES = """## Changes

- `./src/lib/core.py`
- `src/lib/extra.py` (a new module)

## Verification

Ran `printf B > src/lib/core.py` and `pytest -q tests/lib`: all pass.
"""

IDLE = """## Verification

Ran `make test`: all green.
"""


def _fakes(tmp_path, monkeypatch) -> None:
    for name in ("claude", "gemini"):
        path = make_fake_cli(tmp_path / "bin", name, FAKES / f"fake_{name}.py")
        monkeypatch.setenv(f"PRUN_{name.upper()}_BIN", str(path))
    monkeypatch.setenv("IS_SANDBOX", "1")  # claude's bypass mode as root
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "claude-home"))   # not in the clones
    monkeypatch.setenv("FAKE_CLAUDE_IF", json.dumps({
        "Make main return A.": {
            "FAKE_CLAUDE_RUN": json.dumps(["printf A > src/app/main.py",
                                           "test -s src/app/main.py && echo non-empty",
                                           "cd . && grep -c A  src/app/main.py | head -1"]),
            "FAKE_CLAUDE_RESPONSE": OK},
        "Rewrite the core.": {
            "FAKE_CLAUDE_RUN": json.dumps(["printf B > src/lib/core.py"]),
            "FAKE_CLAUDE_RESPONSE": LIES}}))
    monkeypatch.setenv("FAKE_GEMINI_RESPONSE", IDLE)


def test_claims_are_checked_against_the_stream_and_the_diff(repo, tmp_path, monkeypatch):
    _fakes(tmp_path, monkeypatch)
    plan = repo / "plan.json"
    plan.write_text(json.dumps({"packets": [
        {"id": "ok", "kind": "code", "executor": "claude", "owns": ["src/app/**"],
         "prompt": "Make main return A."},
        {"id": "lies", "kind": "code", "executor": "claude", "owns": ["src/lib/**"],
         "prompt": "Rewrite the core."},
        {"id": "idle", "executor": "gemini", "prompt": "Check the build."}]}))
    r = prun("run", str(plan), cwd=repo, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr

    r = prun("reconcile", cwd=repo)
    assert r.returncode == 10, r.stdout + r.stderr
    assert r.stdout.splitlines()[:-1] == [
        "REVIEW idle reason=no-tool-calls",
        'REVIEW lies reason=unverified-claim claim="pytest -q tests/lib"',
        "REVIEW lies reason=claimed-not-changed path=src/lib/extra.py",
        "ACCEPTED ok files=1"]

    packets = {p["packet"]: p for p in json.loads(prun("reconcile", "--json", cwd=repo).stdout)
               ["packets"]}
    ok = packets["ok"]["claims"]
    assert ok["tool_calls"] == 3 and ok["commands_recorded"] is True
    assert ok["commands"] == [
        {"claim": "test -s src/app/main.py", "matched": True,
         "run": "test -s src/app/main.py && echo non-empty"},
        {"claim": "grep -c A src/app/main.py", "matched": True,
         "run": "cd . && grep -c A  src/app/main.py | head -1"}]
    assert ok["paths"] == [{"path": "src/app/main.py", "changed": True}]
    lies = packets["lies"]
    assert [r["code"] for r in lies["reasons"]] == ["unverified-claim", "claimed-not-changed"]
    assert lies["reasons"][0]["claim"] == "pytest -q tests/lib"
    assert lies["claims"]["commands"] == [
        {"claim": "printf B > src/lib/core.py", "matched": True,
         "run": "printf B > src/lib/core.py"},
        {"claim": "pytest -q tests/lib", "matched": False, "run": None}]
    assert lies["claims"]["paths"] == [{"path": "src/lib/core.py", "changed": True},
                                       {"path": "src/lib/extra.py", "changed": False}]
    idle = packets["idle"]
    assert [r["code"] for r in idle["reasons"]] == ["no-tool-calls"]   # not hollow-no-tool-use too
    assert idle["claims"] == {"tool_calls": 0, "commands_recorded": True,
                              "commands": [{"claim": "make test", "matched": False, "run": None}],
                              "paths": []}
