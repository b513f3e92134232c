"""fsutil: group sync, publishing by link and by copy."""

from __future__ import annotations

from prun._util import fsutil


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


# Reading what a unit could have written: regular files only, bounded, holes kept ------------

def _specials(tmp_path):
    """A symbolic link to /dev/zero, a FIFO, a folder, a link to a regular file."""
    import os

    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "real").write_text("the real one\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    return {"zero": "a symbolic link", "fifo": "a FIFO", "folder": "a folder",
            "link": "a symbolic link"}


def test_a_link_a_fifo_or_a_folder_is_refused_unread(tmp_path):
    import pytest

    for name, what in _specials(tmp_path).items():
        path = tmp_path / name
        with pytest.raises(fsutil.UnsafeFile) as caught:
            fsutil.read_bounded(path)
        assert caught.value.what == what and not caught.value.too_large
        assert fsutil.read_text(path, "gone") == "gone"
        assert fsutil.read_json(path) is None and fsutil.read_bytes(path) is None
        assert fsutil.tail_bytes(path, 100) == b"" and fsutil.read_head(path, 10) == b""
        assert fsutil.file_size(path) == 0
        with pytest.raises(fsutil.UnsafeFile):
            fsutil.publish_copy(path, tmp_path / f"{name}.copy")
        assert not (tmp_path / f"{name}.copy").exists()
    assert fsutil.read_text(tmp_path / "real") == "the real one\n"


def test_a_file_over_its_bound_is_refused_and_a_sparse_copy_keeps_its_holes(tmp_path):
    import os

    import pytest

    big = tmp_path / "sparse"
    with open(big, "wb") as f:
        f.write(b"head")
        f.seek(2 << 30)                  # 2 GiB of hole
        f.write(b"tail")
    with pytest.raises(fsutil.UnsafeFile) as caught:
        fsutil.read_bounded(big, 1 << 20)
    assert caught.value.too_large and caught.value.size == (2 << 30) + 4
    with pytest.raises(fsutil.UnsafeFile):
        fsutil.publish_copy(big, tmp_path / "copy", limit=1 << 20)
    assert fsutil.read_text(big, "refused") == "refused"   # over the default bound too
    # within the bound, the holes stay holes in the copy
    small = tmp_path / "small-sparse"
    with open(small, "wb") as f:
        f.write(b"a")
        f.seek(32 << 20)
        f.write(b"z")
    assert fsutil.publish_copy(small, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert copy.stat().st_size == (32 << 20) + 1
    assert copy.stat().st_blocks * 512 < 1 << 20         # not 32 MiB of zeros
    assert fsutil.read_head(copy, 1) == b"a" and fsutil.tail_bytes(copy, 1) == b"z"
    assert os.listdir(tmp_path).count("copy") == 1
