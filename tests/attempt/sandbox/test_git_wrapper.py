"""The git wrapper on a worker's PATH, run for real against real repositories: every refused
command leaves the repository as it was and says so in one line; everything else is git."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from prun.hooks.git_wrapper import git_wrapper_dir

REAL_GIT = shutil.which("git")
IDENT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
         "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def real(cwd: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([REAL_GIT, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **IDENT}, **kw)


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """A worker's environment: the wrapper first on PATH."""
    folder = git_wrapper_dir(str(tmp_path / "state"))
    return {**os.environ, **IDENT, "PATH": folder + os.pathsep + os.environ["PATH"]}


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> Path:
    """A repository with history, a branch, a tag, a stash entry, edits and an untracked file:
    something for every refused command to destroy."""
    root = tmp_path_factory.mktemp("template") / "clone"
    root.mkdir()
    real(root, "init", "-q", "-b", "main")
    for n in range(3):
        (root / "f.txt").write_text(f"version {n}\n")
        real(root, "add", "f.txt")
        real(root, "commit", "-q", "-m", f"c{n}")
    real(root, "tag", "v1")
    real(root, "branch", "other", "HEAD~1")
    (root / "f.txt").write_text("stashed edit\n")
    real(root, "stash", "-q")
    (root / "f.txt").write_text("the worker's edit\n")
    (root / "new.txt").write_text("untracked work\n")
    (root / "sub").mkdir()
    real(root, "status", "-s")        # index stat data refreshed once, here
    return root


@pytest.fixture
def repo(template, tmp_path) -> Path:
    return Path(shutil.copytree(template, tmp_path / "clone", symlinks=True))


