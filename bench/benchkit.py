"""What the benchmarks share."""

from __future__ import annotations

import os
import subprocess
import sys


def compile_prun() -> None:
    """Byte-compile the prun package, as a regular install does. An editable install (or
    PYTHONDONTWRITEBYTECODE) would make every prun process compile its modules from source,
    a cost no installed prun pays."""
    import prun

    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.dirname(prun.__file__)],
                   check=False, env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""))
