"""`prun dispatch --executor command`: any program as a unit, under the same contract."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
from pathlib import Path

import pytest

from helpers import prun

PY = shlex.quote(sys.executable)


@pytest.fixture
def unit(tmp_path):
    prompt = tmp_path / "prompt.md"
    prompt.write_text("count the words in this prompt please\n")
    return {"prompt": prompt, "result": tmp_path / "result.md"}


def dispatch(unit, command, *extra, env=None):
    return prun("dispatch", "--executor", "command", "--command", command, "--prompt-file",
                str(unit["prompt"]), "--result-file", str(unit["result"]), "--unit-id", "c1",
                *extra, env=env)


def state_dir(proc) -> Path:
    (line,) = proc.stdout.splitlines()
    return Path(line.removeprefix("STATE-DIR "))


def test_prompt_on_stdin_and_stdout_is_the_response(unit):
    code = "import sys; t = sys.stdin.read(); print(f'words={len(t.split())} from stdin ok')"
    proc = dispatch(unit, f"{PY} -c {shlex.quote(code)}")
    assert proc.returncode == 0, proc.stderr
    assert unit["result"].read_text() == "words=7 from stdin ok\n"
    outcome = json.loads((state_dir(proc) / "outcome.json").read_text())
    assert outcome["outcome"] == "succeeded" and outcome["executor"] == "command"


def test_the_output_is_published_as_a_copy_of_what_was_written(unit):
    # bytes that are not UTF-8 survive; the result is a copy of the worker's stdout, not the
    # file itself: nothing the worker left running can change a published result
    code = "import sys; sys.stdout.buffer.write(b'caf\\xe9 \\xff result of the unit\\n')"
    proc = dispatch(unit, f"{PY} -c {shlex.quote(code)}")
    assert proc.returncode == 0, proc.stderr
    tail = state_dir(proc) / "tail"
    assert unit["result"].read_bytes() == b"caf\xe9 \xff result of the unit\n"
    assert not unit["result"].samefile(tail)
    outcome = json.loads((state_dir(proc) / "outcome.json").read_text())
    assert outcome["result_identity"]["sha256"] == hashlib.sha256(
        unit["result"].read_bytes()).hexdigest()


def test_prompt_file_placeholder_closes_stdin(unit):
    code = ("import sys; data = sys.stdin.read(); "
            "print('stdin empty:', data == '', 'prompt:', open(sys.argv[1]).read().strip())")
    proc = dispatch(unit, f"{PY} -c {shlex.quote(code)} {{prompt_file}}")
    assert proc.returncode == 0, proc.stderr
    assert unit["result"].read_text().startswith("stdin empty: True prompt: count the words")


def test_nonzero_exit_gives_fallback(unit):
    code = "import sys; print('half an answer'); sys.stderr.write('boom\\n'); sys.exit(4)"
    proc = dispatch(unit, f"{PY} -c {shlex.quote(code)}")
    assert proc.returncode == 1
    text = unit["result"].read_text()
    assert text.startswith("FALLBACK reason=exit-nonzero unit=c1 executor=command exit=4")
    assert "half an answer" in text and "boom" in text


def test_timeout_gives_124(unit):
    proc = dispatch(unit, f"{PY} -c 'import time; time.sleep(60)'", "--timeout", "0.5")
    assert proc.returncode == 124
    assert unit["result"].read_text().startswith("FALLBACK reason=timeout")


def test_missing_program_gives_fallback(unit, tmp_path):
    proc = dispatch(unit, str(tmp_path / "no-such-program"))
    assert proc.returncode == 1
    assert unit["result"].read_text().startswith("FALLBACK reason=launch-failed")


def test_empty_command_is_refused(unit):
    proc = dispatch(unit, "  ")
    assert proc.returncode == 2 and proc.stdout == ""


def test_unbalanced_quotes_are_refused(unit):
    proc = dispatch(unit, "echo 'oops")
    assert proc.returncode == 2 and "cannot parse --command" in proc.stderr


def test_command_flag_is_only_for_command_units(unit):
    proc = prun("dispatch", "--executor", "agy", "--command", "echo hi", "--prompt-file",
                str(unit["prompt"]), "--result-file", str(unit["result"]), "--unit-id", "c1")
    assert proc.returncode == 2
