"""Memory against stream size: the peak resident memory of `prun dispatch` and of a run's
supervisor while a unit streams SIZE megabytes of Claude Code stream-json (tool results and
text, then the final result event), beside `cat` reading the same stream.

    python bench/bench_stream_memory.py [--mb 50] [--units 4]

The stream comes from a small generator that writes it in 64 KiB pieces (its own memory stays
flat), installed as the `claude` binary (PRUN_CLAUDE_BIN). Peaks are sampled every 5 ms from
/proc through psutil; a process's whole life is covered.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import psutil

GENERATOR = textwrap.dedent('''
    import json, os, sys
    mb = float(os.environ.get("BENCH_STREAM_MB", "50"))
    out = sys.stdout
    def emit(o):
        out.write(json.dumps(o) + "\\n")
    emit({"type": "system", "subtype": "init", "session_id": "s-bench", "model": "sonnet",
          "tools": [], "cwd": "."})
    chunk = "x" * 60000
    n = int(mb * 1024 * 1024 / 60200)
    for i in range(n):
        emit({"type": "user", "session_id": "s-bench", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": chunk}]}})
    emit({"type": "result", "subtype": "success", "is_error": False, "session_id": "s-bench",
          "result": "The bench unit finished; its stream was large on purpose.",
          "num_turns": n, "usage": {"input_tokens": 1, "output_tokens": 1}})
    out.flush()
''')


class Peak:
    """The peak RSS (MiB) of one process, sampled until it exits."""

    def __init__(self, pid: int, match=None):
        self.pid, self.match, self.mib = pid, match, 0.0
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        try:
            proc = psutil.Process(self.pid)
            while proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                self.mib = max(self.mib, proc.memory_info().rss / 2**20)
                psutil.wait_procs([proc], timeout=0.005)
        except psutil.Error:
            pass

    def join(self) -> float:
        self._thread.join(60)
        return self.mib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--units", type=int, default=4)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from benchkit import compile_prun, git

    compile_prun()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        gen = tmp / "claude"
        gen.write_text(f"#!{sys.executable}\n{GENERATOR}")
        gen.chmod(0o755)
        repo = tmp / "repo"
        repo.mkdir()
        git("init", "-q", cwd=repo)
        git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
        env = {**os.environ, "PRUN_CLAUDE_BIN": str(gen), "PRUN_SANDBOX": "off",
               "PRUN_WORKSPACE_ROOT": str(tmp / "ws"), "PRUN_STATE_ROOT": str(tmp / "state"),
               "BENCH_STREAM_MB": str(args.mb), "IS_SANDBOX": "1"}
        rows = []

        # the reference: cat reading the same stream
        g = subprocess.Popen([str(gen)], stdout=subprocess.PIPE, env=env)
        cat = subprocess.Popen(["cat"], stdin=g.stdout, stdout=subprocess.DEVNULL)
        g.stdout.close()
        peak = Peak(cat.pid)
        cat.wait()
        g.wait()
        rows.append(("`cat` reading the stream", peak.join()))

        (tmp / "prompt.md").write_text("stream a lot\n")
        d = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", "--executor", "claude",
                              "--prompt-file", str(tmp / "prompt.md"), "--result-file",
                              str(tmp / "result.md"), "--unit-id", "big"], cwd=repo, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak = Peak(d.pid)
        err = d.communicate()[1]
        if d.returncode != 0:
            raise SystemExit(f"prun dispatch failed: {err.decode()[-500:]}")
        rows.append(("`prun dispatch`, one unit", peak.join()))

        plan = repo / "plan.json"
        plan.write_text(json.dumps({"parallel": args.units, "packets": [
            {"id": f"u{i}", "executor": "claude", "prompt": "stream a lot"}
            for i in range(args.units)]}))
        r = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--plain"],
                             cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        peak = Peak(r.pid)
        out, err = r.communicate()
        if r.returncode != 0:
            raise SystemExit(f"prun run failed: {(out + err).decode()[-800:]}")
        rows.append((f"`prun run` supervisor, {args.units} units at once", peak.join()))

    print(f"\nPeak resident memory, {args.mb:g} MB stream per unit\n")
    print("| process | peak RSS (MiB) |")
    print("|---|---:|")
    for name, mib in rows:
        print(f"| {name} | {mib:.1f} |")


if __name__ == "__main__":
    main()
