"""What a unit leaves where prun reads is read as a regular file only, and bounded: a 2 GiB
sparse result is refused, not copied (`result-too-large`); a result that is a FIFO or a link
to /dev/zero is refused unread (`result-not-a-file`); the FALLBACK naming it is published
instead and the worker's own file is left where it was. Nothing hangs, nothing fills the
disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from faultkit import json_file

from prun.attempt import statedir
from prun.attempt.statedir import StateDir

# each writes its result ($PRUN_RESULT_FILE: its outbox in a run) as something hostile, and
# prints a response that would otherwise be enough
LEAVES = {
    "sparse": "f = open(out, 'wb'); f.seek(2 << 30); f.write(b'end'); f.close()",
    "fifo": "os.mkfifo(out)",
    "zero": "os.symlink('/dev/zero', out)",
    "folder": "os.mkdir(out)",
}


def _unit(name: str) -> dict:
    code = (f"import os\nout = os.environ['PRUN_RESULT_FILE']\n{LEAVES[name]}\n"
            "print('a response long enough to be published in full')\n")
    return {"id": name, "executor": "command", "command": [sys.executable, "-c", code],
            "prompt": f"leave a {name}"}


def _allocated(folder: Path) -> int:
    """Bytes the file system holds for everything under ``folder`` (links not followed)."""
    total = 0
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


# a worker whose own result is fine, whose stdout it replaced with a link to /dev/zero
OWN = ("import os\nopen(os.environ['PRUN_RESULT_FILE'], 'w').write('its own result, whole\\n')\n"
       "sd = os.environ['PRUN_STATE_DIR']\n"
       "os.symlink('/dev/zero', sd + '/tail.new'); os.replace(sd + '/tail.new', sd + '/tail')\n")


def test_hostile_results_are_refused_unread_and_their_fallback_published(repo, tmp_path):
    own = {"id": "own", "executor": "command", "sandbox": "off", "prompt": "write",
           "command": [sys.executable, "-c", OWN]}
    (repo / "plan.json").write_text(json.dumps({
        "parallel": 5, "packets": [*(_unit(n) for n in LEAVES), own]}))
    p = subprocess.run([sys.executable, "-m", "prun", "run", "plan.json", "--plain"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    status = json.loads(subprocess.run([sys.executable, "-m", "prun", "status", "--json"],
                                       capture_output=True, text=True, timeout=60).stdout)
    reasons = {u["packet_id"]: u["reason"] for u in status["units"] if u["packet_id"] != "own"}
    own_unit = next(u for u in status["units"] if u["packet_id"] == "own")
    assert own_unit["status"] == "succeeded", own_unit      # its result stands, stdout or not
    assert reasons == {"sparse": "result-too-large", "fifo": "result-not-a-file",
                       "zero": "result-not-a-file", "folder": "result-not-a-file"}, reasons
    run_dir = repo / ".prun" / "runs" / status["run"]["id"]
    outboxes = {}
    for name, reason in reasons.items():
        result = run_dir / "results" / f"{name}.1.md"
        assert result.read_text().startswith(f"FALLBACK reason={reason} unit={name} ")
        (state,) = (run_dir / "state").glob(f"{name}-*")
        outbox = outboxes[name] = Path(statedir.outbox(StateDir(str(state)), str(result)))
        outcome = json_file(state / "outcome.json")
        assert outcome["published"] == "fallback" and outcome["outcome"] == "failed"
        assert str(outbox) in outcome["error"]               # the worker's own file, named
    assert (run_dir / "results" / "own.1.md").read_text() == "its own result, whole\n"
    assert outboxes["sparse"].stat().st_size == (2 << 30) + 3   # left in place, as it was
    assert outboxes["zero"].is_symlink() and outboxes["fifo"].is_fifo()
    assert _allocated(run_dir) < 16 << 20                  # no 2 GiB of zeros anywhere


def test_a_standalone_worker_that_writes_a_huge_sparse_result_fails_with_its_reason(
        repo, tmp_path):
    (tmp_path / "prompt.md").write_text("write a result\n")
    result = tmp_path / "result.md"
    code = f"f = open({str(result)!r}, 'wb'); f.seek(2 << 30); f.write(b'end')"
    p = subprocess.run([sys.executable, "-m", "prun", "dispatch", "--executor", "command",
                        "--command", f"{sys.executable} -c \"{code}\"", "--prompt-file",
                        str(tmp_path / "prompt.md"), "--result-file", str(result),
                        "--unit-id", "huge"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    state = p.stdout.split("STATE-DIR ", 1)[1].split()[0]
    outcome = json_file(f"{state}/outcome.json")
    assert outcome["reason"] == "result-too-large" and outcome["published"] is None
    assert open(f"{state}/fallback.md").read().startswith("FALLBACK reason=result-too-large")
    assert result.stat().st_size == (2 << 30) + 3           # the worker's file, left alone
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("prun: unit huge failed (result-too-large): "), p.stderr
