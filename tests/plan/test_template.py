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
        text = text.replace("TODO: state the task.", f"Build the {pid} part.")
        path.write_text(text)
    (tmp_path / "plan.yaml").write_text("packets: [packets/*.md]\n")
    plan = load_plan(tmp_path / "plan.yaml")
    assert plan.ids == ("api", "web")
    assert plan.packet("api").kind == "code" and plan.packet("api").owns == ("src/api/**",)
    r = prun("check", "--no-git", "plan.yaml", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "OK pairs=1 packets=2 sequenced=0\n"), r.stderr


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
