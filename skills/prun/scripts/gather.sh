#!/bin/sh
# Wait until result files land; prints GATHER-START, then DONE <path> per file.
# Usage: gather.sh <result-file-1> <result-file-2> ...   (see docs/monitor-gather.md)
# Runs `prun gather` with the same arguments: prun from PATH, else `python -m prun`.
if command -v prun >/dev/null 2>&1; then
  exec prun gather "$@"
fi
for py in python3 python; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import prun" >/dev/null 2>&1; then
    exec "$py" -m prun gather "$@"
  fi
done
echo "gather.sh: prun not found on PATH and no python with the prun package (pip install prun-agents)" >&2
exit 127
