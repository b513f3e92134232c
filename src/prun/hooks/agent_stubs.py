"""prun's agent stubs: what a unit that may not start other agents finds instead of them.

``stub_dir(state_root, names)`` makes (once, atomically) a folder holding, for each name, an
executable that prints one line and exits 2 without starting anything::

    prun: claude cannot start here: this unit may not start other agents (subdispatch is off; ...)

Put first on the unit's PATH (after the git wrapper), it answers for the agent CLIs by name; in
the sandbox its ``STUB`` file is also mounted read-only over every other agent CLI found on the
unit's PATH and over the file each one's launcher points to (``prun.attempt.launching``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

STUBS = "agent-stubs"     # the folder under a state root holding one folder per set of names
STUB = ".prun-stub"       # the stub itself, in every such folder
EXIT = 2
SCRIPT = ("#!/bin/sh\n# prun's agent stub: a unit that may not start other agents\n"
          'echo "prun: ${0##*/} cannot start here: this unit may not start other agents '
          "(subdispatch is off; a packet allots it with subdispatch: true). Report back to "
          f'the coordinator instead." >&2\nexit {EXIT}\n')


def stub_dir(state_root: str, names: list[str]) -> str:
    """The folder whose files are the stubs for ``names`` (made on first use)."""
    names = sorted(set(names))
    key = hashlib.sha256("\0".join([SCRIPT, *names]).encode()).hexdigest()[:16]
    parent = os.path.join(state_root, STUBS)
    folder = os.path.join(parent, key)
    if os.path.exists(os.path.join(folder, STUB)):
        return folder
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".new-", dir=parent)
    try:
        for name in (STUB, *names):
            path = os.path.join(tmp, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(SCRIPT)
            os.chmod(path, 0o755)
        os.rename(tmp, folder)
    except OSError:
        if not os.path.exists(os.path.join(folder, STUB)):   # not a concurrent maker's win
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
