"""`prun skill install|uninstall|show`: the skill written where each CLI discovers it, for
every target, into a temporary project and a temporary home; its files, its front matter
(parsed with a YAML parser), its links; current, outdated, edited and foreign copies."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import prun
from prun.cli import main
from prun.skill import bundle

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "skills" / "prun"
PROJECT_DIRS = {"claude": ".claude/skills/prun", "gemini": ".gemini/skills/prun",
                "agy": ".agents/skills/prun"}
USER_DIRS = {"claude": ".claude/skills/prun", "gemini": ".gemini/skills/prun",
             "agy": ".gemini/config/skills/prun"}
# the words a model matches a task against (the list)
KEYWORDS = ("parallel", "fan out", "independent units", "subagents", "agy", "Gemini", "Sonnet")


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "project"
    (p / "sub" / "dir").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(p)], check=True)
    return p


def run_prun(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def front_matter(text: str) -> dict:
    assert text.startswith("---\n"), "SKILL.md must open with YAML front matter"
    end = text.index("\n---\n", 4)
    data = yaml.safe_load(text[4:end])
    assert isinstance(data, dict)
    return data


def slug(heading: str) -> str:
    """A heading's anchor as GitHub and the CLIs' Markdown renderers make it."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def links_ok(folder: Path) -> list[str]:
    """Every relative link of every Markdown file in ``folder`` resolves to a file inside it
    (and its #anchor to a heading of that file). Returns the links checked."""
    checked = []
    for md in folder.rglob("*.md"):
        text = md.read_text(encoding="utf-8")
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve() if path else md.resolve()
            assert dest.is_file(), f"{md.relative_to(folder)}: link {target} is broken"
            assert folder.resolve() in dest.parents, f"{target} leaves the skill's folder"
            if anchor:
                headings = {slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(),
                                                           re.M)}
                assert anchor in headings, f"{md.relative_to(folder)}: no heading #{anchor}"
            checked.append(f"{md.relative_to(folder)} -> {target}")
    return checked


def check_installed(folder: Path) -> None:
    shipped = bundle.files(SHIPPED)
    installed = bundle.files(folder)
    manifest = json.loads(installed.pop(".prun-skill.json"))
    assert installed == shipped, "the installed files are the shipped ones, byte for byte"
    assert manifest["files"] == bundle.hashes(shipped)
    assert manifest["bundle"] == bundle.bundle_digest(bundle.hashes(shipped))
    for rel in shipped:
        if rel.startswith("scripts/") and rel.endswith((".sh", ".py")):
            assert (folder / rel).stat().st_mode & stat.S_IXUSR, f"{rel} is not executable"
    meta = front_matter((folder / "SKILL.md").read_text(encoding="utf-8"))
    assert meta["name"] == "prun" == folder.name
    desc = meta["description"]
    assert isinstance(desc, str) and 0 < len(desc) <= 1024
    for word in KEYWORDS:
        assert word.lower() in desc.lower(), f"the description does not say {word!r}"
    assert len(links_ok(folder)) >= 6, "SKILL.md links its reference files"


@pytest.mark.parametrize("target", ["claude", "gemini", "agy"])
def test_install_into_a_project_and_a_home_for_each_target(target, home, project, capsys,
                                                            monkeypatch):
    monkeypatch.chdir(project / "sub" / "dir")  # the project defaults to the repository root
    code, out, err = run_prun(capsys, "skill", "install", "--for", target)
    folder = project / PROJECT_DIRS[target]
    rel = "/" + PROJECT_DIRS[target].strip("/") + "/"
    assert (code, err) == (0, f"prun: note: created {folder}; git does not track or ignore "
                              f"{rel}: commit it to share with the project, or add to "
                              f".gitignore: {rel}\n")
    assert out.startswith(f"INSTALLED for={target} scope=project files=")
    assert out.rstrip().endswith(f"path={folder}")
    check_installed(folder)

    code, out, _ = run_prun(capsys, "skill", "install", "--for", target, "--user")
    assert code == 0 and out.startswith(f"INSTALLED for={target} scope=user")
    check_installed(home / USER_DIRS[target])

    code, out, _ = run_prun(capsys, "skill", "show", "--for", target)
    assert code == 0
    lines = out.splitlines()
    assert lines[-1] == "SKILLS installed=2 current=2 outdated=0 edited=0 foreign=0"
    assert {re.search(r"scope=(\w+)", line).group(1) for line in lines[:-1]} == \
        {"project", "user"}
    assert all("state=current" in line for line in lines[:-1])


