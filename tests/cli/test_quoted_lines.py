"""No name a unit chose can forge a line prun prints, nor reach a person's terminal raw.

A command unit in a real `prun run` writes files whose names hold a newline followed by
`ACCEPTED other`, a tab, escape sequences (a title change, a screen clear, an OSC 52 clipboard
write), bytes that are not UTF-8 and a leading dash. Then reconcile, integrate, clean, status,
ledger and gather print about them: every line starts with a word its command documents, splits
into the tokens the docs describe, the names read back exactly (and match `--json`'s raw
names), and no control character (below 0x20 but the newline that ends a line, 0x7f to 0x9f)
reaches stdout or stderr (docs/reconcile.md, "Quoting").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import working_repo, write_plan
from prun._util.quoting import split, unquote

BAD_UTF8 = b"bad\xff\xfeutf8".decode("utf-8", "surrogateescape")
HOSTILE = ["x\nACCEPTED other", "tab\there", "title\x1b]0;pwned\x07", "clear\x1b[2J\x1b[H",
           "clip\x1b]52;c;cHduZWQ=\x07", "-leading", 'quote"back\\slash', "sp ace", BAD_UTF8]

WORDS = {
    "run": {"RUN", "UNIT", "STOPPED", "COST", "RESULTS"},
    "reconcile": {"ACCEPTED", "REJECTED", "REVIEW", "RECONCILE"},
    "integrate": {"INTERRUPTED", "BASE", "APPLIED", "CHANGED", "OVERLAP", "CONFLICT", "SKIPPED",
                  "EMPTY", "CHECK", "INTEGRATE"},
    "clean": {"SAVED", "REMOVED", "KEPT", "LOST", "CLEAN"},
    "status": {"RUN", "UNIT", "COST", "RESULTS"},
    "ledger": {"EVENT"},
    "gather": {"GATHER-START", "DONE", "CHANGED", "TIMEOUT"},
    "dispatch": {"STATE-DIR"},
    "monitor": {"ALL-DONE", "STALLED", "FAILED", "TIMEOUT", "UNIT"},
}

# the hostile unit: creates each name (hex of its bytes, so argv carries any of them)
MAKE_FILES = textwrap.dedent("""
    import os, sys
    for h in sys.argv[1].split(","):
        with open(bytes.fromhex(h), "w") as f:
            f.write("planted\\n")
    print("a result that is long enough to count as one")
