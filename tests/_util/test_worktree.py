"""``base: worktree``'s commit: the working tree as it is, made without touching the person's
branch, index, stash list or refs; a clean tree is HEAD; what is uncommitted, counted."""

from __future__ import annotations

import subprocess

from prun._util.worktree import uncommitted, worktree_commit


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


def untouched(repo) -> tuple[str, ...]:
    """What the person's repository shows of its branch, index, stash and refs."""
    return (git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD"),
            git(repo, "for-each-ref"), git(repo, "stash", "list"), git(repo, "status",
                                                                        "--porcelain"),
            git(repo, "diff", "--cached"), (repo / ".git" / "index").read_bytes().hex())


def test_a_clean_tree_is_head(repo):
    assert uncommitted(repo) == 0
    assert worktree_commit(repo) == git(repo, "rev-parse", "HEAD").strip()


def test_the_tree_as_it_is_on_top_of_head_and_nothing_of_the_persons_moves(repo):
    head = git(repo, "rev-parse", "HEAD").strip()
    (repo / "README").write_text("edited, not staged\n")
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")
    (repo / "staged.txt").write_text("staged, then edited again\n")
    (repo / "new.txt").write_text("untracked\n")
    (repo / ".gitignore").write_text("ignored.txt\n")
    (repo / "ignored.txt").write_text("ignored\n")
    before = untouched(repo)
    assert uncommitted(repo) == 4        # README, staged.txt, new.txt, .gitignore

    commit = worktree_commit(repo)
    assert untouched(repo) == before
    assert git(repo, "rev-parse", f"{commit}^").strip() == head
    assert git(repo, "show", f"{commit}:README") == "edited, not staged\n"
    assert git(repo, "show", f"{commit}:staged.txt") == "staged, then edited again\n"
    assert git(repo, "show", f"{commit}:new.txt") == "untracked\n"
    assert "ignored.txt" not in git(repo, "ls-tree", "--name-only", commit)
    assert worktree_commit(repo) == commit, "the same tree is the same commit"
