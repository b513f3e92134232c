"""The README's "First fan-out" runs as it is written: its shell block, whole, with `prun` on
PATH (this install), from an empty folder to the person's commit of the three units' work."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIT = {"GIT_AUTHOR_NAME": "me", "GIT_AUTHOR_EMAIL": "me@example.com",
       "GIT_COMMITTER_NAME": "me", "GIT_COMMITTER_EMAIL": "me@example.com",
       "GIT_CONFIG_NOSYSTEM": "1"}


def walk_through() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## First fan-out\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```sh\n(.*?)^```$", section, re.M | re.S)
    assert len(blocks) == 1, "one shell block, run as it is"
    return blocks[0]


def test_the_first_fan_out_runs_as_written(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "prun"                     # `prun` as an installed command finds it
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m prun \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, **GIT, "HOME": str(tmp_path / "home"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PRUN_WORKSPACE_ROOT": str(tmp_path / "workspaces")}
    r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", walk_through()], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert any(line.startswith("RUN ") and "status=succeeded packets=3 succeeded=3" in line
               for line in lines), r.stdout
    assert "RECONCILE run=" in r.stdout and r.stdout.count("ACCEPTED ") == 3
    assert "uncommitted" not in r.stderr and "REJECTED" not in r.stdout

    shapes = tmp_path / "shapes"
    log = subprocess.run(["git", "-C", str(shapes), "log", "--format=%s", "--name-only", "-1"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert log[:4] == ["shapes:", "circle,", "triangle,", "rectangle"]
    assert sorted(log[4:]) == ["circle.py", "rectangle.py", "triangle.py"]
    assert subprocess.run(["git", "-C", str(shapes), "status", "--porcelain"],
                          capture_output=True, text=True, check=True).stdout == ""
    area = subprocess.run([sys.executable, "-c", "import triangle; print(triangle.area(3, 4))"],
                          cwd=shapes, capture_output=True, text=True, check=True).stdout
    assert area == "6.0\n"
