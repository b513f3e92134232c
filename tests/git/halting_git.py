"""A `git` for one test: every command is the real git (``$REAL_GIT``), except a real
``git apply`` (not ``--check``, ``--numstat`` or ``--reverse``) of a patch of several files:
that one applies all the files of its patch but the last with the real git, writes its pid to
``$HALT_MARK``, and stops there until it is killed. So a test can kill `prun integrate` between
two files of one patch, at a point it awaits instead of guesses."""

import os
import signal
import subprocess
import sys

REAL = os.environ["REAL_GIT"]
args = sys.argv[1:]
applying = "apply" in args and not {"--check", "--numstat", "--reverse"} & set(args)
if not applying:
    os.execv(REAL, [REAL, *args])
patch = sys.stdin.buffer.read()
last = patch.rfind(b"\ndiff --git ")
done = subprocess.run([REAL, *args], input=patch[:last + 1] if last >= 0 else patch)
if done.returncode != 0 or last < 0:
    sys.exit(done.returncode)
with open(os.environ["HALT_MARK"] + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(os.environ["HALT_MARK"] + ".tmp", os.environ["HALT_MARK"])
while True:
    signal.pause()
