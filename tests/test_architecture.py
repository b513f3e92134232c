"""The shape of the code, checked: the dependency rule (import-linter, contracts in
pyproject.toml), no import cycle between modules, and what the dispatcher's path to its
STATE-DIR line imports."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_and_independence_contracts_hold():
    pytest.importorskip("importlinter")
    p = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command;"
                        " lint_imports_command()"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "BROKEN" not in p.stdout


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_strongly_connected_finds_a_cycle_and_leaves_a_chain_alone():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"], ["d"]]
    assert all(len(c) == 1 for c in strongly_connected({"a": {"b"}, "b": {"c"}, "c": set()}))


def test_no_module_imports_itself_back_whatever_the_import():
    """Zero cycles between prun's modules, counting every import: at the top, inside a
    function, and under ``TYPE_CHECKING``."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("prun", include_external_packages=False,
                              exclude_type_checking_imports=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    cycles = [c for c in strongly_connected(edges) if len(c) > 1]
    lines = []
    for cycle in cycles:
        lines.append(f"cycle of {len(cycle)}: " + ", ".join(cycle))
        for a in cycle:
            for b in sorted(edges[a] & set(cycle)):
                for d in graph.get_import_details(importer=a, imported=b):
                    lines.append(f"  {a}:{d['line_number']}: {d['line_contents']}")
    assert not cycles, "\n".join(lines)


# What the STATE-DIR line must not wait for (docs/dispatch.md, "Speed"): the command table
# imports only the command being run, and the dispatcher's path before that line stays off
# these modules, each of which costs a noticeable part of the budget.
HEAVY = ("asyncio", "dataclasses", "json", "jsonschema", "pathlib", "psutil", "rich", "sqlite3",
         "tempfile", "typing", "watchdog", "yaml")


def test_the_dispatch_fast_path_imports_nothing_heavy_before_its_state_dir_line(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent("""
        import sys

        class Out:
            def __init__(self, real):
                self.real = real
            def write(self, text):
                if text.startswith("STATE-DIR"):
                    with open(sys.argv[1], "w") as f:
                        f.write("\\n".join(sorted(sys.modules)))
                return self.real.write(text)
            def __getattr__(self, name):
                return getattr(self.real, name)

        sys.stdout = Out(sys.stdout)
        from prun.cli import main
        sys.exit(main(sys.argv[2:]))
    """))
    (tmp_path / "prompt.md").write_text("say hello\n")
    seen = tmp_path / "modules.txt"
    env = {**os.environ, "PRUN_SANDBOX": "off"}
    p = subprocess.run([sys.executable, str(probe), str(seen), "dispatch", "--executor", "command",
                        "--command", "echo a result long enough to count", "--prompt-file",
                        "prompt.md", "--result-file", "result.md", "--unit-id", "fast"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("STATE-DIR ")
    modules = set(seen.read_text().split())
    assert "prun.attempt.dispatch" in modules          # the probe saw the real path
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert not {m for m in modules if m.startswith("prun.cli.") and m not in
                {"prun.cli.dispatch", "prun.cli.options"}}


def test_prun_variables_are_read_by_the_settings_alone():
    """Every PRUN_* and ANTIGRAVITY_* variable is parsed once, in ``prun.settings`` (each
    CLI's own in its executor, from the environment it is handed). The worker-side hooks
    are the exception: they run inside a unit and read what prun passed them."""
    import re

    read = re.compile(r"(os\.environ|os\.getenv)\W[^\n]*[\"'](PRUN|ANTIGRAVITY)_")
    found = [f"{path.relative_to(ROOT)}:{n}"
             for path in (ROOT / "src" / "prun").rglob("*.py")
             if "settings" not in path.parts and "hooks" not in path.parts
             for n, line in enumerate(path.read_text().splitlines(), 1) if read.search(line)]
    assert found == []
