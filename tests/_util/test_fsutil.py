"""fsutil: shared copies by hard link, group sync, publishing by link."""

from __future__ import annotations

import os

import pytest

from prun._util import fsutil


def test_create_shared_links_to_one_read_only_copy(tmp_path):
    store = tmp_path / ".prun-shared"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    fsutil.create_shared(a / "model", b"gemini\n", str(store))
    fsutil.create_shared(b / "model", b"gemini\n", str(store))
    fsutil.create_shared(b / "pid", b"123\n", str(store))
    assert (a / "model").stat().st_ino == (b / "model").stat().st_ino
    assert (b / "pid").stat().st_ino != (b / "model").stat().st_ino
    assert (a / "model").read_bytes() == b"gemini\n"
    assert len(os.listdir(store)) == 2
    assert not (a / "model").stat().st_mode & 0o222   # nobody edits it under the links
    with pytest.raises(FileExistsError):
        fsutil.create_shared(a / "model", b"gemini\n", str(store))
    # a rewrite by rename gives that one folder its own file
    fsutil.atomic_write(a / "model", "claude\n", durable=False)
    assert (b / "model").read_bytes() == b"gemini\n"


def test_create_shared_falls_back_to_a_plain_file(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    fsutil.create_shared(tmp_path / "model", b"gemini\n", str(blocker / "store"))
    assert (tmp_path / "model").read_bytes() == b"gemini\n"
    # the copy vanished (a clean-up): the next file is made plainly, then shared again
    store = tmp_path / "store"
    fsutil.create_shared(tmp_path / "m1", b"x\n", str(store))
    for f in store.iterdir():
        f.unlink()
    fsutil.create_shared(tmp_path / "m2", b"x\n", str(store))
    assert (tmp_path / "m2").read_bytes() == b"x\n"
    assert (tmp_path / "m2").stat().st_nlink == 1   # made plainly, not linked


def test_sync_fs_and_non_durable_publish(tmp_path):
    assert fsutil.publish_new(tmp_path / "r.md", "result text", durable=False)
    assert not fsutil.publish_new(tmp_path / "r.md", "other", durable=False)
    fsutil.sync_fs(tmp_path)
    assert (tmp_path / "r.md").read_text() == "result text"


def test_publish_copy_copies_and_never_overwrites(tmp_path):
    src = tmp_path / "out"
    src.write_bytes(b"whole output\n" * 100_000)
    assert fsutil.publish_copy(src, tmp_path / "r.md") is True
    assert (tmp_path / "r.md").read_bytes() == src.read_bytes()
    assert not (tmp_path / "r.md").samefile(src)          # a copy: src may change, it won't
    (tmp_path / "taken.md").write_text("the worker's own\n")
    assert fsutil.publish_copy(src, tmp_path / "taken.md", durable=False) is False
    assert (tmp_path / "taken.md").read_text() == "the worker's own\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "r.md", "taken.md"]
