"""Overlays in the sandbox, for real: `sandbox.wrap(..., overlays=)` mounts each in the unit's
own user and mount namespaces before bwrap; a write, a delete and a chmod inside land in the
upper folder only; the unit cannot unmount it; a path an overlay cannot name is refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from prun.attempt import sandbox
from prun.attempt.overlay import overlays_unavailable
from prun.errors import UsageError


@pytest.fixture
def layers(tmp_path, bwrap):
    why = overlays_unavailable(str(tmp_path))
    if why is not None:
        pytest.skip(f"no overlay here: {why}")
    made = {n: tmp_path / n for n in ("lower", "upper", "work", "seen")}
    for p in made.values():
        p.mkdir()
    (made["lower"] / "kept.txt").write_text("lower\n")
    (made["lower"] / "gone.txt").write_text("lower\n")
    return made


def test_writes_in_an_overlay_land_in_its_upper_folder_only(layers):
    lower, upper, work, seen = (layers[n] for n in ("lower", "upper", "work", "seen"))
    code = textwrap.dedent(f"""
        import os, subprocess
        seen = {str(seen)!r}
        assert open(seen + '/kept.txt').read() == 'lower\\n'
        open(seen + '/kept.txt', 'a').write('mine\\n')
        os.remove(seen + '/gone.txt')
        os.chmod(seen + '/kept.txt', 0o600)
        open(seen + '/new.txt', 'w').write('new')
        assert subprocess.run(['umount', seen], capture_output=True).returncode != 0
        print('ok')
    """)
    argv = sandbox.wrap([sys.executable, "-c", code], writable=[str(seen)], read_only=[],
                        overlays=[(str(lower), str(upper), str(work), str(seen))])
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr
    assert (lower / "kept.txt").read_text() == "lower\n" and (lower / "gone.txt").exists()
    assert (lower / "kept.txt").stat().st_mode & 0o777 != 0o600
    assert not (lower / "new.txt").exists()
    assert (upper / "kept.txt").read_text() == "lower\nmine\n"
    assert (upper / "gone.txt").is_char_device()          # a whiteout
    assert (upper / "new.txt").read_text() == "new"
    assert list(seen.iterdir()) == []                      # the host never saw the mount


def test_an_overlay_path_with_a_comma_is_refused(tmp_path, bwrap):
    odd = tmp_path / "a,b"
    with pytest.raises(UsageError, match="overlay"):
        sandbox.wrap(["true"], writable=[], read_only=[],
                     overlays=[(str(odd), str(odd), str(odd), str(Path(odd)))])