def test_installing_again_is_a_no_op_and_an_outdated_copy_is_updated(home, project, capsys):
    args = ("skill", "install", "--for", "claude", "--project", str(project))
    assert run_prun(capsys, *args)[0] == 0
    folder = project / PROJECT_DIRS["claude"]
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*")}
    code, out, _ = run_prun(capsys, *args)
    assert code == 0 and out.startswith("UNCHANGED for=claude scope=project")
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*")} == before

    # a copy another prun wrote: its files are the ones recorded, the bundle is not this one's
    manifest = folder / ".prun-skill.json"
    data = json.loads(manifest.read_text())
    data["bundle"], data["prun"] = "0" * 64, "0.0.1"
    manifest.write_text(json.dumps(data))
    code, out, _ = run_prun(capsys, "skill", "show", "--project", str(project))
    assert "state=outdated version=0.0.1" in out
    code, out, _ = run_prun(capsys, *args)
    assert code == 0 and out.startswith("UPDATED for=claude")
    check_installed(folder)


def test_an_edited_skill_is_never_overwritten_without_force(home, project, capsys):
    args = ("skill", "install", "--for", "gemini", "--project", str(project))
    run_prun(capsys, *args)
    folder = project / PROJECT_DIRS["gemini"]
    skill_md = folder / "SKILL.md"
    skill_md.write_text(skill_md.read_text() + "\nOur own note.\n")
    (folder / "references" / "ours.md").write_text("ours\n")

    code, out, _ = run_prun(capsys, "skill", "show", "--project", str(project))
    assert "state=edited" in out and "changed=SKILL.md,references/ours.md" in out
    code, out, err = run_prun(capsys, *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("prun: the skill at ")
    assert "was edited since it was installed (SKILL.md, references/ours.md)" in err
    assert "(keep your copy, or pass --force to overwrite it)" in err
    assert skill_md.read_text().endswith("Our own note.\n"), "nothing was written"
    code, out, err = run_prun(capsys, "skill", "uninstall", "--for", "gemini", "--project",
                              str(project))
    assert code == 2 and "pass --force to remove it" in err and skill_md.exists()

    code, out, _ = run_prun(capsys, *args, "--force")
    assert code == 0 and out.startswith("REPLACED for=gemini")
    check_installed(folder)
    assert not (folder / "references" / "ours.md").exists()
    assert not [p for p in folder.parent.iterdir() if p.name != "prun"], "no temp folder left"


def test_a_prun_folder_prun_did_not_write_is_left_alone(home, project, capsys):
    folder = project / PROJECT_DIRS["agy"]
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: prun\ndescription: mine\n---\n")
    code, out, err = run_prun(capsys, "skill", "install", "--for", "agy", "--project",
                              str(project))
    assert code == 2 and "holds a prun skill that prun did not install" in err
    assert (folder / "SKILL.md").read_text().endswith("mine\n---\n")
    code, out, _ = run_prun(capsys, "skill", "show", "--project", str(project), "--json")
    shown = json.loads(out)
    assert [(c["for"], c["state"]) for c in shown["installed"]] == [("agy", "foreign")]


def test_uninstall_removes_only_the_skill(home, project, capsys):
    other = project / ".claude" / "skills" / "other"
    other.mkdir(parents=True)
    (other / "SKILL.md").write_text("---\nname: other\ndescription: x\n---\n")
    run_prun(capsys, "skill", "install", "--for", "claude", "--project", str(project))
    code, out, _ = run_prun(capsys, "skill", "uninstall", "--for", "claude", "--project",
                            str(project))
    assert code == 0 and out.startswith("REMOVED for=claude scope=project")
    assert not (project / PROJECT_DIRS["claude"]).exists() and other.is_dir()
    code, out, _ = run_prun(capsys, "skill", "uninstall", "--for", "claude", "--project",
                            str(project))
    assert code == 0 and out.startswith("ABSENT for=claude")
    code, out, _ = run_prun(capsys, "skill", "show", "--project", str(project))
    assert out == "SKILLS installed=0 current=0 outdated=0 edited=0 foreign=0\n"


def test_outside_a_repository_the_project_must_be_named(home, tmp_path, capsys, monkeypatch):
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.chdir(outside)
    code, out, err = run_prun(capsys, "skill", "install", "--for", "claude")
    assert (code, out) == (2, "")
    assert err == ("prun: this folder is not inside a git repository "
                   "(give --project DIR, or --user for your home folder)\n")
    assert not (outside / ".claude").exists()
    code, _, err = run_prun(capsys, "skill", "install", "--for", "claude", "--project",
                            str(outside / "missing"))
    assert code == 2 and err.startswith("prun: --project ") and "not a folder" in err


def test_the_installed_scripts_run_from_where_they_were_installed(home, project):
    """The scripts find prun the way the seed's wrappers do: prun on PATH, else python."""
    env = {"HOME": str(home), "PATH": os.path.dirname(sys.executable) + os.pathsep
           + os.environ.get("PATH", "")}
    p = prun("skill", "install", "--for", "agy", "--project", str(project), env=env)
    assert p.returncode == 0, p.stderr
    scripts = project / PROJECT_DIRS["agy"] / "scripts"
    d = subprocess.run([sys.executable, str(scripts / "dispatch-task-agy.py"), "--help"],
                       capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert d.returncode == 0 and "--prompt-file" in d.stdout
    m = subprocess.run([str(scripts / "monitor.sh"), "--help"], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=60)
    assert m.returncode == 0 and "STATE_DIR" in m.stdout


def test_skill_md_stays_short_and_names_real_commands_and_flags(capsys):
    """Progressive disclosure: SKILL.md is short and links the details; every `prun ...`
    command line in the skill names a real command, and every --flag one it takes."""
    text = (SHIPPED / "SKILL.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 300
    links = links_ok(SHIPPED)
    for ref in sorted((SHIPPED / "references").glob("*.md")):
        assert any(f"references/{ref.name}" in link for link in links), f"{ref.name} unlinked"
    from prun.cli import COMMANDS

    helps: dict[tuple[str, ...], str] = {}
    uses = 0
    for md in [SHIPPED / "SKILL.md", *sorted((SHIPPED / "references").glob("*.md"))]:
        body = md.read_text(encoding="utf-8")
        blocks = "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", body, re.S | re.M))
        spans = re.findall(r"`(prun [^`]+)`", body) + re.findall(r"^(prun [^\n]+)$", blocks,
                                                                 re.M)
        for span in spans:
            words = span.split()
            command = words[1]
            if command.startswith("-"):  # prun --help
                continue
            assert command in COMMANDS, f"{md.name}: `{span}` names no prun command"
            key = (command, words[2]) if command in ("packet", "skill", "mcp") and \
                len(words) > 2 and not words[2].startswith("-") else (command,)
            if key not in helps:
                main([*key, "--help"])
                helps[key] = capsys.readouterr().out
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", span):
                assert flag in helps[key], f"{md.name}: `{span}`: prun {' '.join(key)} " \
                    f"has no {flag}"
            uses += 1
    assert uses > 40
