"""What the quota gate costs a dispatch, and what `prun quota` costs, side by side.

Run: python bench/quota_gate.py [--runs N]   (with prun installed in this interpreter)

Rows (median of N runs each, wall time):
  * prun dispatch --executor agy with the fake agy, gate off (PRUN_AGY_QUOTA_GATE=off) vs on
    with a fresh snapshot: the gate's share of a whole dispatch;
  * the gate in process (fresh snapshot): the decision alone;
  * the gate in process with a stale snapshot and one trivial probe: the refresh it triggers;
  * `prun quota` vs a bare interpreter that only reads the same JSON file (the floor for any
    command that reads the snapshot in a fresh process).

No reference implementation of the seed's agent-quota is available here, so the bare reader is
the comparison point. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKE_AGY = ROOT / "tests" / "fakes" / "fake_agy.py"


def iso(offset: float = 0.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset))


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    runs = ap.parse_args().runs
    tmp = Path(tempfile.mkdtemp(prefix="prun-bench-quota-"))
    agy = tmp / "agy"
    agy.write_text(f"#!{sys.executable}\n" + FAKE_AGY.read_text())
    agy.chmod(0o755)
    snapshot = tmp / "quota.json"
    fresh = {"version": 1, "updated_at": iso(), "groups": {
        g: {"left": 0.5, "resets_at": iso(3600), "read_at": iso(), "source": "probe",
            "error": None} for g in ("claude", "agy-gemini", "agy-claude-gpt", "gemini")}}
    snapshot.write_text(json.dumps(fresh))
    prompt = tmp / "prompt.txt"
    prompt.write_text("Summarise the repository.\n")
    env = dict(os.environ, PRUN_AGY_BIN=str(agy), PRUN_QUOTA_SNAPSHOT=str(snapshot),
               PRUN_CONFIG=str(tmp / "none.toml"), PRUN_STATE_ROOT=str(tmp / "state"))
    counter = iter(range(10**6))

    def dispatch(gate: str):
        def run():
            n = next(counter)
            subprocess.run([sys.executable, "-m", "prun", "dispatch", "--prompt-file",
                            str(prompt), "--result-file", str(tmp / f"r{n}.md"),
                            "--unit-id", f"u{n}"], env=dict(env, PRUN_AGY_QUOTA_GATE=gate),
                           check=True, capture_output=True)
        return run

    rows = []
    off = median_ms(dispatch("off"), runs)
    on = median_ms(dispatch("on"), runs)
    rows.append(("prun dispatch (fake agy), gate off", off))
    rows.append(("prun dispatch (fake agy), gate on, fresh snapshot", on))

    os.environ.update(env)
    from prun import quota
    from prun.executors import get

    ex = get("agy")
    settings = ex.settings(env)
    rows.append(("gate decision in process, fresh snapshot",
                 median_ms(lambda: quota.gate(ex, settings, env), runs * 20)))

    probe = tmp / "probe.py"
    probe.write_text('print(\'{"left": 0.5}\')\n')
    (tmp / "probes.toml").write_text(
        f"[quota.probes]\nagy-gemini = {json.dumps([sys.executable, str(probe)])}\n")
    stale = json.loads(json.dumps(fresh))
    stale["groups"]["agy-gemini"]["read_at"] = iso(-3600)
    probe_env = dict(env, PRUN_CONFIG=str(tmp / "probes.toml"))

    def stale_gate():
        snapshot.write_text(json.dumps(stale))
        quota.gate(ex, settings, probe_env)

    rows.append(("gate decision in process, stale snapshot + 1 probe", median_ms(stale_gate,
                                                                                 runs)))
    snapshot.write_text(json.dumps(fresh))
    rows.append(("prun quota (fresh snapshot)", median_ms(
        lambda: subprocess.run([sys.executable, "-m", "prun", "quota"], env=env, check=True,
                               capture_output=True), runs)))
    rows.append(("bare python reading the same JSON (floor)", median_ms(
        lambda: subprocess.run([sys.executable, "-c",
                                f"import json; json.load(open({str(snapshot)!r}))"],
                               check=True, capture_output=True), runs)))

    print(f"| what ({runs} runs, median) | ms |")
    print("| --- | ---: |")
    for name, ms in rows:
        print(f"| {name} | {ms:.2f} |")
    print(f"\ngate's share of a dispatch: {on - off:+.1f} ms")


if __name__ == "__main__":
    main()
