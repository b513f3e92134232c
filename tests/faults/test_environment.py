"""Environmental faults: a full disk, an unwritable result folder, a frozen input lost in a
crash. No traceback: one line, a FALLBACK where any byte can be written, the ledger updated,
the other units served."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest
from faultkit import counted_unit, executions, json_file, until


@contextlib.contextmanager
def tmpfs(path, size: str, *options: str):
    """A small tmpfs at ``path`` (root only; skipped where it cannot be mounted)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = ",".join([f"size={size}", *options])
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs on CI: {p.stderr.strip()}")
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip() or 'not root'}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(folder) -> None:
    with open(folder / "filler", "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()


def _dispatch(tmp_path, result, text: str = "a result that is long enough to count"):
    (tmp_path / "prompt.md").write_text("write a result\n")
    return subprocess.run([sys.executable, "-m", "prun", "dispatch", "--executor", "command",
                           "--command", f"{sys.executable} -c \"print('{text}')\"",
                           "--prompt-file", str(tmp_path / "prompt.md"), "--result-file",
                           str(result), "--unit-id", "u", "--sandbox", "off"],
                          capture_output=True, text=True, timeout=120)


def test_a_full_result_folder_gives_a_fallback_in_the_state_dir_and_one_line(repo, tmp_path):
    with tmpfs(tmp_path / "full", "256k") as full:
        _fill(full)
        p = _dispatch(tmp_path, full / "result.md")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    state = p.stdout.split("STATE-DIR ", 1)[1].split()[0]
    outcome = json_file(f"{state}/outcome.json")
    assert outcome and outcome["outcome"] == "failed"
    assert "FALLBACK" in open(f"{state}/fallback.md").read()
    rows = subprocess.run([sys.executable, "-m", "prun", "ledger", "--dispatches"],
                          capture_output=True, text=True, timeout=60).stdout
    assert "dispatched" not in rows.replace("dispatched_at", "")


def test_an_unwritable_result_folder_is_refused_before_launch(repo, tmp_path):
    with tmpfs(tmp_path / "ro", "64k", "ro") as ro:
        p = _dispatch(tmp_path, ro / "result.md")
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout == "" and len(p.stderr.splitlines()) == 1 and "writ" in p.stderr


def test_a_run_on_a_full_disk_serves_every_unit_and_crashes_nothing(repo, tmp_path):
    log = tmp_path / "executions.log"
    big = "import sys; sys.stdout.write('x' * 300000 + '\\n')"
    packets = [counted_unit(f"u{i}", log) for i in range(4)] + \
        [{**counted_unit(f"big{i}", log), "command": [sys.executable, "-c", big]} for i in range(6)]
    (repo / "plan.json").write_text(json.dumps({"parallel": 4, "packets": packets}))
    with tmpfs(repo / ".prun", "1m"):
        p = subprocess.run([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                           capture_output=True, text=True, timeout=300)
        assert "Traceback" not in p.stderr + p.stdout, p.stderr
        # units that finished are judged; one that could not even be begun on the full disk
        # stops the run (no receipt: exit 3) rather than being lost
        assert p.returncode in (1, 3), p.stdout + p.stderr
        status = subprocess.run([sys.executable, "-m", "prun", "status", "--json"],
                                capture_output=True, text=True, timeout=60)
        view = json.loads(status.stdout)
    assert view["run"]["status"] in ("failed", "stopped")
    assert all(u["status"] in ("succeeded", "failed", "pending") for u in view["units"])
    assert any(u["reason"] == "disk-full" for u in view["units"]), view["units"]
    ran = executions(log)
    assert all(n == 1 for n in ran.values())
    counted = {u["packet_id"] for u in view["units"]
               if u["packet_id"].startswith("u") and u["status"] != "pending"}
    assert counted == set(ran)


def test_an_emptied_prompt_copy_is_restored_when_the_run_is_resumed(repo, tmp_path):
    import signal

    import psutil

    hold = {**counted_unit("a", tmp_path / "executions.log"),
            "command": [sys.executable, "-c", "import time; time.sleep(600)"]}
    (repo / "plan.json").write_text(json.dumps({"packets": [hold]}))
    sup = subprocess.Popen([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    run_id = sup.stdout.readline().split()[1]
    state = repo / ".prun" / "runs" / run_id / "state"
    until(lambda: [d for d in state.glob("a-*") if (json_file(d / "unit.json") or {})
                   .get("worker")])
    sup.send_signal(signal.SIGKILL)
    sup.wait(30)
    copy = next(state.glob("a-*")) / "prompt"
    text = copy.read_text()
    copy.write_text("")                        # what a crash while writing it would leave
    resumed = subprocess.Popen([sys.executable, "-m", "prun", "resume", run_id, "--plain"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        until(lambda: copy.read_text() == text)
        cancel = subprocess.run([sys.executable, "-m", "prun", "cancel", run_id],
                                capture_output=True, text=True, timeout=120)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        out, _ = resumed.communicate(timeout=120)
        assert "prompt file is empty" not in out and "Traceback" not in out, out
    finally:
        resumed.kill()
        for p in psutil.Process().children(recursive=True):
            p.kill()
