"""A hostile worker, run as a `command` unit in its clone: python hostile.py MODE MARKS DIR.

Every command it plants writes a file named after itself into MARKS (a folder no unit can
write: the real repository's .git); a file there proves the command ran outside the sandbox.
DIR is the folder of the packet's own change (inside what it owns).

Modes:
  objects     chmod and rewrite every object file reachable through the clone (its own
              .git/objects, and every folder its alternates name, recursively)
  plant       every git configuration key that names a program, include.path, hooks,
              info/attributes and a .gitattributes selecting drivers; a shell script a later
              setup command runs
  nested      a nested repository whose .git is a gitdir: file to a folder with a FIFO HEAD
              and a planted config
  index-zero  .git/index a link to /dev/zero
  index-fifo  .git/index a FIFO
  files       a FIFO, a socket, a 2 GiB sparse file, a file past the size bound, a link
              outside the tree, and a link inside it
  check-start the dependent: its clone must start with the change of `plant`
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

MODE, MARKS, DIR = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
GIT = Path(".git")


def mark(name: str) -> str:
    """A shell command that records that ``name`` ran."""
    return f"touch {MARKS / name}"


def change() -> None:
    DIR.mkdir(parents=True, exist_ok=True)
    (DIR / "main.py").write_text(f"WORK = {MODE!r}\n")


def objects() -> None:
    folders, seen, rewritten, refused = [GIT / "objects"], set(), 0, 0
    while folders:
        folder = folders.pop()
        if folder.resolve() in seen or not folder.is_dir():
            continue
        seen.add(folder.resolve())
        alternates = folder / "info" / "alternates"
        if alternates.is_file():
            folders += [Path(line) for line in alternates.read_text().split() if line]
        for path in folder.rglob("*"):
            kind = path.relative_to(folder).parts[0]
            if not path.is_file() or path.is_symlink() or not (kind == "pack" or len(kind) == 2):
                continue
            try:
                os.chmod(path, 0o644)
                with open(path, "r+b") as f:
                    f.write(b"corrupt")
                rewritten += 1
            except OSError:
                refused += 1
    print(f"rewritten={rewritten} refused={refused} folders={len(seen)}")
    change()


PROGRAM_KEYS = [
    "core.fsmonitor", "core.pager", "core.editor", "core.askPass", "core.sshCommand",
    "core.gitProxy", "core.alternateRefsCommand", "sequence.editor", "diff.external",
    "diff.x.command", "diff.x.textconv", "filter.x.clean", "filter.x.smudge", "filter.x.process",
    "merge.x.driver", "credential.helper", "gpg.program", "gpg.ssh.program", "gpg.x509.program",
    "pager.diff", "pager.status", "pager.apply", "uploadpack.packObjectsHook",
    "remote.origin.uploadpack", "remote.origin.receivepack", "difftool.x.cmd",
    "mergetool.x.cmd", "submodule.x.update",
]


def plant() -> None:
    hooks = GIT / "evil-hooks"
    hooks.mkdir()
    for hook in ("post-index-change", "pre-commit", "post-checkout", "post-commit",
                 "reference-transaction", "pre-auto-gc", "post-merge", "post-rewrite",
                 "fsmonitor-watchman", "pre-applypatch", "post-applypatch", "applypatch-msg"):
        script = hooks / hook
        script.write_text(f"#!/bin/sh\n{mark('hook-' + hook)}\n")
        script.chmod(0o755)
    included = GIT / "evil.config"
    included.write_text(f"[core]\n\tfsmonitor = \"{mark('included-fsmonitor')}; false\"\n"
                        f"[diff]\n\texternal = \"{mark('included-diff-external')}; false\"\n")
    lines = ["", "[include]", f"\tpath = {included.resolve()}",
             '[includeIf "gitdir:/"]', f"\tpath = {included.resolve()}",
             "[core]", f"\thooksPath = {hooks.resolve()}",
             f"\tattributesFile = {(GIT / 'evil.attributes').resolve()}",
             "[filter \"x\"]", "\trequired = true", "[alias]",
             f"\tdiff = \"!{mark('alias-diff')}\"", f"\tstatus = \"!{mark('alias-status')}\"",
             f"\tadd = \"!{mark('alias-add')}\""]
    for key in PROGRAM_KEYS:
        section, _, name = key.rpartition(".")
        head, _, sub = section.partition(".")
        lines += [f'[{head} "{sub}"]' if sub else f"[{head}]",
                  f"\t{name} = \"{mark(key)}; false\""]
    with open(GIT / "config", "a") as f:
        f.write("\n".join(lines) + "\n")
    drivers = "* filter=x diff=x merge=x working-tree-encoding=UTF-16\n"
    (GIT / "evil.attributes").write_text(drivers)
    (GIT / "info").mkdir(exist_ok=True)
    (GIT / "info" / "attributes").write_text(drivers)
    change()
    (DIR / ".gitattributes").write_text(drivers)
    (DIR / "hook.sh").write_text(mark("setup-ran-a-units-script") + "\n")


def nested() -> None:
    change()
    gitdir = DIR / "elsewhere"
    (gitdir / "objects").mkdir(parents=True)
    (gitdir / "refs").mkdir()
    os.mkfifo(gitdir / "HEAD")        # git probing the nested repository would hang here
    (gitdir / "config").write_text(f"[core]\n\tfsmonitor = \"{mark('nested-fsmonitor')}\"\n")
    (DIR / "sub").mkdir()
    (DIR / "sub" / "file.txt").write_text("inside a nested repository\n")
    (DIR / "sub" / ".git").write_text(f"gitdir: {gitdir.resolve()}\n")


def index(kind: str) -> None:
    change()
    os.unlink(GIT / "index")
    if kind == "zero":
        os.symlink("/dev/zero", GIT / "index")
    else:
        os.mkfifo(GIT / "index")


def files() -> None:
    change()
    os.mkfifo(DIR / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(DIR / "sock"))
    with open(DIR / "sparse.bin", "wb") as f:
        f.truncate(2 * 1024 ** 3)
    with open(DIR / "big.bin", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, 101 * 1024 ** 2)
    os.symlink("/etc", DIR / "etc")
    os.symlink("../../../outside", DIR / "up")
    os.symlink("main.py", DIR / "ok")


def check_start() -> None:
    started = Path("src/plant/main.py").read_text()
    assert started == "WORK = 'plant'\n", started
    change()


if MODE == "objects":
    objects()
elif MODE == "plant":
    plant()
elif MODE == "nested":
    nested()
elif MODE.startswith("index-"):
    index(MODE.split("-", 1)[1])
elif MODE == "files":
    files()
elif MODE == "check-start":
    check_start()
else:
    raise SystemExit(f"no mode {MODE}")
print(f"{MODE} done: the hostile worker left its clone as it wanted it")
