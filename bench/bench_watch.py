"""How fast do ``prun gather`` and ``prun monitor`` notice a result, and what does watching cost?

    python bench/bench_watch.py [--runs 20] [--cpu-seconds 30] [--units 200]

1. Latency from a result's atomic publication to gather's ``DONE`` line and to monitor's
   wake-up (its summary printed and the process gone), median and worst of ``--runs`` runs, for:
   - prun, native notifications (inotify), a result published by a dispatcher: the bench does
     exactly what ``Dispatch.finish`` does (``publish_new``, then ``published.record``);
   - prun, native notifications, a result the worker wrote itself: the stable-window rule
     (default window, 10 s), the only rule an index-less waiter has;
   - a polling watcher: prun with ``PRUN_WATCH=poll`` (a folder snapshot every second).
   The monitor's time runs to its exit, since that is what wakes a caller that launched it in
   the background.
2. CPU used by one monitor watching ``--units`` running units for ``--cpu-seconds``: every unit
   has a live dispatcher process and a worker appending to its ``tail`` (held open, as an
   agent's stdout is) once a second. Native notifications and polling, side by side.

Prints Markdown tables. Each prun command runs as a real subprocess (``python -m prun``); the
clock starts just before the publication and stops when the line is read from its stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from prun._util.fsutil import publish_new
from prun._util.process import create_time
from prun.attempt import result_index as published

WAKE = "monitor wake-up (exit)"
TEXT = "# Result\n\nEverything the unit was asked for, in one write.\n"


def start(*args: str, env: dict | None = None) -> subprocess.Popen:
    full = dict(os.environ, **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "prun", *args], env=full, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=1)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def publish(result: Path, state_dir: Path) -> None:
    publish_new(result, TEXT)
    published.record(str(result), str(state_dir))


def worker_write(result: Path) -> None:
    with open(result, "w") as f:
        f.write(TEXT)


def make_unit(root: Path, name: str, pid: int) -> tuple[Path, Path]:
    sd = root / "state" / f"{name}-20260101T000000-000000"
    sd.mkdir(parents=True)
    result = root / "results" / f"{name}.md"
    result.parent.mkdir(exist_ok=True)
    (sd / "result-file").write_text(f"{result}\n")
    (sd / "dispatch-pid").write_text(f"{pid}\n")
    (sd / "tail").write_text('{"event":"init"}\n')
    (sd / "model").write_text("gemini-bench\n")
    (sd / "unit.json").write_text(json.dumps({
        "unit_id": name, "executor": "agy", "result_file": str(result),
        "dispatcher": {"pid": pid, "create_time": create_time(pid)},
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
    return sd, result


def monitor_ready(proc: subprocess.Popen, pid: int, timeout: float = 10) -> None:
    """Until the monitor holds a pidfd on ``pid`` (it is asleep in its wait), where /proc
    shows it; elsewhere a fixed pause."""
    folder = Path(f"/proc/{proc.pid}/fdinfo")
    if not Path("/proc/self/fdinfo").is_dir():
        time.sleep(1.0)
        return
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if any(f"Pid:\t{pid}\n" in p.read_text() for p in folder.iterdir()):
                time.sleep(0.05)  # from holding the pidfd to sleeping in select
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit("the monitor did not start watching")


# 1. latency --------------------------------------------------------------------------------------

def gather_sequential(root: Path, runs: int, env: dict) -> list[float]:
    """One gather per run, one published result each; ms from publication to DONE."""
    out = []
    for i in range(runs):
        result = root / f"g-seq-{i}.md"
        g = start("gather", str(result), "--timeout", "60", env=env)
        assert g.stdout.readline().startswith("GATHER-START")
        time.sleep(0.2)  # let it fall asleep
        t0 = time.perf_counter()
        publish(result, root)
        line = g.stdout.readline()
        out.append((time.perf_counter() - t0) * 1000)
        assert line.startswith("DONE"), line
        stop(g)
    return out


def gather_staggered(root: Path, runs: int, env: dict, write, tag: str,
                     spacing: float = 0.37) -> list[float]:
    """One gather on ``runs`` files written ``spacing`` s apart; ms from each write to its
    DONE (used where each run takes seconds: the stable window, polling)."""
    paths = [root / f"g-{tag}-{i}.md" for i in range(runs)]
    g = start("gather", *map(str, paths), "--timeout", "300", env=env)
    assert g.stdout.readline().startswith("GATHER-START")
    time.sleep(0.2)
    written: dict[str, float] = {}

    def writer():
        for p in paths:
            written[str(p)] = time.perf_counter()
            write(p)
            time.sleep(spacing)

    t = threading.Thread(target=writer)
    t.start()
    out = []
    for _ in paths:
        line = g.stdout.readline().rstrip("\n")
        now = time.perf_counter()
        assert line.startswith("DONE "), line
        out.append((now - written[line[5:]]) * 1000)
    t.join()
    stop(g)
    return out


def monitor_runs(root: Path, runs: int, env: dict, write, tag: str,
                 concurrent: bool = False, printed: list | None = None) -> list[float]:
    """A monitor per run on one running unit (dispatcher: this process); ms from the result's
    write to the monitor's exit, its summary printed (and to the summary line, into
    ``printed``). ``concurrent``: all monitors at once, writes staggered."""
    printed = [] if printed is None else printed
    me = os.getpid()
    units = [make_unit(root, f"m-{tag}-{i}", me) for i in range(runs)]
    if not concurrent:
        out = []
        for sd, result in units:
            m = start("monitor", str(sd), env=env)
            monitor_ready(m, me)
            t0 = time.perf_counter()
            write(result, sd)
            line = m.stdout.readline()
            t1 = time.perf_counter()
            m.wait()  # a background task wakes its caller when it exits
            out.append((time.perf_counter() - t0) * 1000)
            printed.append((t1 - t0) * 1000)
            assert line.startswith("ALL-DONE"), line
            stop(m)
        return out
    monitors = [start("monitor", str(sd), env=env) for sd, _ in units]
    for m in monitors:
        monitor_ready(m, me)
    results: list[float] = [0.0] * runs
    t0s: list[float] = [0.0] * runs

    def reader(i: int):
        line = monitors[i].stdout.readline()
        monitors[i].wait()
        results[i] = (time.perf_counter() - t0s[i]) * 1000
        assert line.startswith("ALL-DONE"), line

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(runs)]
    for t in threads:
        t.start()
    for i, (sd, result) in enumerate(units):
        t0s[i] = time.perf_counter()
        write(result, sd)
        time.sleep(0.37)
    for t in threads:
        t.join()
    for m in monitors:
        stop(m)
    return results


# 2. CPU -------------------------------------------------------------------------------------------

def monitor_cpu(root: Path, units: int, seconds: float, env: dict, tag: str) -> tuple[float, float]:
    """(start-up CPU seconds, steady CPU % of one core) of a monitor on ``units`` running units."""
    import psutil

    sleepers = [subprocess.Popen(["sleep", "3600"]) for _ in range(units)]
    try:
        made = [make_unit(root, f"cpu-{tag}-{i}", p.pid) for i, p in enumerate(sleepers)]
        tails = [open(sd / "tail", "a") for sd, _ in made]
        stop_writing = threading.Event()

        def writer():
            n = 0
            while not stop_writing.wait(1.0):
                n += 1
                for f in tails:
                    f.write(json.dumps({"event": "step_update", "n": n}) + "\n")
                    f.flush()

        t = threading.Thread(target=writer)
        t.start()
        m = start("monitor", *(str(sd) for sd, _ in made), env=env)
        proc = psutil.Process(m.pid)
        monitor_ready(m, sleepers[-1].pid, timeout=60)
        time.sleep(1.0)
        c0 = proc.cpu_times()
        startup = c0.user + c0.system
        w0 = time.perf_counter()
        time.sleep(seconds)
        c1 = proc.cpu_times()
        wall = time.perf_counter() - w0
        assert m.poll() is None, "the monitor woke up although every unit is running"
        stop(m)
        stop_writing.set()
        t.join()
        for f in tails:
            f.close()
        steady = (c1.user + c1.system - startup) / wall * 100
        return startup, steady
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def fmt(values: list[float]) -> tuple[str, str]:
    return f"{statistics.median(values):.1f}", f"{max(values):.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cpu-seconds", type=float, default=30.0)
    ap.add_argument("--units", type=int, default=200)
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="prun-bench-watch-"))
    os.environ["PRUN_STATE_ROOT"] = str(root / "state")
    os.environ.pop("PRUN_WATCH", None)
    native = {"PRUN_WATCH": "native"}
    poll = {"PRUN_WATCH": "poll", "PRUN_WATCH_POLL_INTERVAL": "1"}
    n = args.runs
    try:
        rows = []
        rows.append(("gather `DONE`", "prun, inotify", "published by the dispatcher",
                     gather_sequential(root, n, native)))
        rows.append(("gather `DONE`", "prun, inotify", "worker-written, stable window 10 s",
                     gather_staggered(root, n, native, worker_write, "stable")))
        rows.append(("gather `DONE`", "polling watcher (1 s)", "published by the dispatcher",
                     gather_staggered(root, n, poll, lambda p: publish(p, root), "poll")))
        printed: list[float] = []
        rows.append((WAKE, "prun, inotify", "published by the dispatcher",
                     monitor_runs(root, n, native, publish, "native", printed=printed)))
        rows.append(("monitor summary line", "prun, inotify", "published by the dispatcher",
                     printed))
        rows.append((WAKE, "prun, inotify", "worker-written, stable window 10 s",
                     monitor_runs(root, n, native, lambda r, sd: worker_write(r), "stable",
                                  concurrent=True)))
        rows.append((WAKE, "polling watcher (1 s)", "published by the dispatcher",
                     monitor_runs(root, n, poll, publish, "poll", concurrent=True)))
        cpu = [("prun, inotify", *monitor_cpu(root, args.units, args.cpu_seconds, native, "n")),
               ("polling watcher (1 s)",
                *monitor_cpu(root, args.units, args.cpu_seconds, poll, "p"))]
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print(f"Machine: {platform.system()} {platform.release()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}\n")
    print(f"Latency from a result's atomic publication to the line ({n} runs each):\n")
    print("| what | watcher | result | median ms | worst ms |")
    print("| --- | --- | --- | ---: | ---: |")
    for what, watcher, rule, values in rows:
        med, worst = fmt(values)
        print(f"| {what} | {watcher} | {rule} | {med} | {worst} |")
    print(f"\nCPU of one monitor watching {args.units} running units (each tail growing once a "
          f"second) for {args.cpu_seconds:g} s:\n")
    print("| watcher | start-up CPU s | steady CPU, % of one core |")
    print("| --- | ---: | ---: |")
    for watcher, startup, steady in cpu:
        print(f"| {watcher} | {startup:.2f} | {steady:.2f} |")


if __name__ == "__main__":
    main()
