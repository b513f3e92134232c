"""The skill's wrappers call prun with the same arguments, from PATH or through python -m."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from watchkit import publish

SCRIPTS = Path(__file__).resolve().parents[2] / "skills" / "prun" / "scripts"


def run(script: Path, *args: str, path: str, env: dict | None = None):
    full = dict(os.environ, PATH=path, **(env or {}))
    full.pop("PRUN_MONITOR_COMMAND", None)
    return subprocess.run([str(script), *args], capture_output=True, text=True, env=full,
                          timeout=60)


def python_only_path(tmp_path: Path) -> str:
    """A PATH with no prun on it, whose python3 is this interpreter (which has prun)."""
    folder = tmp_path / "pybin"
    folder.mkdir()
    py = folder / "python3"
    py.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    py.chmod(0o755)
    return f"{folder}{os.pathsep}/usr/bin{os.pathsep}/bin"


def prun_path() -> str:
    return f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"


@pytest.mark.parametrize("where", ["prun-on-path", "python-fallback"])
def test_gather_sh(tmp_path, where):
    result = tmp_path / "r.md"
    publish(result, tmp_path)
    path = prun_path() if where == "prun-on-path" else python_only_path(tmp_path)
    if where == "prun-on-path":
        assert shutil.which("prun", path=path)
    else:
        assert not shutil.which("prun", path=path)
    r = run(SCRIPTS / "gather.sh", str(result), "--timeout", "30", path=path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["GATHER-START count=1 timeout=30s", f"DONE {result}"]


@pytest.mark.parametrize("where", ["prun-on-path", "python-fallback"])
def test_monitor_sh_and_its_relaunch_line(tmp_path, live_dispatcher, make_unit, where):
    script_dir = tmp_path / "skill's scripts"  # a quote and a space in the path
    shutil.copytree(SCRIPTS, script_dir)
    sd, _ = make_unit(live_dispatcher())
    path = prun_path() if where == "prun-on-path" else python_only_path(tmp_path)
    r = run(script_dir / "monitor.sh", "--stall-threshold", "0", str(sd), path=path)
    assert r.returncode == 5, r.stderr  # STALLED
    assert shlex.split(r.stdout.splitlines()[-1]) == [
        str(script_dir / "monitor.sh"), "--stall-threshold", "0", "--seen-stalled", str(sd)]


def test_wrappers_exit_127_without_prun(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    sh = shutil.which("sh")
    r = subprocess.run([sh, str(SCRIPTS / "gather.sh"), "x"], capture_output=True, text=True,
                       env={"PATH": str(empty)}, timeout=30)
    assert r.returncode == 127 and "prun not found" in r.stderr


@pytest.mark.skipif(not shutil.which("pwsh"), reason="PowerShell is not installed")
def test_gather_ps1(tmp_path):
    result = tmp_path / "r.md"
    publish(result, tmp_path)
    r = subprocess.run(["pwsh", "-NoProfile", "-File", str(SCRIPTS / "gather.ps1"), str(result),
                        "--timeout", "30"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PATH=prun_path()))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["GATHER-START count=1 timeout=30s", f"DONE {result}"]
