"""The examples run as their comments say (in a repository of their own, so a test never
runs in this checkout)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from helpers import prun

ROOT = Path(__file__).resolve().parents[2]


def _commit(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-qm", "copy"], check=True)


def test_the_review_example_reads_the_code_through_its_snapshot(repo):
    shutil.copytree(ROOT / "examples" / "review", repo / "examples" / "review")
    for module in ("run/brief", "run/dependents", "ports/reserve", "git/snapshot"):
        target = repo / "src" / "prun" / f"{module}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / "src" / "prun" / f"{module}.py", target)
    _commit(repo)
    r = prun("run", "examples/review/plan.yaml")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = prun("reconcile")
    assert rec.returncode == 0, rec.stdout
    assert rec.stdout.splitlines()[-1].endswith("accepted=4 rejected=0 review=0 complete=yes")
    results = sorted((repo / ".prun" / "runs").glob("*/results/review-brief.1.md"))
    text = results[0].read_text()
    assert "`src/prun/run/brief.py`" in text and "read from the run's read-only snapshot" in text
