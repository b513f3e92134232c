"""A `status` call through an MCP session beside `prun status` on the command line: the same
run, the same machine, alternating, N repeats each (target: the MCP call within 2 times the
command).

The session is started once, as a coordinating CLI does, and is not timed; each call is timed
from the request to the result, which carries the command's lines and its --json (the server
runs `prun status` in a child for each call, as the command line does). The run is a finished
plan of command units.

    python bench/bench_mcp.py [--units 20] [--repeats 15]
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from benchkit import compile_prun, git  # noqa: E402

TARGET = 2.0


def setup(root: Path, units: int) -> tuple[Path, str, dict[str, str]]:
    env = dict(os.environ)
    for key, sub in (("PRUN_STATE_ROOT", "state"), ("PRUN_QUOTA_SNAPSHOT", "quota.json"),
                     ("PRUN_CONFIG", "config.toml"), ("PRUN_WORKSPACE_ROOT", "workspaces"),
                     ("XDG_STATE_HOME", "xdg-state")):
        env[key] = str(root / sub)
    repo = root / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "README.md").write_text("bench\n")
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "base", cwd=repo)
    packets = [{"id": f"u{i:02d}", "executor": "command", "prompt": "echo",
                "command": ["echo", f"## Result\nunit {i} printed this line of text"]}
               for i in range(units)]
    (repo / "plan.json").write_text(json.dumps({"name": "bench-mcp", "packets": packets}))
    p = subprocess.run([sys.executable, "-m", "prun", "run", "plan.json", "--plain"], cwd=repo,
                       env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"the bench's run failed:\n{p.stdout}{p.stderr}")
    run_id = p.stdout.split()[1]
    return repo, run_id, env


def cli_once(repo: Path, run_id: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "prun", "status", run_id], cwd=repo, env=env,
                   check=True, capture_output=True)
    return time.perf_counter() - t


async def measure(repo: Path, run_id: str, env: dict[str, str], repeats: int):
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "prun", "mcp"],
                                   cwd=str(repo), env=env)
    cli: list[float] = []
    mcp: list[float] = []
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("status", {"run": run_id})  # warm: first call not timed
            assert not res.is_error, res.content
            cli_once(repo, run_id, env)
            for i in range(repeats):
                order = ("cli", "mcp") if i % 2 == 0 else ("mcp", "cli")
                for which in order:
                    if which == "cli":
                        cli.append(cli_once(repo, run_id, env))
                    else:
                        t = time.perf_counter()
                        res = await s.call_tool("status", {"run": run_id})
                        mcp.append(time.perf_counter() - t)
                        assert not res.is_error and res.structured_content["run"]["id"] == run_id
    return cli, mcp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=20, help="packets in the run (default 20)")
    ap.add_argument("--repeats", type=int, default=15, help="calls of each (default 15)")
    args = ap.parse_args()
    import anyio

    compile_prun()
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        repo, run_id, env = setup(Path(tmp), args.units)
        cli, mcp = anyio.run(measure, repo, run_id, env, args.repeats)
    rows = [("prun status RUN (command line)", cli), ("status through MCP (one session)", mcp)]
    print(f"{args.units} units, {args.repeats} calls each, alternating; {os.cpu_count()} CPUs")
    print(f"{'how':<34} {'median':>9} {'worst':>9}")
    for name, xs in rows:
        print(f"{name:<34} {statistics.median(xs) * 1000:>7.0f} ms {max(xs) * 1000:>7.0f} ms")
    ratio = statistics.median(mcp) / statistics.median(cli)
    print(f"\nMCP / command line, medians: {ratio:.2f}x (target <= {TARGET:.0f}x: "
          f"{'met' if ratio <= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
