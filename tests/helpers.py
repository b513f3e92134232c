"""Helpers for tests: fake CLIs, running the real prun command."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

FAKES = Path(__file__).parent / "fakes"


def make_fake_cli(folder: Path, name: str, source: Path) -> Path:
    """An executable ``name`` in ``folder`` that runs ``source`` with this interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + source.read_text())
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


AGENT_CLIS = ("agy", "claude", "gemini")
# what each fake Claude Code unit reports in its stream's result (200 + 1000 cached in, 30 out)
CLAUDE_USAGE = {"input_tokens": 200, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 1000, "output_tokens": 30}
CLAUDE_COST = "0.0125"


def fake_claude_reporting_usage(tmp_path: Path, monkeypatch) -> None:
    """The fake Claude Code at ``PRUN_CLAUDE_BIN``, each run reporting ``CLAUDE_USAGE`` and
    ``CLAUDE_COST`` as the real CLI's stream does."""
    monkeypatch.setenv("PRUN_CLAUDE_BIN",
                       str(make_fake_cli(tmp_path / "bin", "claude", FAKES / "fake_claude.py")))
    monkeypatch.setenv("FAKE_CLAUDE_HOME", str(tmp_path / "claude-home"))
    monkeypatch.setenv("IS_SANDBOX", "1")
    report_claude_usage(monkeypatch)


def report_claude_usage(monkeypatch) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_USAGE", json.dumps(CLAUDE_USAGE))
    monkeypatch.setenv("FAKE_CLAUDE_COST", CLAUDE_COST)


def without_agent_clis(monkeypatch) -> None:
    """A PATH on which none of the agent CLIs is found (the real ones may be installed here)."""
    folders = [d for d in os.environ.get("PATH", "").split(os.pathsep)
               if d and not any(os.path.exists(os.path.join(d, c)) for c in AGENT_CLIS)]
    monkeypatch.setenv("PATH", os.pathsep.join(folders))
    assert not any(shutil.which(c) for c in AGENT_CLIS)


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def prun(*args: str, env: dict | None = None, timeout: float = 60, cwd=None):
    """Run the real ``prun`` command (this interpreter, the installed package)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "prun", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=cwd)


def prun_peak_mib(*args: str, out: Path, cwd=None) -> float:
    """Run the real ``prun`` to its end (it must succeed; its stdout in ``out``, its stderr
    beside it as ``<out>.err``): the peak resident memory (MiB) of that process, from
    ``os.wait4`` (its own, or a child's it reaped if larger), measured without a timing."""
    err = out.with_name(out.name + ".err")
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "prun", *args], stdout=o, stderr=e,
                                cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, out.read_text()[-2000:] + err.read_text()[-2000:]
    return usage.ru_maxrss / 1024     # KiB on Linux


def working_repo(tmp_path: Path, monkeypatch, files: dict[str, str | bytes]) -> Path:
    """A real repository at ``tmp_path/repo`` with ``files`` in one commit, made the working
    directory, its workspaces beside it and stall reports out of the way."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name, content in files.items():
        path = root / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c",
                    "user.name=t", "commit", "-q", "-m", "init"], check=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PRUN_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    monkeypatch.setenv("PRUN_STALL_THRESHOLD", "3600")
    return root


def write_plan(path: Path, packets: list[dict], **settings) -> Path:
    """A plan file: ``settings`` beside its ``packets``, as JSON (YAML reads it)."""
    path.write_text(json.dumps({**settings, "packets": packets}, indent=1))
    return path


@contextlib.contextmanager
def seen(workspace) -> Iterator[Path]:
    """A code unit's workspace as its unit saw it: an overlay workspace's merged view (for the
    time of the ``with``), a clone itself."""
    from prun.git.overlayview import merged

    with merged(workspace) as view:
        yield Path(view.path)


def last_attempt(run_id: str, packet_id: str) -> dict | None:
    """The packet's latest attempt row in the ledger (None: none yet)."""
    from prun.ledger import Ledger

    with Ledger.open() as ledger:
        rows = ledger.attempts(run_id, packet_id)
        return dict(rows[-1]) if rows else None


def poll(check, limit: float = 60.0):
    """Wait (bounded) for ``check()`` to return something truthy, and return it."""
    import time

    end = time.monotonic() + limit
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")
