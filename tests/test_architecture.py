"""The shape of the code, checked: the dependency rule (import-linter, contracts in
pyproject.toml) and what the dispatcher's path to its STATE-DIR line imports."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_and_independence_contracts_hold():
    pytest.importorskip("importlinter")
    p = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command;"
                        " lint_imports_command()"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "BROKEN" not in p.stdout


# What the STATE-DIR line must not wait for (docs/dispatch.md, "Speed"): the command table
# imports only the command being run, and the dispatcher's path before that line stays off
# these modules, each of which costs a noticeable part of the budget.
HEAVY = ("asyncio", "dataclasses", "json", "jsonschema", "pathlib", "psutil", "rich", "sqlite3",
         "tempfile", "typing", "watchdog", "yaml")


def test_the_dispatch_fast_path_imports_nothing_heavy_before_its_state_dir_line(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""
        import sys

        class Out:
            def __init__(self, real):
                self.real = real
            def write(self, text):
                if text.startswith("STATE-DIR"):
                    with open(sys.argv[1], "w") as f:
                        f.write("\\n".join(sorted(sys.modules)))
                return self.real.write(text)
            def __getattr__(self, name):
                return getattr(self.real, name)

        sys.stdout = Out(sys.stdout)
        from prun.cli import main
        sys.exit(main(sys.argv[2:]))
    """))
    (tmp_path / "prompt.md").write_text("say hello\n")
    seen = tmp_path / "modules.txt"
    env = {**os.environ, "PRUN_SANDBOX": "off"}
    p = subprocess.run([sys.executable, str(probe), str(seen), "dispatch", "--executor", "command",
                        "--command", "echo a result long enough to count", "--prompt-file",
                        "prompt.md", "--result-file", "result.md", "--unit-id", "fast"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("STATE-DIR ")
    modules = set(seen.read_text().split())
    assert "prun.attempt.dispatch" in modules          # the probe saw the real path
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert not {m for m in modules if m.startswith("prun.cli.") and m not in
                {"prun.cli.dispatch", "prun.cli.options"}}


def test_prun_variables_are_read_by_the_settings_alone():
    """Every PRUN_* and ANTIGRAVITY_* variable is parsed once, in ``prun.settings`` (each
    CLI's own in its executor, from the environment it is handed). The worker-side hooks
    are the exception: they run inside a unit and read what prun passed them."""
    import re

    read = re.compile(r"(os\.environ|os\.getenv)\W[^\n]*[\"'](PRUN|ANTIGRAVITY)_")
    found = [f"{path.relative_to(ROOT)}:{n}"
             for path in (ROOT / "src" / "prun").rglob("*.py")
             if "settings" not in path.parts and "hooks" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if read.search(line)]
    assert found == []
