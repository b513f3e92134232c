"""A small reviewer for the review example: reads one module from the run's read-only
snapshot of the code ($PRUN_REPO_SNAPSHOT) and prints a review in Markdown (Summary, Findings,
Open items). Standard library only; a stand-in for an agent, so the example runs anywhere."""

import ast
import os
import sys

LONG = 40  # lines: a function longer than this is worth a look


def main() -> int:
    rel = sys.argv[1]
    snapshot = os.environ["PRUN_REPO_SNAPSHOT"]
    with open(os.path.join(snapshot, rel), encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    findings = []
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for fn in functions:
        size = fn.end_lineno - fn.lineno + 1
        if size > LONG:
            findings.append(f"`{rel}:{fn.lineno}` `{fn.name}` is {size} lines long")
        if not ast.get_docstring(fn) and not fn.name.startswith("_"):
            findings.append(f"`{rel}:{fn.lineno}` `{fn.name}` is public and has no docstring")
    if not ast.get_docstring(tree):
        findings.append(f"`{rel}:1` the module has no docstring")
    print(f"## Summary\n\n`{rel}`: {len(source.splitlines())} lines, {len(functions)} "
          f"functions, {len(findings)} findings (read from the run's read-only snapshot).\n")
    print("## Findings\n")
    print("\n".join(f"- {x}" for x in findings) or "- nothing above the thresholds")
    print("\n## Open items\n\n- only sizes and docstrings were checked; an agent reads the "
          "code itself")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