def state(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and folder of the work tree and of .git, byte for byte: a refused command
    runs no git that could write anything."""
    found = {}
    for p in sorted(root.rglob("*")):
        found[str(p.relative_to(root))] = (p.lstat().st_mode,
                                           p.read_bytes() if p.is_file() else b"")
    return found


def wrapped(root: Path, env, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60, **kw)


REFUSED = [
    ["commit", "-am", "x"],
    ["-c", "core.hooksPath=/dev/null", "commit", "--no-verify", "-am", "x"],
    ["-C", ".", "--no-pager", "commit", "-am", "x"],
    ["--git-dir=.git", "--work-tree=.", "commit", "-am", "x"],
    ["-c", "alias.ci=commit", "ci", "-am", "x"],
    ["branch", "feature"], ["branch", "-D", "other"], ["branch", "-m", "main", "renamed"],
    ["branch", "-f", "other", "HEAD"],
    ["tag", "v2"], ["tag", "-d", "v1"], ["tag", "-a", "-m", "x", "v3"],
    ["checkout", "-b", "topic"], ["switch", "-c", "topic"],
    ["reset", "--hard"], ["reset", "--hard", "HEAD~1"],
    ["clean", "-fd"], ["clean", "-fdx"],
    ["checkout", "--", "f.txt"], ["checkout", "."], ["checkout", "f.txt"],
    ["checkout", "HEAD", "f.txt"], ["checkout", "-f", "other"],
    ["restore", "f.txt"], ["restore", "--worktree", "--staged", "f.txt"], ["restore", "."],
    ["switch", "--discard-changes", "other"],
    ["stash", "drop"], ["stash", "clear"],
    ["merge", "other"], ["rebase", "other"], ["cherry-pick", "other"], ["revert", "HEAD"],
    ["am", "/dev/null"], ["update-ref", "refs/heads/main", "HEAD~1"],
    ["update-ref", "-d", "refs/tags/v1"], ["filter-branch", "-f", "HEAD"],
    ["pull"],
]


@pytest.mark.parametrize("args", REFUSED, ids=" ".join)
def test_refused_commands_change_nothing_and_say_so_in_one_line(repo, env, args):
    before = state(repo)
    p = wrapped(repo, env, *args)
    assert p.returncode == 1
    assert p.stdout == ""
    assert p.stderr.startswith("prun: git ") and p.stderr.count("\n") == 1, p.stderr
    assert "is refused here" in p.stderr
    assert state(repo) == before


def test_push_to_the_real_repository_by_file_url_is_refused(tmp_path, repo, env):
    target = tmp_path / "real"
    real(tmp_path, "clone", "-q", "--bare", str(repo), str(target))
    before = real(target, "for-each-ref").stdout
    (repo / "f.txt").write_text("committed behind the hooks' back\n")
    real(repo, "-c", "core.hooksPath=/dev/null", "commit", "-qam", "sneaky")
    p = wrapped(repo, env, "-c", "protocol.allow=always", "-c", "core.hooksPath=/dev/null",
                "push", "--no-verify", f"file://{target}", "HEAD:refs/heads/main")
    assert p.returncode == 1 and p.stderr.startswith("prun: git push is refused")
    assert real(target, "for-each-ref").stdout == before


def test_a_configured_alias_is_resolved_before_it_runs(repo, env):
    real(repo, "config", "alias.ci", "commit -a")
    real(repo, "config", "alias.sh-push", "!git push origin")
    real(repo, "config", "alias.ci2", "ci")           # an alias of an alias
    real(repo, "config", "alias.st", "status --short")
    before = state(repo)
    for alias in ("ci", "sh-push", "ci2"):
        p = wrapped(repo, env, alias, "-m", "x")
        assert p.returncode == 1 and p.stderr.startswith("prun: git "), (alias, p.stderr)
    assert state(repo) == before
    p = wrapped(repo, env, "st")
    assert (p.returncode, p.stdout) == (0, real(repo, "status", "--short").stdout)


ALLOWED = [
    ["status"], ["status", "--porcelain"], ["diff"], ["diff", "--stat", "HEAD~1"],
    ["log", "--oneline"], ["branch", "--list"], ["branch"], ["tag", "-l"], ["stash", "list"],
    ["show", "--stat", "v1"], ["rev-parse", "HEAD"], ["clean", "-n"], ["clean", "--dry-run", "-d"],
    ["--version"], ["rev-parse", "--verify", "no-such-ref"], ["log", "no-such-ref"],
    ["-C", "sub", "status", "--short"],
]


@pytest.mark.parametrize("args", ALLOWED, ids=" ".join)
def test_allowed_commands_are_git_itself(repo, env, args):
    got = wrapped(repo, env, *args)
    direct = real(repo, *args)
    assert (got.returncode, got.stdout, got.stderr) == \
        (direct.returncode, direct.stdout, direct.stderr)


def test_allowed_changes_work(repo, env):
    (repo / "g.txt").write_text("more\n")
    assert wrapped(repo, env, "add", "g.txt").returncode == 0
    assert "A  g.txt" in real(repo, "status", "--porcelain").stdout
    assert wrapped(repo, env, "restore", "--staged", "g.txt").returncode == 0
    assert "?? g.txt" in real(repo, "status", "--porcelain").stdout
    assert wrapped(repo, env, "stash", "-q").returncode == 0
    assert len(real(repo, "stash", "list").stdout.splitlines()) == 2
    assert wrapped(repo, env, "stash", "pop", "-q").returncode == 0
    assert (repo / "f.txt").read_text() == "the worker's edit\n"
    assert wrapped(repo, env, "reset", "-q").returncode == 0


def test_checking_out_a_commit_without_paths_works(repo, env):
    wrapped(repo, env, "stash", "-q", "-u")
    previous = real(repo, "rev-parse", "HEAD~1").stdout
    p = wrapped(repo, env, "checkout", "-q", "HEAD~1")
    assert p.returncode == 0, p.stderr
    assert real(repo, "rev-parse", "HEAD").stdout == previous
    assert wrapped(repo, env, "checkout", "-q", "main", "--").returncode == 0


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
def test_git_and_what_it_runs_get_the_signal_dispositions_they_would_without_it(repo, env):
    args = ["-c", "alias.sigs=!grep -E 'SigIgn|SigBlk' /proc/self/status", "sigs"]
    assert wrapped(repo, env, *args).stdout == real(repo, *args).stdout != ""


def test_stdin_reaches_git_unchanged(repo, env):
    data = "some blob\n" * 1000
    got = wrapped(repo, env, "hash-object", "--stdin", input=data)
    assert got.stdout == real(repo, "hash-object", "--stdin", input=data).stdout != ""


def test_a_refusal_is_logged_in_the_state_dir(repo, env, tmp_path):
    sd = tmp_path / "sd"
    sd.mkdir()
    wrapped(repo, {**env, "PRUN_STATE_DIR": str(sd)}, "push", "--force")
    assert json.loads((sd / "guard.log").read_text()) == {"refused": "git push",
                                                           "command": "git push --force"}


def test_the_folder_is_made_once_and_never_wraps_itself(tmp_path, env, monkeypatch):
    first = git_wrapper_dir(str(tmp_path / "state"))
    assert sorted(os.listdir(first)) == ["git"]
    assert os.access(os.path.join(first, "git"), os.X_OK)
    monkeypatch.setenv("PATH", env["PATH"])     # the wrapper already first on PATH
    assert git_wrapper_dir(str(tmp_path / "state")) == first
    assert os.listdir(tmp_path / "state" / "git-wrapper") == [os.path.basename(first)]
    other = git_wrapper_dir(str(tmp_path / "other-state"))   # made while a wrapper is on PATH
    p = subprocess.run(["git", "--version"], env={**env, "PATH": other + os.pathsep + env["PATH"]},
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("git version")


def test_without_a_git_to_wrap_the_error_says_so(tmp_path, monkeypatch):
    from prun.errors import LaunchError

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LaunchError):
        git_wrapper_dir(str(tmp_path / "state"))
