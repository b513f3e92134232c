"""What verification saves the coordinator: one plan of code units integrated to a tree whose
check passes, with prun's verification and by a coordinator who verifies everything itself.

    python bench/bench_verify.py [--units 20] [--check-seconds 1] [--repeat 1]
                                 [--modes verified,culprit,manual] [--json]

The script makes a small real git project in a temporary folder: ``src/mods/mNN.py``, one
module per unit (a ``COMMAND`` name, a ``value()`` and its ``test_value()``), and
``check.py``, a pytest-free check that imports every module, runs its test and refuses two
modules of one ``COMMAND`` name (it sleeps ``--check-seconds`` first, as a real test suite
takes time). Each unit is one Claude Code packet run by the fake Claude CLI of the tests
(``tests/fakes/fake_claude.py``: the real stream-json, each shell command a Bash tool call
it really runs), each owning its module. Of UNITS units, spread through the plan:

- 3 claim a check they never ran (their stream shows only the edit; their work is fine);
- 2 break the check alone (their module's test fails; they claim only what they ran);
- 2 are incompatible together (both rename their command to ``sync``: each passes alone);
- the rest are fine (they edit their module and run the check, and say so).

Each mode starts from its own copy of the project, with its own ledger and workspaces, and
measures from ``prun run`` to an integrated tree whose check passes (the script runs the
check on the tree at the end, says whether it passes, and stops when a tree that passes does
not hold the expected changes: every unit but the two breakers and the later of the pair):

- ``verified``: the plan's ``accept`` is the check. The coordinator runs ``prun run``,
  ``prun reconcile`` (the breakers are REJECTED accept-failed, the claims REVIEW), accepts
  each unverified claim whose acceptance check passed (``prun status RUN --all`` shows
  ``accept=passed``; ``prun review RUN --decide PACKET accept``), and ``prun integrate``,
  which names the pair and holds the later one.
- ``culprit``: the same without ``accept``: the coordinator accepts the claims unread and
  leaves the breakers and the pair to ``prun integrate``'s bisection.
- ``manual`` (the reference): no verification by prun. The coordinator runs ``prun run``,
  lists the units' attempts (``prun ledger RUN --json``: workspace, base, result), reads
  each unit's result and diff (``cat``, ``git diff``), runs the check in each unit's clone,
  applies the patches that passed (``git diff | git apply``), runs the check on the tree,
  and finds the incompatible pair by trying: each applied unit taken out in turn (``git
  apply -R``) and the check run, until both of the pair are found; the later one stays out.
  One command at a time, as a coordinator's shell runs them.

Counted per mode: the bytes of the coordinator's commands' stdout (what it reads), the
commands it runs, every run of the check (prun's acceptance checks, the combined check, the
bisection's runs, the check again; or the coordinator's own), the bisection's check runs and
time (``BISECT``), the wall time, and the part of it after ``prun run`` (what verifying and
integrating took). Prints a Markdown table (``--json``: the structure);
with ``--repeat`` the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchkit import GIT_ENV, compile_prun, git

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from helpers import FAKES, make_fake_cli  # noqa: E402

PRUN = [sys.executable, "-m", "prun"]
PY = sys.executable
MODES = ("verified", "culprit", "manual")

CHECK = """\
import importlib.util, pathlib, sys, time
time.sleep(float(pathlib.Path("check.seconds").read_text()))
names, failed = {}, []
for path in sorted(pathlib.Path("src/mods").glob("m*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        mod.test_value()
    except AssertionError:
        failed.append(path.stem)
    names.setdefault(mod.COMMAND, []).append(path.stem)
doubles = sorted(n for n, mods in names.items() if len(mods) > 1)
print(f"{len(names)} commands, {len(failed)} failed" + "".join(f" FAIL {m}" for m in failed)
      + "".join(f" DUPLICATE command {n!r}" for n in doubles))
sys.exit(1 if failed or doubles else 0)
"""

FINE = """## Changes

- `src/mods/{m}.py`: value() returns {v} now, its test says so

## Verification

```
$ python3 check.py
```
"""

BREAKER = """## Changes

- `src/mods/{m}.py`: value() returns {v} now

## Verification

Ran `grep -n return src/mods/{m}.py`: it returns {v}.
"""


@dataclass(frozen=True)
class Unit:
    pid: str
    module: str
    k: int
    role: str        # fine, liar, breaker, pair


@dataclass
class Figures:
    mode: str
    bytes_read: int = 0
    commands: int = 0
    check_runs: int = 0
    bisect_runs: int | None = None
    bisect_seconds: float | None = None
    seconds: float = 0.0
    passes: bool = False     # the integrated tree's check
    integrated: list[str] = field(default_factory=list)
    after_run: float = 0.0   # seconds from the end of `prun run` to the end
    steps: list[tuple[str, int, float]] = field(default_factory=list)  # command, bytes, seconds


def units(n: int) -> list[Unit]:
    """``n`` units, the seven special ones spread through the plan (the pair far apart)."""
    if n < 7:
        raise SystemExit("--units must be at least 7 (3 false claims, 2 breakers, a pair)")
    special = ["liar", "breaker", "pair", "liar", "breaker", "liar", "pair"]
    at = {min(n - 1, int(i * n / 7 + n / 14)): role for i, role in enumerate(special)}
    return [Unit(f"u{k:02d}", f"m{k:02d}", k, at.get(k - 1, "fine")) for k in range(1, n + 1)]


def module_text(k: int) -> str:
    return (f'COMMAND = "cmd{k:02d}"\n\n\ndef value():\n    return {k}\n\n\n'
            f"def test_value():\n    assert value() == {k}\n")


def behaviour(u: Unit) -> dict[str, str]:
    """The fake Claude CLI's script for unit ``u``: what it runs, what it answers."""
    path, v = f"src/mods/{u.module}.py", 2 * u.k
    edit = f"sed -i 's/return {u.k}$/return {v}/; s/== {u.k}$/== {v}/' {path}"
    runs, answer = [edit, "python3 check.py"], FINE.format(m=u.module, v=v)
    if u.role == "liar":
        runs = [edit]
    elif u.role == "breaker":
        runs = [f"sed -i 's/return {u.k}$/return {v}/' {path}", f"grep -n return {path}"]
        answer = BREAKER.format(m=u.module, v=v)
    elif u.role == "pair":
        runs = [f"{edit} && sed -i 's/cmd{u.k:02d}/sync/' {path}", "python3 check.py"]
        answer = answer.replace("its test says so", "its command is `sync` now")
    return {"FAKE_CLAUDE_RUN": json.dumps(runs), "FAKE_CLAUDE_RESPONSE": answer}


def make_project(root: Path, plan_units: list[Unit], check_seconds: float, accept: bool) -> Path:
    root.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=root)
    (root / "src" / "mods").mkdir(parents=True)
    for u in plan_units:
        (root / "src" / "mods" / f"{u.module}.py").write_text(module_text(u.k))
    (root / "check.py").write_text(CHECK)
    (root / "check.seconds").write_text(f"{check_seconds}\n")
    (root / ".gitignore").write_text("/plan.json\n__pycache__/\n")
    git("add", "-A", cwd=root)
    git("commit", "-q", "-m", "base", cwd=root)
    check = ["python3", "check.py"]
    plan = {"name": "bench-verify", "check": check, **({"accept": check} if accept else {}),
            "packets": [{"id": u.pid, "kind": "code", "executor": "claude",
                         "owns": [f"src/mods/{u.module}.py"],
                         "prompt": f"Unit {u.pid}: double what {u.module}.value() returns."}
                        for u in plan_units]}
    path = root / "plan.json"
    path.write_text(json.dumps(plan, indent=1))
    return path


class Coordinator:
    """Runs commands as a coordinator does, counting what it reads and runs."""

    def __init__(self, figures: Figures, env: dict[str, str], repo: Path) -> None:
        self.f, self.env, self.repo = figures, env, repo

    def run(self, argv: list[str], cwd: Path | None = None, stdin: bytes | None = None,
            check_run: bool = False) -> subprocess.CompletedProcess[bytes]:
        t = time.perf_counter()
        r = subprocess.run(argv, cwd=cwd or self.repo, env=self.env, input=stdin,
                           capture_output=True)
        took = time.perf_counter() - t
        self.f.commands += 1
        self.f.bytes_read += len(r.stdout)
        shown = ["prun", *argv[3:]] if argv[:3] == PRUN else argv
        self.f.steps.append((" ".join(shown), len(r.stdout), round(took, 3)))
        self.f.check_runs += check_run
        return r

    def prun(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return self.run([*PRUN, *args])

    def check(self, cwd: Path | None = None) -> bool:
        return self.run(["python3", "check.py"], cwd=cwd, check_run=True).returncode == 0


def run_id_of(out: bytes) -> str:
    return next(line.split()[1] for line in out.decode().splitlines() if line.startswith("RUN "))


def verified(c: Coordinator, plan: Path, accept: bool) -> None:
    """prun run, reconcile, accept the claims prun could not verify, integrate."""
    r = c.prun("run", str(plan))
    if r.returncode != 0:
        raise SystemExit(f"prun run failed:\n{r.stdout.decode()}{r.stderr.decode()}")
    run_id = run_id_of(r.stdout)
    lines = c.prun("reconcile", run_id).stdout.decode().splitlines()
    claims = [x.split()[1] for x in lines if x.startswith("REVIEW ") and "unverified-claim" in x]
    if accept:   # which of them passed their acceptance check: `prun status` says
        units = c.prun("status", run_id, "--all").stdout.decode().splitlines()
        passed = {x.split()[1] for x in units if x.startswith("UNIT ") and "accept=passed" in x}
        claims = [p for p in claims if p in passed]
    for pid in claims:
        note = "its acceptance check passed" if accept else "the combined check will tell"
        d = c.prun("review", run_id, "--decide", pid, "accept", "--note", note)
        if d.returncode != 0:
            raise SystemExit(f"prun review --decide failed:\n{d.stderr.decode()}")
    out = c.prun("integrate", run_id).stdout.decode().splitlines()
    c.f.check_runs += sum(x.startswith("CHECK ") for x in out)
    bisect = next((x for x in out if x.startswith("BISECT ")), None)
    if bisect:
        words = dict(w.split("=", 1) for w in bisect.split()[1:])
        c.f.bisect_runs = int(words["runs"])
        c.f.bisect_seconds = float(words["took"].rstrip("s"))
        c.f.check_runs += c.f.bisect_runs
    if accept:   # the benchmark's own look, not the coordinator's
        status = subprocess.run([*PRUN, "status", run_id, "--json"], cwd=c.repo, env=c.env,
                                capture_output=True, check=True)
        run_dir = Path(json.loads(status.stdout)["run"]["run_dir"])
        c.f.check_runs += len(list((run_dir / "accept").glob("*.log")))


def manual(c: Coordinator, plan: Path) -> None:
    """The reference: read every result and diff, check each unit, find the pair by trying."""
    r = c.prun("run", str(plan))
    if r.returncode != 0:
        raise SystemExit(f"prun run failed:\n{r.stdout.decode()}{r.stderr.decode()}")
    attempts = json.loads(c.prun("ledger", run_id_of(r.stdout), "--json").stdout)
    passing: list[tuple[str, bytes]] = []
    for a in sorted(attempts, key=lambda a: a["packet_id"]):    # in plan order
        c.run(["cat", a["result_path"]])
        diff = c.run(["git", "-C", a["workspace"], "diff", a["base"]]).stdout
        if c.check(cwd=Path(a["workspace"])):
            passing.append((a["packet_id"], diff))
    for _, diff in passing:
        c.run(["git", "apply"], stdin=diff)
    if c.check():
        return
    pair: list[tuple[str, bytes]] = []
    for pid, diff in passing:
        c.run(["git", "apply", "-R"], stdin=diff)
        if c.check():
            pair.append((pid, diff))
            if len(pair) == 2:
                break
        c.run(["git", "apply"], stdin=diff)
    if len(pair) != 2 or not c.check():
        raise SystemExit(f"manual: the pair was not found ({pair})")


def integrated(repo: Path, plan_units: list[Unit]) -> list[str]:
    """The units whose change the tree holds (its module doubled)."""
    return [u.pid for u in plan_units
            if f"return {2 * u.k}\n" in (repo / "src" / "mods" / f"{u.module}.py").read_text()]


def one(mode: str, root: Path, plan_units: list[Unit], check_seconds: float) -> Figures:
    env = {**GIT_ENV, "PRUN_LEDGER": str(root / "ledger.sqlite"),
           "PRUN_WORKSPACE_ROOT": str(root / "ws"), "PRUN_STATE_ROOT": str(root / "state"),
           "PRUN_CONFIG": str(root / "config.toml"), "XDG_STATE_HOME": str(root / "xdg"),
           "PRUN_QUOTA_SNAPSHOT": str(root / "quota.json"), "PRUN_STALL_THRESHOLD": "3600",
           "PRUN_SANDBOX_WRITABLE": str(root), "GIT_CONFIG_GLOBAL": str(root / "gitconfig"),
           "PRUN_CLAUDE_BIN": str(make_fake_cli(root / "bin", "claude",
                                                FAKES / "fake_claude.py")),
           "IS_SANDBOX": "1", "FAKE_CLAUDE_HOME": str(root / "claude-home"),
           "FAKE_CLAUDE_IF": json.dumps({f"Unit {u.pid}:": behaviour(u) for u in plan_units})}
    plan = make_project(root / "repo", plan_units, check_seconds, accept=mode == "verified")
    f = Figures(mode)
    c = Coordinator(f, env, plan.parent)
    t = time.perf_counter()
    if mode == "manual":
        manual(c, plan)
    else:
        verified(c, plan, accept=mode == "verified")
    f.seconds = time.perf_counter() - t
    f.after_run = f.seconds - f.steps[0][2]
    done = subprocess.run(["python3", "check.py"], cwd=plan.parent, capture_output=True)
    f.passes = done.returncode == 0
    f.integrated = integrated(plan.parent, plan_units)
    return f


def expected(plan_units: list[Unit]) -> list[str]:
    later = [u.pid for u in plan_units if u.role == "pair"][-1]
    return [u.pid for u in plan_units if u.role != "breaker" and u.pid != later]


def median_of(rounds: list[Figures]) -> dict[str, Any]:
    out: dict[str, Any] = {"mode": rounds[0].mode, "integrated": rounds[0].integrated,
                              "passes": all(f.passes for f in rounds)}
    for key in ("bytes_read", "commands", "check_runs", "bisect_runs", "bisect_seconds",
                "seconds", "after_run"):
        values = [getattr(f, key) for f in rounds if getattr(f, key) is not None]
        out[key] = statistics.median(values) if values else None
    return out


LABEL = {"verified": "prun: accept + claims + culprits", "culprit": "prun: claims + culprits, no "
         "accept", "manual": "coordinator checks everything itself (reference)"}


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    def cell(v: float | None, fmt: str, unit: str = "") -> str:
        return "-" if v is None else format(v, fmt) + unit

    out = [f"{args.units} units (3 false claims, 2 breakers, an incompatible pair), check "
           f"{args.check_seconds:g} s, {args.repeat} round(s), medians; {os.cpu_count()} CPUs\n",
           "| mode | bytes read | commands | check runs | bisection runs | bisection time "
           "| wall time | after `prun run` | integrated | its check |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {LABEL[r['mode']]} | {cell(r['bytes_read'], ',.0f')} | "
                   f"{cell(r['commands'], '.0f')} | {cell(r['check_runs'], '.0f')} | "
                   f"{cell(r['bisect_runs'], '.0f')} | {cell(r['bisect_seconds'], '.1f', ' s')} | "
                   f"{cell(r['seconds'], '.1f', ' s')} | {cell(r['after_run'], '.1f', ' s')} | "
                   f"{len(r['integrated'])} | {'passes' if r['passes'] else 'FAILS'} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=20)
    ap.add_argument("--check-seconds", type=float, default=1.0,
                    help="how long the project's check takes (a sleep before it checks)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if not set(modes) <= set(MODES):
        raise SystemExit(f"--modes: one or more of {','.join(MODES)}")
    compile_prun()
    plan_units = units(args.units)
    want = expected(plan_units)
    rounds: dict[str, list[Figures]] = {m: [] for m in modes}
    tmp = Path(tempfile.mkdtemp(prefix="prun-bench-verify-"))
    try:
        for k in range(args.repeat):
            for mode in modes:
                f = one(mode, tmp / f"{mode}-{k}", plan_units, args.check_seconds)
                if f.passes and f.integrated != want:
                    raise SystemExit(f"{mode}: integrated {f.integrated}, expected {want}")
                rounds[mode].append(f)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [median_of(rounds[m]) for m in modes]
    if args.json:
        print(json.dumps({"units": args.units, "check_seconds": args.check_seconds,
                          "repeat": args.repeat, "cpus": os.cpu_count(), "modes": rows,
                          "rounds": {m: [asdict(f) for f in fs] for m, fs in rounds.items()}},
                         indent=1))
    else:
        print(table(rows, args))


if __name__ == "__main__":
    main()
