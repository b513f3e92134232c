"""How scattered one unit's life is: the modules a one-packet `prun run` enters between the
unit's scheduling and its settlement.

    python bench/bench_unit_path.py [--code] [--list] [--start MODULE:FUNC] [--end MODULE:FUNC]
    python bench/bench_unit_path.py --vs OTHER_SRC [--vs-start M:F --vs-end M:F]

Runs a one-packet plan (a command unit, unsandboxed) in this process with ``sys.setprofile``
and ``threading.setprofile`` and records every call into a prun module from the first call of
``--start`` to the return of ``--end``: the distinct modules entered, the hops (a call whose
module differs from its caller's) and how many of those go back into a module already
visited. ``--vs`` runs the same count on another source tree (another checkout's ``src``, in a
child) and prints both rows, side by side, each with its own endpoints.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# where this tree's unit is scheduled and where it is settled
START = "prun.run.life:life"
END = "prun.run.loop:apply_end"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", default=START)
    ap.add_argument("--end", default=END)
    ap.add_argument("--vs", metavar="SRC", help="another tree's src folder, counted the same way")
    ap.add_argument("--vs-start", default="prun.run.drive:attempt",
                    help="its first call (default: the tree before the run loop's redesign)")
    ap.add_argument("--vs-end", default="prun.run.settle:settle", help="its last return")
    ap.add_argument("--row", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--code", action="store_true", help="a code-writing packet (a clone)")
    ap.add_argument("--list", action="store_true", help="print the modules in order")
    args = ap.parse_args()
    if args.vs:
        return compare(args)
    start_mod, start_fn = args.start.split(":")
    end_mod, end_fn = args.end.split(":")
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x",
               "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}
        (repo / "a.txt").write_text("a\n")
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "i"]):
            subprocess.run(cmd, cwd=repo, check=True, env=env)
        packet = {"id": "one", "executor": "command", "prompt": "one unit",
                  "command": [sys.executable, "-c", "print('done and done, all of it')"]}
        if args.code:
            packet.update({"kind": "code", "owns": ["a.txt"]})
        (repo / "plan.yaml").write_text(json.dumps({"packets": [packet], "sandbox": "off"}))
        os.chdir(repo)
        os.environ.update({"PRUN_WORKSPACE_ROOT": str(Path(tmp) / "ws"),
                           "XDG_STATE_HOME": str(Path(tmp) / "state")})
        seen: list[str] = []
        hops = [0, 0]   # hops, back into a visited module
        state = {"on": False, "depth": 0}

        def prof(frame, event, arg):
            mod = frame.f_globals.get("__name__", "")
            name = frame.f_code.co_name
            if event == "call" and not state["on"] and mod == start_mod and name == start_fn:
                state["on"] = True
            if not state["on"] or not mod.startswith("prun"):
                return
            if event == "call":
                back = frame.f_back
                caller = back.f_globals.get("__name__", "") if back else ""
                if caller != mod:
                    hops[0] += 1
                    if mod in seen:
                        hops[1] += 1
                if mod not in seen:
                    seen.append(mod)
            elif event == "return" and mod == end_mod and name == end_fn:
                state["on"] = False

        threading.setprofile(prof)
        sys.setprofile(prof)
        from prun.cli import main as prun_main
        try:
            code = prun_main(["run", "plan.yaml"])
        except SystemExit as e:
            code = e.code
        sys.setprofile(None)
        threading.setprofile(None)
    if code != 0 or not seen:
        print(f"the run exited {code} and {len(seen)} modules were seen: check --start/--end",
              file=sys.stderr)
        return 1
    if args.row:
        print(json.dumps([len(seen), hops[0], hops[1]]))
        return 0
    print(TABLE_HEAD)
    print(f"| this tree | {len(seen)} | {hops[0]} | {hops[1]} |")
    if args.list:
        print("\n".join(seen))
    return 0


TABLE_HEAD = ("| tree | modules entered | hops between modules | hops back into a visited module |\n"
              "| --- | ---: | ---: | ---: |")


def compare(args: argparse.Namespace) -> int:
    rows = []
    for label, src, start, end in (("this tree", None, args.start, args.end),
                                   (args.vs, args.vs, args.vs_start, args.vs_end)):
        env = dict(os.environ)
        if src:
            env["PYTHONPATH"] = os.path.abspath(src)
        argv = [sys.executable, __file__, "--row", "--start", start, "--end", end]
        if args.code:
            argv.append("--code")
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{label}: {out.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        rows.append((label, *json.loads(out.stdout.strip().splitlines()[-1])))
    print(TABLE_HEAD)
    for label, mods, hops, back in rows:
        print(f"| {label} | {mods} | {hops} | {back} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
