"""A unit's private home: its agent CLI's configuration and credentials copied in from the
person's home (bounded: no sessions, caches or history, no link followed out, nothing but
regular files, nothing huge), its HOME and temporary folder in its own state dir, the person's
files never written, and a follow-up that resumes a conversation back in the same home."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from .conftest import Unit


def tree(root: Path) -> dict[str, tuple[int, bytes]]:
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(folder, name)
            found[str(p.relative_to(root))] = (p.lstat().st_mode,
                                               b"" if p.is_dir() or p.is_symlink() or not p.is_file()
                                               else p.read_bytes())
    return found


def claude_home(root: Path) -> Path:
    """A person's home as Claude Code leaves it: its settings and credentials, sessions of many
    projects, caches, a link to a file elsewhere, a FIFO and a huge (sparse) file."""
    home = root / "person"
    claude = home / ".claude"
    for folder in ("projects/-some-project", "todos", "statsig", "skills/review", "cache"):
        (claude / folder).mkdir(parents=True)
    (home / ".claude.json").write_text('{"oauthAccount": {"emailAddress": "p@example.com"}}\n')
    (claude / ".credentials.json").write_text('{"claudeAiOauth": {"accessToken": "tok"}}\n')
    (claude / ".credentials.json").chmod(0o600)
    (claude / "settings.json").write_text('{"model": "sonnet"}\n')
    (claude / "CLAUDE.md").write_text("the person's memory\n")
    (claude / "skills" / "review" / "SKILL.md").write_text("a skill\n")
    (claude / "projects" / "-some-project" / "s.jsonl").write_text("another project's session\n")
    (claude / "todos" / "t.json").write_text("[]\n")
    (claude / "cache" / "c").write_text("cached\n")
    (claude / "history.jsonl").write_text("everything the person typed\n")
    (root / "elsewhere.txt").write_text("a file outside the folder\n")
    (claude / "linked.txt").symlink_to(root / "elsewhere.txt")
    os.mkfifo(claude / "a-fifo")
    with open(claude / "huge.bin", "wb") as f:
        f.truncate(40 << 20)                                  # 40 MiB, sparse
    (home / ".bashrc").write_text("# the person's profile\n")
    return home


@pytest.mark.parametrize("sandbox", ["off", "on"])
def test_claude_finds_its_configuration_as_copies_in_its_own_home(fake_claude, tmp_path,
                                                                 monkeypatch, sandbox, request):
    if sandbox == "on":
        request.getfixturevalue("bwrap")
    home = claude_home(tmp_path)
    before = tree(home)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("FAKE_CLAUDE_SCENARIO", "bash")
    monkeypatch.setenv("FAKE_CLAUDE_BASH", 'echo "$HOME|$TMPDIR|$PRUN_SUBDISPATCH" > seen.txt; '
                       'echo refreshed > "$HOME/.claude/.credentials.json"')
    unit = Unit(tmp_path, "claude")
    p = unit.dispatch("--sandbox", sandbox, timeout=120)
    assert p.returncode == 0, p.stderr
    state = unit.state
    own = state / "home"
    assert (state / "work" / "seen.txt").read_text() == f"{own}|{state / 'tmp'}|off\n"
    copied = sorted(str(p.relative_to(own)) for p in own.rglob("*"))
    assert copied == [".claude", ".claude.json", ".claude/.credentials.json", ".claude/CLAUDE.md",
                      ".claude/settings.json", ".claude/skills", ".claude/skills/review",
                      ".claude/skills/review/SKILL.md"], copied
    assert stat.S_IMODE((own / ".claude" / ".credentials.json").stat().st_mode) == 0o600
    assert (own / ".claude" / ".credentials.json").read_text() == "refreshed\n"   # the copy
    assert "huge.bin is not copied into units' homes: it is larger than 32 MiB" in p.stderr
    assert tree(home) == before                          # the person's own files, untouched
    assert json.loads((state / "unit.json").read_text())["home"] == str(own)


def test_a_config_folder_the_person_names_is_copied_and_named_again(fake_claude, tmp_path,
                                                                    monkeypatch):
    config = tmp_path / "claude-config"
    config.mkdir()
    (config / ".claude.json").write_text('{"from": "the config folder"}\n')
    (config / "settings.json").write_text("{}\n")
    monkeypatch.setenv("HOME", str(tmp_path / "person"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    monkeypatch.setenv("FAKE_CLAUDE_SCENARIO", "bash")
    monkeypatch.setenv("FAKE_CLAUDE_BASH", 'echo "$CLAUDE_CONFIG_DIR" > seen.txt')
    unit = Unit(tmp_path, "claude")
    p = unit.dispatch(timeout=120)
    assert p.returncode == 0, p.stderr
    copy = unit.state / "home" / ".claude"
    assert (unit.state / "work" / "seen.txt").read_text() == f"{copy}\n"
    assert (copy / ".claude.json").read_text() == '{"from": "the config folder"}\n'
    assert sorted(os.listdir(copy)) == [".claude.json", "settings.json"]


def test_gemini_finds_its_settings_under_the_home_the_person_names(fake_gemini, tmp_path,
                                                                   monkeypatch):
    elsewhere = tmp_path / "gemini-home"
    (elsewhere / ".gemini" / "tmp" / "some-project").mkdir(parents=True)
    (elsewhere / ".gemini" / "settings.json").write_text('{"security": {}}\n')
    (elsewhere / ".gemini" / "oauth_creds.json").write_text("{}\n")
    (elsewhere / ".gemini" / "tmp" / "some-project" / "chat.jsonl").write_text("a session\n")
    monkeypatch.setenv("GEMINI_CLI_HOME", str(elsewhere))
    unit = Unit(tmp_path, "gemini")
    p = unit.dispatch(timeout=120)
    assert p.returncode == 0, p.stderr
    own = unit.state / "home"
    assert sorted(str(p.relative_to(own)) for p in own.rglob("*")) == [
        ".gemini", ".gemini/oauth_creds.json", ".gemini/settings.json"]


def test_a_command_unit_gets_an_empty_home_and_its_own_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(claude_home(tmp_path)))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "person" / ".config"))
    unit = Unit(tmp_path, "command")
    p = unit.dispatch("--command", "sh -c 'echo \"$HOME|$TMPDIR|${XDG_CONFIG_HOME:-unset}\"; "
                      "ls -A \"$HOME\"'", timeout=120)
    assert p.returncode == 0, p.stderr
    state = unit.state
    assert unit.result.read_text() == f"{state / 'home'}|{state / 'tmp'}|unset\n"


def test_a_follow_up_resumes_in_the_home_of_the_attempt_it_continues(fake_claude, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "person"))
    unit = Unit(tmp_path, "claude")
    assert unit.dispatch(timeout=120).returncode == 0
    first = unit.state
    (first / "home" / "notes").write_text("what the CLI kept of the first turn\n")
    p = unit.dispatch("--continue-from", str(first), timeout=120, env={
        "FAKE_CLAUDE_SCENARIO": "bash", "FAKE_CLAUDE_BASH": 'cat "$HOME/notes" > seen.txt'})
    assert p.returncode == 0, p.stderr
    second = unit.state
    # the home moved on with the conversation: each attempt's is in its own state dir
    assert json.loads((second / "unit.json").read_text())["home"] == str(second / "home")
    assert (second / "home" / "notes").exists() and not (first / "home").exists()
    assert (first / "work" / "seen.txt").read_text() == "what the CLI kept of the first turn\n"
