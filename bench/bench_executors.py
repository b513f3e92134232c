"""What prun's dispatcher adds to one unit, per executor: `prun dispatch` against the bare CLI.

Each executor runs its test fake (the real stream format, answering at once), so the difference
between the two columns is prun's own cost: interpreter start-up, validation, state dir, reading
and judging the stream, publishing the result, outcome.json. Run: python bench/bench_executors.py [N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers import FAKES, make_fake_cli  # noqa: E402

FAKE = {"agy": ("fake_agy.py", "PRUN_AGY_BIN"), "claude": ("fake_claude.py", "PRUN_CLAUDE_BIN"),
        "gemini": ("fake_gemini.py", "PRUN_GEMINI_BIN")}


def bare_argv(name: str, binary: str, prompt: str) -> list[str]:
    if name == "agy":
        return [binary, "-p", prompt, "--output-format", "stream-json"]
    if name == "claude":
        return [binary, "-p", prompt, "--output-format", "stream-json", "--verbose",
                "--model", "sonnet", "--permission-mode", "bypassPermissions"]
    return [binary, "-p", prompt, "--output-format", "stream-json", "-m", "gemini-3.8-flash",
            "--yolo"]


def timed(argv: list[str], env: dict, cwd: str) -> float:
    start = time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if p.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {p.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        env = dict(os.environ, PRUN_STATE_ROOT=str(tmp_path / "state"), IS_SANDBOX="1",
                   FAKE_CLAUDE_HOME=str(tmp_path / "ch"), FAKE_GEMINI_HOME=str(tmp_path / "gh"),
                   GEMINI_CLI_TRUST_WORKSPACE="true", GEMINI_CLI_NO_RELAUNCH="true",
                   PRUN_QUOTA_SNAPSHOT=str(tmp_path / "quota.json"))
        prompt = tmp_path / "prompt.md"
        prompt.write_text("Say hello.\n")
        for name, (script, bin_env) in FAKE.items():
            binary = str(make_fake_cli(tmp_path / "bin", name, FAKES / script))
            env[bin_env] = binary
            bare, via = [], []
            for i in range(runs):
                bare.append(timed(bare_argv(name, binary, "Say hello.\n"), env, tmp))
                via.append(timed([sys.executable, "-m", "prun", "dispatch", "--executor", name,
                                  "--prompt-file", str(prompt), "--result-file",
                                  str(tmp_path / f"{name}-{i}.md"), "--unit-id", f"{name}{i}"],
                                 env, tmp))
            rows.append((name, statistics.median(bare), statistics.median(via)))
    print(f"| executor (fake CLI) | bare CLI, median of {runs} | prun dispatch, median of "
          f"{runs} | prun's cost |")
    print("|---|---|---|---|")
    for name, bare, via in rows:
        print(f"| {name} | {bare * 1000:.0f} ms | {via * 1000:.0f} ms | "
              f"{(via - bare) * 1000:+.0f} ms |")


if __name__ == "__main__":
    main()
