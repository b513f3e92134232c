"""The rules by which a result's claims are read and matched (``prun.git.claims``), as
docs/reconcile.md states them."""

from __future__ import annotations

import pytest

from prun.executors.records import ToolCalls
from prun.git.claims import check, claimed_commands, claimed_paths, matches

RESULT = """# Result

Ran `not a claim`: outside Verification.

## Verification (commands run)

- `pytest -q tests/a` passed; ``grep -n `x` f`` found it.

```sh
$ make lint
ok
$ ./run.sh --long \\
    --flag
```

```
# a comment
ruff check .
```

### Details

`pytest -q tests/a` again.

## Files changed

- `src/a.py`, `./docs/b.md`, `/clone/src/c.py`
- `src/pkg/` (a folder), `make` and `foo()` are not paths

## Notes

`src/other.py`
"""


def test_claimed_commands_are_read_from_spans_and_blocks_under_verification():
    assert claimed_commands(RESULT) == ["pytest -q tests/a", "grep -n `x` f", "make lint",
                                        "./run.sh --long --flag", "ruff check ."]


def test_claimed_paths_are_read_under_changes():
    assert claimed_paths(RESULT, "/clone") == ["src/a.py", "docs/b.md", "src/c.py", "src/pkg"]
    assert claimed_paths("## Changes\n\n`x.py`\n") == ["x.py"]
    assert claimed_paths("## Summary\n\n`x.py`\n") == []


@pytest.mark.parametrize("claim, run, expected", [
    ("pytest -q", "pytest -q", True),
    ("pytest  -q", "pytest -q\n", True),                       # whitespace does not count
    ("pytest -q", "cd w && pytest -q tests 2>&1 | tail", True),
    ("pytest", "python -m pytest -q", True),
    ("pytest -q", "pytest -x -q", False),                      # consecutively, in order
    ("pytest -q", "pytest -qq", False),                        # whole words only
    ("make test", "make;test", False),
    ("make test", "(make test)", True),                        # operators are words
    ("echo 'a b'", "echo 'a  b'", True),                       # quotes are not read
    ("", "anything", False),
])
def test_matching(claim, run, expected):
    assert matches(claim, run) is expected


def test_check_names_every_unverified_claim_and_unchanged_path():
    claims = check(RESULT, ToolCalls(4, ("make lint", "cd x && ruff check . --fix")),
                   ["src/a.py", "docs/b.md", "src/pkg/m.py"], "/clone")
    assert [r.text() for r in claims.reasons()] == [
        'reason=unverified-claim claim="pytest -q tests/a"',
        'reason=unverified-claim claim="grep -n `x` f"',
        'reason=unverified-claim claim="./run.sh --long --flag"',
        "reason=claimed-not-changed path=src/c.py"]


def test_no_tool_call_at_all_is_one_reason_and_agy_claims_are_not_matched():
    assert [r.code for r in check(RESULT, ToolCalls(0, ()), None).reasons()] == [
        "no-tool-calls"]
    assert check(RESULT, ToolCalls(2, None), None).reasons() == []        # agy: not recorded
    assert [r.code for r in check(RESULT, ToolCalls(0, None), None).reasons()] == [
        "no-tool-calls"]
    assert check("## Verification\n\nnone needed\n", ToolCalls(0, ()), None).reasons() == []
