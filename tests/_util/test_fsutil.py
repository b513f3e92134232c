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
