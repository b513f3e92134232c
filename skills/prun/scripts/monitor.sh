#!/bin/sh
# Wait for the first actionable event among running prun units (all done, a stall, a failure).
# Usage: monitor.sh <state-dir-1> <state-dir-2> ...   (see docs/monitor-gather.md)
# Runs `prun monitor` with the same arguments: prun from PATH, else `python -m prun`.
# The re-launch line the monitor prints starts with this script, so it can be pasted as is.
if [ -z "${PRUN_MONITOR_COMMAND:-}" ]; then
  PRUN_MONITOR_COMMAND="'$(printf '%s' "$0" | sed "s/'/'\\\\''/g")'"
  export PRUN_MONITOR_COMMAND
fi
if command -v prun >/dev/null 2>&1; then
  exec prun monitor "$@"
fi
for py in python3 python; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import prun" >/dev/null 2>&1; then
    exec "$py" -m prun monitor "$@"
  fi
done
echo "monitor.sh: prun not found on PATH and no python with the prun package (pip install prun-agents)" >&2
exit 127
