"""`prun packet new`: a template that explains every field and loads once filled in."""

from __future__ import annotations

import json
import re
from importlib.resources import files

from helpers import prun
from prun.plan import load_packet, load_plan


def test_template_loads_as_written(tmp_path):
    r = prun("packet", "new", "my-unit", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "PACKET my-unit.md\n"
    p = load_packet(tmp_path / "my-unit.md")
    assert p.id == "my-unit" and p.kind == "read-only" and p.timeout_s == 45 * 60
    assert p.requires == ("Summary", "Verification", "Open items")


def test_template_mentions_every_field():
    schema = json.loads(files("prun.plan").joinpath("schemas/packet.schema.json").read_text())
    text = files("prun.plan").joinpath("templates/packet.md").read_text()
    front = text.split("\n---\n")[0]
    for name in schema["properties"]:
        if name in ("prompt", "prompt_file"):
            continue
        assert re.search(rf"^#? ?{name}:", front, re.M), f"template does not explain {name}"
    for name in schema["properties"]["data"]["properties"]:
        assert f"{name}:" in front


def test_filled_in_template_round_trips_through_a_plan_and_check(tmp_path):
    r = prun("packet", "new", "api", "-o", "packets/api.md", cwd=tmp_path)
    assert r.returncode == 2 and "folder does not exist" in r.stderr
    (tmp_path / "packets").mkdir()
    for pid, owned in (("api", "src/api/**"), ("web", "web/**")):
        r = prun("packet", "new", pid, "--kind", "code", "-o", f"packets/{pid}.md",
                 cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        path = tmp_path / "packets" / f"{pid}.md"
        text = path.read_text()
        text = text.replace("owns: []", f"owns: [{owned}]")
        text = text.replace("state: []", f"state: [port:{8000 if pid == 'api' else 9000}]")
        text = text.replace("TODO: state the task:", f"Build the {pid} part:")
        path.write_text(fill_in(text))
    (tmp_path / "plan.yaml").write_text("packets: [packets/*.md]\n")
    plan = load_plan(tmp_path / "plan.yaml")
    assert plan.ids == ("api", "web")
    assert plan.packet("api").kind == "code" and plan.packet("api").owns == ("src/api/**",)
    r = prun("check", "--no-git", "plan.yaml", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "OK pairs=1 packets=2 sequenced=0\n"), r.stderr


def fill_in(text: str) -> str:
    """The template with its front matter's placeholders written over."""
    return (text.replace('"TODO: what this unit does, and what it must not touch"', "one part")
            .replace('["TODO: the repository, public web"]', "[the repository]")
            .replace('["TODO: credentials, personal data"]', "[credentials]")
            .replace('"TODO: results kept with the run; scratch removed after integration"',
                     "keep"))


def test_half_written_packet_is_refused_by_check_and_run(tmp_path):
    """A packet still holding the template's placeholders is refused by `prun check` and
    `prun run`, each naming the file, line and field, and nothing is made."""
    assert prun("packet", "new", "todo", cwd=tmp_path).returncode == 0
    (tmp_path / "plan.yaml").write_text("packets: [todo.md]\n")
    text = (tmp_path / "todo.md").read_text()
    scope_line = text.splitlines().index(
        'scope: "TODO: what this unit does, and what it must not touch"') + 1
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["check", "--no-git", "plan.yaml"], ["run", "plan.yaml"]):
        r = prun(*args, cwd=tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert r.stdout == ""
        assert r.stderr.startswith(f"prun: half-written packet: todo.md:{scope_line}: scope "
                                   "starts with TODO: (and 4 more) ("), r.stderr
        assert len(r.stderr.splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # the front matter filled in: the body is named next, unchanged, then its TODO: line
    (tmp_path / "todo.md").write_text(fill_in(text))
    body_line = fill_in(text).splitlines().index("---", 1) + 2
    r = prun("check", "--no-git", "plan.yaml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"todo.md:{body_line}: body is the template's text, unchanged (" in r.stderr
    (tmp_path / "todo.md").write_text(fill_in(text) + "Then:\n\nTODO: the second half\n")
    r = prun("check", "--no-git", "plan.yaml", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"todo.md:{body_line}: body starts a line with TODO: (and 1 more)" in r.stderr
    (tmp_path / "todo.md").write_text(fill_in(text).replace("TODO: state the task", "Count"))
    r = prun("check", "--no-git", "plan.yaml", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "OK pairs=0 packets=1 sequenced=0\n"), r.stderr


def test_template_body_fits_under_the_brief():
    """The body goes under the brief's `## Task`: no heading of its own at that level or
    above, and none of the rules and result line the brief already gives."""
    from prun.plan import template

    body = template.body()
    assert not re.search(r"^#{1,2} ", body, re.M)
    assert "Working rules" not in body and "in one write" not in body


def test_refuses_to_overwrite(tmp_path):
    (tmp_path / "x.md").write_text("mine\n")
    r = prun("packet", "new", "x", cwd=tmp_path)
    assert r.returncode == 2
    assert "x.md exists; not overwriting it" in r.stderr
    assert (tmp_path / "x.md").read_text() == "mine\n"


def test_print_to_stdout_and_bad_id(tmp_path):
    r = prun("packet", "new", "p1", "-o", "-", cwd=tmp_path)
    assert r.returncode == 0 and "\nid: p1\n" in r.stdout
    assert list(tmp_path.iterdir()) == []
    r = prun("packet", "new", "../evil", cwd=tmp_path)
    assert r.returncode == 2 and "bad unit id" in r.stderr
