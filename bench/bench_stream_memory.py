"""Memory against output size: the peak resident memory of `prun dispatch` and of a run's
supervisor while a unit streams SIZE megabytes, beside `cat` reading the same bytes. Two
kinds of unit: an agent (Claude Code stream-json: tool results and text, then the final result
event) and a command (plain text on stdout, which prun publishes as the unit's response).

    python bench/bench_stream_memory.py [--mb 50] [--units 4] [--command-units 2]
                                        [--only agent|command]

Each stream comes from a small generator that writes it in 64 KiB pieces (its own memory stays
flat): installed as the `claude` binary (PRUN_CLAUDE_BIN) for the agent, given as the packet's
command for the command unit. Peaks are sampled every 5 ms from /proc through psutil; a
process's whole life is covered.
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

# a command unit's output: SIZE megabytes of text lines on stdout, 64 KiB at a time
COMMAND = textwrap.dedent('''
    import os, sys
    size = int(float(os.environ.get("BENCH_STREAM_MB", "50")) * 1024 * 1024)
    line = b"the bench command unit prints a lot of text, on purpose.\\n"
    piece = line * (65536 // len(line))
    out = sys.stdout.buffer
    while size > 0:
        out.write(piece[:size])
        size -= len(piece)
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


def reference(argv: list[str], env: dict[str, str]) -> float:
    """`cat` reading what ``argv`` prints: its peak."""
    g = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
    cat = subprocess.Popen(["cat"], stdin=g.stdout, stdout=subprocess.DEVNULL)
    g.stdout.close()
    peak = Peak(cat.pid)
    cat.wait()
    g.wait()
    return peak.join()


def dispatch(argv: list[str], repo: Path, env: dict[str, str], what: str) -> float:
    """`prun dispatch` of one unit: its peak."""
    d = subprocess.Popen([sys.executable, "-m", "prun", "dispatch", *argv], cwd=repo, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = Peak(d.pid)
    err = d.communicate()[1]
    if d.returncode != 0:
        raise SystemExit(f"prun dispatch ({what}) failed: {err.decode()[-500:]}")
    return peak.join()


def run(plan: Path, packets: list[dict], units: int, repo: Path, env: dict[str, str],
        what: str, cluster: str | None = None) -> float:
    """`prun run` of ``packets`` all at once (on ``cluster`` if given): its supervisor's
    peak."""
    plan.write_text(json.dumps({"parallel": units, "packets": packets}))
    where = ["--cluster", cluster] if cluster else []
    r = subprocess.Popen([sys.executable, "-m", "prun", "run", str(plan), "--plain", *where],
                         cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = Peak(r.pid)
    out, err = r.communicate()
    if r.returncode != 0:
        raise SystemExit(f"prun run ({what}) failed: {(out + err).decode()[-800:]}")
    return peak.join()


def on_cluster(tmp: Path, command: list[str], n: int, repo: Path,
               env: dict[str, str]) -> float:
    """The command units' run on a loopback cluster started for it: its supervisor's peak."""
    from prun.cluster.local import LocalCluster

    cluster = LocalCluster(str(tmp / "cluster"), "127.0.0.1", 0, 1, n,
                           env={**env, "XDG_STATE_HOME": str(tmp / "worker-state")})
    address = cluster.start()
    try:
        return run(repo / "remote.json", [{"id": f"r{i}", "executor": "command",
                                           "command": command, "prompt": "print a lot"}
                                          for i in range(n)], n, repo, env, "cluster",
                   cluster=address)
    finally:
        cluster.stop(5.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=50.0)
    ap.add_argument("--units", type=int, default=4, help="agent units in the run")
    ap.add_argument("--command-units", type=int, default=2, help="command units in the run")
    ap.add_argument("--only", choices=("agent", "command"))
    ap.add_argument("--no-cluster", action="store_true", help="no cluster run of the command "
                    "units")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from benchkit import compile_prun, git

    compile_prun()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        gen = tmp / "claude"
        gen.write_text(f"#!{sys.executable}\n{GENERATOR}")
        gen.chmod(0o755)
        printer = tmp / "printer.py"
        printer.write_text(COMMAND)
        repo = tmp / "repo"
        repo.mkdir()
        git("init", "-q", cwd=repo)
        git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
        env = {**os.environ, "PRUN_CLAUDE_BIN": str(gen), "PRUN_SANDBOX": "off",
               "PRUN_WORKSPACE_ROOT": str(tmp / "ws"), "PRUN_STATE_ROOT": str(tmp / "state"),
               "BENCH_STREAM_MB": str(args.mb), "IS_SANDBOX": "1"}
        (tmp / "prompt.md").write_text("stream a lot\n")
        rows = []

        if args.only != "command":
            rows.append(("agent", "`cat` reading the stream", reference([str(gen)], env)))
            rows.append(("agent", "`prun dispatch`, one unit", dispatch(
                ["--executor", "claude", "--prompt-file", str(tmp / "prompt.md"),
                 "--result-file", str(tmp / "agent.md"), "--unit-id", "big"], repo, env,
                "agent")))
            rows.append(("agent", f"`prun run` supervisor, {args.units} units at once", run(
                repo / "agents.json", [{"id": f"u{i}", "executor": "claude",
                                        "prompt": "stream a lot"} for i in range(args.units)],
                args.units, repo, env, "agent")))

        if args.only != "agent":
            command = [sys.executable, str(printer)]
            rows.append(("command", "`cat` reading the output", reference(command, env)))
            rows.append(("command", "`prun dispatch`, one unit", dispatch(
                ["--executor", "command", "--command", " ".join(command), "--prompt-file",
                 str(tmp / "prompt.md"), "--result-file", str(tmp / "command.md"),
                 "--unit-id", "big-command"], repo, env, "command")))
            n = args.command_units
            rows.append(("command", f"`prun run` supervisor, {n} units at once", run(
                repo / "commands.json", [{"id": f"c{i}", "executor": "command",
                                          "command": command, "prompt": "print a lot"}
                                         for i in range(n)], n, repo, env, "command")))
            if not args.no_cluster:
                rows.append(("command", f"`prun run --cluster` supervisor, {n} units at "
                             "once", on_cluster(tmp, command, n, repo, env)))

    print(f"\nPeak resident memory, {args.mb:g} MB of output per unit\n")
    print("| unit | process | peak RSS (MiB) |")
    print("|---|---|---:|")
    for kind, name, mib in rows:
        print(f"| {kind} | {name} | {mib:.1f} |")


if __name__ == "__main__":
    main()