""")


def _prun(*args: str, cwd: Path) -> tuple[int, list[str], str]:
    """Run the real prun; its stdout as lines and its stderr, each checked for control
    characters and decoded strictly (a raw byte that is not UTF-8 fails here)."""
    p = subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True, cwd=cwd,
                       timeout=180, stdin=subprocess.DEVNULL)
    out, err = p.stdout.decode("utf-8"), p.stderr.decode("utf-8")
    for text in (out, err):
        bad = [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) <= 0x9F]
        assert not bad, (args, bad, text[:2000])
    return p.returncode, out.splitlines(), err


REST_OF_LINE = ("DONE", "STATE-DIR")


def _words_ok(command: str, lines: list[str]) -> list[list[str]]:
    """Every line starts with a word ``command`` documents; its tokens, names read back."""
    out = []
    for line in lines:
        word, _, rest = line.partition(" ")
        if word in REST_OF_LINE:  # the seed's lines: the path is the rest of the line
            assert rest and not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in rest)
            out.append([word, unquote(rest) if rest.startswith('"') else rest])
            continue
        tokens = split(line)
        assert tokens and tokens[0] in WORDS[command], (command, line)
        out.append(tokens)
    return out


def _values(tokens: list[str], key: str) -> list[str]:
    return [t.partition("=")[2] for t in tokens if t.startswith(key + "=")]


@pytest.fixture
def hostile_run(tmp_path, monkeypatch):
    repo = working_repo(tmp_path, monkeypatch, {"README": "a repository\n"})
    names = ",".join(n.encode("utf-8", "surrogateescape").hex() for n in HOSTILE)
    plan = write_plan(repo / "plan.yaml", [
        {"id": "h", "kind": "code", "executor": "command", "owns": ["src/**"],
         "command": [sys.executable, "-c", MAKE_FILES, names], "prompt": "plant the files"},
        {"id": "other", "executor": "command", "prompt": "fail",
         "command": [sys.executable, "-c", "import sys; sys.exit(3)"]},
    ])
    code, lines, err = _prun("run", str(plan), "--plain", cwd=repo)
    _words_ok("run", lines)
    assert code == 4 or code == 1, (code, lines, err)
    run_id = lines[0].split()[1]
    return repo, run_id


def test_reconcile_lines_cannot_be_forged(hostile_run):
    repo, run_id = hostile_run
    code, lines, err = _prun("reconcile", run_id, cwd=repo)
    assert code == 1, err
    tokens = _words_ok("reconcile", lines)
    assert not any(t[:2] == ["ACCEPTED", "other"] for t in tokens), lines
    leaks = [_values(t, "path")[0] for t in tokens if t[:2] == ["REJECTED", "h"]
             and "reason=scope-leak" in t]
    assert sorted(leaks) == sorted(HOSTILE)
    # the same names, raw, in --json (surrogateescape for the bytes that are not UTF-8)
    p = subprocess.run([sys.executable, "-m", "prun", "reconcile", run_id, "--json"],
                       capture_output=True, cwd=repo, timeout=120)
    report = json.loads(p.stdout)
    verdicts = {v["packet"]: v for v in report["packets"]}
    assert verdicts["other"]["verdict"] == "rejected"
    raw = sorted(r["path"] for r in verdicts["h"]["reasons"] if r["code"] == "scope-leak")
    assert raw == sorted(HOSTILE)


def test_integrate_clean_status_and_ledger_lines_quote_every_name(hostile_run):
    repo, run_id = hostile_run
    code, lines, err = _prun("integrate", run_id, "--include", "h", "--no-check", cwd=repo)
    assert code == 0, (lines, err)
    tokens = _words_ok("integrate", lines)
    changed = [t[3] for t in tokens if t[0] == "CHANGED"]
    assert sorted(changed) == sorted(HOSTILE)
    for name in HOSTILE:   # and integrate wrote exactly those files
        assert (repo / name).read_text() == "planted\n"

    code, lines, err = _prun("clean", run_id, "--dry-run", cwd=repo)
    assert code == 0, err
    _words_ok("clean", lines)
    code, lines, err = _prun("status", run_id, "--all", cwd=repo)
    assert code == 0, err
    _words_ok("status", lines)
    code, lines, err = _prun("ledger", run_id, "--events", cwd=repo)
    assert code == 0, err
    _words_ok("ledger", lines)


def test_gather_and_error_lines_quote_every_name(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    paths = []
    for name in HOSTILE:
        path = folder / name
        path.write_text("a result\n")
        paths.append(str(path))
    code, lines, err = _prun("gather", *paths, "--timeout", "60", "--stable-window", "0",
                             cwd=tmp_path)
    assert code == 0, (lines, err)
    tokens = _words_ok("gather", lines)
    assert sorted(t[1] for t in tokens if t[0] == "DONE") == sorted(paths)
    # a name in an error message: one line, its control characters escaped
    code, lines, err = _prun("check", os.path.join(str(folder), "no\x1b]52;c;eA==\x07\nplan"),
                             cwd=tmp_path)
    assert code == 2 and lines == [] and len(err.splitlines()) == 1
    assert err.startswith("prun: ") and "\\033]52" in err


def test_dispatch_and_monitor_lines_quote_a_result_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PRUN_SANDBOX", "off")
    result = str(tmp_path / "r\x1b]0;pwned\x07 x\nDONE other.md")
    (tmp_path / "p.md").write_text("say something long enough to count as a result\n")
    code, lines, err = _prun("dispatch", "--executor", "command", "--command",
                             f"{sys.executable} -c \"print('a result long enough to count')\"",
                             "--prompt-file", "p.md", "--result-file", result, "--unit-id", "u",
                             cwd=tmp_path)
    assert code == 0, (lines, err)
    [(_word, state_dir)] = _words_ok("dispatch", lines)
    assert Path(state_dir).is_dir()
    code, lines, err = _prun("monitor", state_dir, "--timeout", "60", cwd=tmp_path)
    assert code == 0, (lines, err)
    tokens = _words_ok("monitor", lines)
    assert [_values(t, "result") for t in tokens if t[0] == "UNIT"] == [[result]]
    assert [_values(t, "dir") for t in tokens if t[0] == "UNIT"] == [[state_dir]]
