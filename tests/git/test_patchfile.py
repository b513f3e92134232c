"""prun's reading of a patch agrees with git's, file by file, whatever the names (a unit
chooses them): spaces, quotes, tabs, newlines, control bytes, `` b/`` inside a name; text,
binary, empty, renamed, mode-changed, deleted files and links."""

from __future__ import annotations

import os
import subprocess

from gitrepo import commit_all, g, write

from prun.git.patchfile import blocks

NAMES = ["a b.txt", " lead.txt", "trail .txt", "x b/x b.txt", 'q"uote.txt', "back\\slash.txt",
         "tab\there.txt", "new\nline.txt", "ü.txt", "\x01ctrl.txt", "-dash.txt",
         "dir with space/in b/side.txt"]


def test_each_block_names_the_paths_and_modes_git_reads(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    g(root, "init", "-q", "-b", "main")
    write(root, {"old name.txt": "same\n" * 20, "mode me.sh": "echo\n", "gone away.txt": "x\n",
                 "was file": "f\n"})
    commit_all(root, "base")
    write(root, {name: f"text of {name!r}\n" for name in NAMES})
    write(root, {"bin ary b/x.bin": bytes(range(256)) * 8, "empty new.txt": ""})
    os.rename(root / "old name.txt", root / "new name.txt")
    os.chmod(root / "mode me.sh", 0o755)
    os.unlink(root / "gone away.txt")
    os.unlink(root / "was file")
    os.symlink("a b.txt", root / "was file")
    (root / "link b").mkdir()
    os.symlink("../out side", root / "link b/to")
    g(root, "add", "-A")
    patch = g(root, "diff", "--cached", "-M", "--binary", "--full-index", "HEAD").stdout

    parts = blocks(patch)
    listed = subprocess.run(["git", "-C", str(root), "apply", "--numstat", "-z", "-"],
                            input=patch, capture_output=True, check=True).stdout
    git_paths = [e.split(b"\t", 2)[2].decode("utf-8", "surrogateescape")
                 for e in listed.split(b"\0") if e.count(b"\t") >= 2]
    assert [b.path for b in parts] == git_paths
    by_path = {}
    for b in parts:
        by_path.setdefault(b.path, []).append(b)
    for name in NAMES:
        (b,) = by_path[name]
        assert (b.old_path, b.new_path, b.new_mode) == (None, name, "100644")
        assert patch[b.start:b.end].startswith(b"diff --git ")
    (renamed,) = by_path["new name.txt"]
    assert renamed.old_path == "old name.txt"
    (mode,) = by_path["mode me.sh"]
    assert (mode.old_mode, mode.new_mode) == ("100644", "100755")
    (gone,) = by_path["gone away.txt"]
    assert gone.new_path is None and gone.old_path == "gone away.txt"
    removed, made = by_path["was file"]                      # a type change: two blocks
    assert removed.new_path is None and not removed.was_link
    assert made.makes_link and made.old_path is None
    (link,) = by_path["link b/to"]
    assert link.makes_link
    assert {b.path for b in parts if b.makes_link} == {"was file", "link b/to"}
    assert b"".join(patch[b.start:b.end] for b in parts) == patch
