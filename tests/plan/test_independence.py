"""The independence test's four rules, each with passing and failing pairs."""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers import prun
from prun.errors import UsageError
from prun.plan import load_plan
from prun.plan.independence import check


@pytest.fixture
def plan_of(write):
    """plan_of(yaml) -> Plan, written as plan.yaml (bases compared as written, no git)."""

    def _plan(text: str):
        return load_plan(write("plan.yaml", text))

    return _plan


def failures(plan, **kw):
    return [(f.rule, f.a, f.b, f.value) for f in check(plan, use_git=False, **kw).failures]


# --- files ----------------------------------------------------------------------------------

def test_files_disjoint_pass(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [src/api/**, tests/api/**], prompt: x}
          - {id: b, kind: code, owns: [src/web/**, tests/web/**], prompt: x}
          - {id: c, kind: code, owns: [docs/*.md], prompt: x}
        """)
    report = check(plan, use_git=False)
    assert report.ok and report.pairs == 3 and report.packets == 3
    assert report.lines() == ["OK pairs=3 packets=3 sequenced=0"]


def test_files_glob_overlap_for_files_that_do_not_exist(plan_of, tmp_path):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: ["src/**/*.py"], prompt: x}
          - {id: b, kind: code, owns: ["src/api/*.py"], prompt: x}
          - {id: c, kind: code, owns: ["docs/*.md"], prompt: x}
        """)
    assert not (tmp_path / "src").exists()
    assert failures(plan) == [("files", "a", "b", "src/api/*.py")]
    f = check(plan, use_git=False).failures[0]
    assert f.key == "path" and "a owns src/**/*.py" in f.why and "b owns src/api/*.py" in f.why
    assert "group a and b into one packet" in f.fix and "after: [a] in b" in f.fix
    assert "shared: {src/api/*.py: a}" in f.fix
    assert f.where_a.endswith("plan.yaml:2") and f.where_b.endswith("plan.yaml:3")


def test_files_same_test_fixture(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [src/a.py, tests/fixtures/users.json], prompt: x}
          - {id: b, kind: code, owns: [src/b.py, tests/fixtures/], prompt: x}
        """)
    assert failures(plan) == [("files", "a", "b", "tests/fixtures/users.json")]


def test_files_generated_outputs_count(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [schema/api.yaml], generates: [src/gen/**], prompt: x}
          - {id: b, kind: code, owns: [src/gen/client.py], prompt: x}
        """)
    assert failures(plan) == [("files", "a", "b", "src/gen/client.py")]


def test_files_manifest_brings_its_lockfile(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [web/package.json], prompt: x}
          - {id: b, kind: code, owns: [web/package-lock.json], prompt: x}
          - {id: c, kind: code, owns: [Cargo.lock], prompt: x}
        """)
    assert failures(plan) == [("files", "a", "b", "web/package-lock.json")]
    assert "regenerates (with web/package.json)" in check(plan, use_git=False).failures[0].why


def test_files_code_packet_without_owns_may_write_anything(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, prompt: x}
          - {id: b, kind: code, owns: [src/b/**], prompt: x}
          - {id: r, kind: read-only, prompt: x}
        """)
    got = failures(plan)
    assert got == [("files", "a", "b", "src/b/**")]
    assert "declares no owns" in check(plan, use_git=False).failures[0].why


def test_files_shared_path_with_one_integration_owner_passes(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [src/a/**], shared: {pyproject.toml: a}, prompt: x}
          - {id: b, kind: code, owns: [src/b/**], shared: {pyproject.toml: a}, prompt: x}
        """)
    assert failures(plan) == []


def test_files_shared_path_also_owned_by_a_non_owner_fails(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [src/a/**], shared: {pyproject.toml: a}, prompt: x}
          - {id: b, kind: code, owns: [src/b/**, pyproject.toml], prompt: x}
        """)
    assert failures(plan) == [("files", "a", "b", "pyproject.toml")]
    fix = check(plan, use_git=False).failures[0].fix
    assert fix.startswith("drop pyproject.toml from the owns of b: its integration owner is a")


def test_files_two_integration_owners_fail(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [src/a/**], shared: {pyproject.toml: a}, prompt: x}
          - {id: b, kind: code, owns: [src/b/**], shared: {pyproject.toml: b}, prompt: x}
        """)
    got = check(plan, use_git=False).failures
    assert ("files", "a", "b", "pyproject.toml") in [(f.rule, f.a, f.b, f.value) for f in got]
    assert any("names a and b names b as integration owner" in f.why for f in got)


# --- state ----------------------------------------------------------------------------------

def test_state_disjoint_pass(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, state: [port:8000-8009, db:orders, fixture:users], prompt: x}
          - {id: b, state: [port:8010, db:billing, fixture:orders], prompt: x}
        """)
    assert failures(plan) == []


@pytest.mark.parametrize(("sa", "sb", "resource"), [
    ("port:8080", "port:8080", "port:8080"),
    ("port:8000-8010", "port:8005", "port:8005"),
    ("port:8000-8010", "port:8010-8020", "port:8010"),
    ("db:orders", "database:orders", "db:orders"),
    ("fixture:users", "fixture:users", "fixture:users"),
    ("db:test_*", "db:test_orders", "db:test_orders"),
])
def test_state_shared_resource_fails(plan_of, sa, sb, resource):
    plan = plan_of(f"""
        packets:
          - {{id: a, state: ["{sa}"], prompt: x}}
          - {{id: b, state: ["{sb}"], prompt: x}}
        """)
    assert failures(plan) == [("state", "a", "b", resource)]
    fix = check(plan, use_git=False).failures[0].fix
    assert fix.startswith(f"give each its own {resource.split(':')[0]}")


@pytest.mark.parametrize(("sa", "sb"), [
    ("port:web", "port:web"),          # a named port is assigned to each unit on its own
    ("port:web", "port:8080"),
    ("ports:api", "port:api"),
])
def test_state_named_ports_never_collide(plan_of, sa, sb):
    plan = plan_of(f"""
        packets:
          - {{id: a, state: ["{sa}"], prompt: x}}
          - {{id: b, state: ["{sb}"], prompt: x}}
        """)
    assert failures(plan) == []


# --- order ----------------------------------------------------------------------------------

def test_order_reader_of_another_packets_output_fails(plan_of):
    plan = plan_of("""
        packets:
          - {id: gen, kind: code, owns: [api/openapi.yaml], prompt: x}
          - {id: client, kind: code, owns: [client/**], reads: [api/**], prompt: x}
        """)
    assert failures(plan) == [("order", "gen", "client", "api/openapi.yaml")]
    f = check(plan, use_git=False).failures[0]
    assert "client consumes the output of gen" in f.why
    assert f.fix.startswith("sequence them (after: [gen] in client)")


def test_order_reads_what_nobody_writes_passes(plan_of):
    plan = plan_of("""
        packets:
          - {id: gen, kind: code, owns: [api/openapi.yaml], reads: [docs/**], prompt: x}
          - {id: client, kind: code, owns: [client/**], reads: [api/v1/*.json], prompt: x}
        """)
    assert failures(plan) == []


def test_after_makes_a_sequence_that_passes_every_rule(plan_of):
    plan = plan_of("""
        packets:
          - {id: gen, kind: code, owns: [api/**], state: [port:8080], prompt: x}
          - {id: client, kind: code, owns: [api/**], reads: [api/**], state: [port:8080],
             base: other, after: [gen], prompt: x}
          - {id: docs, kind: code, owns: [docs/**], after: [client], prompt: x}
        """)
    report = check(plan, use_git=False)
    assert report.ok
    assert report.sequenced == [("gen", "client"), ("gen", "docs"), ("client", "docs")]
    assert report.lines() == ["OK pairs=3 packets=3 sequenced=3"]


def test_siblings_after_the_same_packet_still_run_side_by_side(plan_of):
    plan = plan_of("""
        packets:
          - {id: base, kind: code, owns: [core/**], prompt: x}
          - {id: a, kind: code, owns: [src/**], after: [base], prompt: x}
          - {id: b, kind: code, owns: [src/b/**], after: [base], prompt: x}
        """)
    assert failures(plan) == [("files", "a", "b", "src/b/**")]


# --- base -----------------------------------------------------------------------------------

def test_base_as_written_without_git(plan_of):
    plan = plan_of("""
        base: v1
        packets:
          - {id: a, kind: code, owns: [a/**], prompt: x}
          - {id: b, kind: code, owns: [b/**], prompt: x}
          - {id: c, kind: code, owns: [c/**], base: v2, prompt: x}
          - {id: r, base: v3, prompt: x}
        """)
    assert failures(plan) == [("base", "a", "c", "v1..v2"), ("base", "b", "c", "v1..v2")]
    fix = check(plan, use_git=False).failures[0].fix
    assert "same base" in fix and "after: [a] in c" in fix


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A real repository with two commits, a branch 'main' at the second and a tag 'v1'
    at the first."""
    r = tmp_path
    git(r, "init", "-q", "-b", "main")
    git(r, "config", "user.email", "t@example.com")
    git(r, "config", "user.name", "t")
    (r / "f.txt").write_text("1\n")
    git(r, "add", "f.txt")
    git(r, "commit", "-qm", "one")
    git(r, "tag", "v1")
    (r / "f.txt").write_text("2\n")
    git(r, "commit", "-qam", "two")
    return r


def test_base_resolved_with_git(repo, write):
    head = git(repo, "rev-parse", "HEAD")
    first = git(repo, "rev-parse", "v1")
    plan = load_plan(write("plan.yaml", f"""
        packets:
          - {{id: a, kind: code, owns: [a/**], prompt: x}}
          - {{id: b, kind: code, owns: [b/**], base: main, prompt: x}}
          - {{id: c, kind: code, owns: [c/**], base: '{head[:10]}', prompt: x}}
          - {{id: d, kind: code, owns: [d/**], base: v1, prompt: x}}
        """))
    report = check(plan)
    assert report.bases == {"a": head, "b": head, "c": head, "d": first}
    got = [(f.rule, f.a, f.b, f.value) for f in report.failures]
    short = f"{head[:12]}..{first[:12]}"
    assert got == [("base", "a", "d", short), ("base", "b", "d", short),
                   ("base", "c", "d", short)]


def test_base_that_is_not_a_commit_is_bad_input(repo, write):
    path = write("plan.yaml", """
        packets:
          - {id: a, kind: code, owns: [a/**], base: no-such-branch, prompt: x}
        """)
    with pytest.raises(UsageError) as info:
        check(load_plan(path))
    assert info.value.message.startswith(f"{path}:2: base 'no-such-branch' of packet 'a'")


# --- the command ----------------------------------------------------------------------------

BAD = """
packets:
  - {id: a, kind: code, owns: ["src/**/*.py"], state: [port:8080], prompt: x}
  - {id: b, kind: code, owns: ["src/api/*.py"], state: [port:8080], prompt: x}
  - {id: c, kind: code, owns: ["docs/*.md"], prompt: x}
"""


def test_cli_lines_and_exit_1(write, tmp_path):
    write("plan.yaml", BAD)
    r = prun("check", "plan.yaml", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith('FAIL files a b path=src/api/*.py why="a owns src/**/*.py and '
                               'b owns src/api/*.py" fix="group a and b into one packet')
    assert lines[1].startswith('FAIL state a b resource=port:8080 why=')
    assert lines[2] == "FAILED failures=2 pairs=3 packets=3 sequenced=0"
    assert r.stderr == ""


def test_cli_json(write, tmp_path):
    write("plan.yaml", BAD)
    r = prun("check", "--json", "plan.yaml", cwd=tmp_path)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["pairs"] == 3 and doc["packets"] == 3
    assert [(f["rule"], f["a"], f["b"], f["key"], f["value"]) for f in doc["failures"]] == [
        ("files", "a", "b", "path", "src/api/*.py"), ("state", "a", "b", "resource", "port:8080")]


def test_cli_ok_exit_0(write, tmp_path):
    write("plan.yaml", "packets:\n  - {id: a, prompt: x}\n  - {id: b, prompt: y}\n")
    r = prun("check", "plan.yaml", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "OK pairs=1 packets=2 sequenced=0\n")


def test_cli_bad_input_exit_2_names_file_and_line(write, tmp_path):
    write("plan.yaml", "packets:\n  - {id: a, prompt: x}\n  - {id: b, kind: coder, prompt: y}\n")
    r = prun("check", "plan.yaml", cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("prun: plan.yaml:3: packets[1].kind: 'coder' is not allowed")
    r = prun("check", "missing.yaml", cwd=tmp_path)
    assert r.returncode == 2 and "no such file" in r.stderr


def test_a_dotted_name_that_is_a_folder_counts_as_the_folder(plan_of, tmp_path):
    text = """
        packets:
          - {id: a, kind: code, owns: [conf.d], prompt: x}
          - {id: b, kind: code, owns: [conf.d/app.conf], prompt: x}
        """
    assert failures(plan_of(text)) == []          # 'conf.d' read as a file name
    (tmp_path / "conf.d").mkdir()
    assert failures(plan_of(text)) == [("files", "a", "b", "conf.d/app.conf")]


def test_may_write_is_what_a_diff_may_touch(plan_of):
    plan = plan_of("""
        packets:
          - {id: a, kind: code, owns: [src/a/**], generates: [gen/a.json], prompt: x}
          - {id: b, kind: code, owns: [src/b/**], shared: {pyproject.toml: a}, prompt: x}
        """)
    assert plan.may_write(plan.packet("a")) == ("src/a/**", "gen/a.json", "pyproject.toml")
    assert plan.may_write(plan.packet("b")) == ("src/b/**",)


def test_the_documented_example(tmp_path):
    """examples/independence/plan.yaml fails as docs/plans.md shows."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "independence" / "plan.yaml"
    r = prun("check", "--no-git", str(example), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    heads = [" ".join(line.split()[:5]) for line in r.stdout.splitlines()[:-1]]
    assert heads == ["FAIL files api models path=src/api/**/*.py",
                     "FAIL files api models path=pyproject.toml",
                     "FAIL state api models resource=port:8000",
                     "FAIL order api docs path=src/api/**",
                     "FAIL order models docs path=src/api/**/*.py"]
    assert r.stdout.splitlines()[-1] == "FAILED failures=5 pairs=3 packets=3 sequenced=0"

    # The fix the docs describe.
    import shutil

    fixed = tmp_path / "fixed"
    shutil.copytree(example.parent, fixed)
    models = fixed / "packets" / "models.md"
    models.write_text(models.read_text()
                      .replace('owns: ["src/**/*.py", pyproject.toml]', 'owns: ["src/models/**"]')
                      .replace("port:8000-8010", "port:8001-8010"))
    plan = fixed / "plan.yaml"
    plan.write_text(plan.read_text().replace("    reads: [src/api/**]\n",
                                             "    reads: [src/api/**]\n    after: [api, models]\n"))
    r = prun("check", "--no-git", str(plan), cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "OK pairs=3 packets=3 sequenced=2\n"), r.stdout


def test_plan_base_that_is_not_a_commit_names_the_plan_line(repo, write):
    path = write("plan.yaml", """
        name: x
        base: gone
        packets:
          - {id: a, kind: code, owns: [a/**], prompt: x}
        """)
    with pytest.raises(UsageError) as info:
        check(load_plan(path))
    assert info.value.message.startswith(f"{path}:2: base 'gone' of packet 'a'")
