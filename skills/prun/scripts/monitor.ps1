# Wait for the first actionable event among running prun units (all done, a stall, a failure).
# Usage: monitor.ps1 <state-dir-1> <state-dir-2> ...   (see docs/monitor-gather.md)
# Runs `prun monitor` with the same arguments: prun from PATH, else `python -m prun`.
# The re-launch line the monitor prints starts with this script, so it can be pasted as is.
if (-not $env:PRUN_MONITOR_COMMAND) {
    $env:PRUN_MONITOR_COMMAND = "& '" + $PSCommandPath.Replace("'", "''") + "'"
}
$prun = Get-Command prun -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
if ($prun) {
    & $prun.Source monitor @args
    exit $LASTEXITCODE
}
foreach ($name in @('python3', 'python', 'py')) {
    $py = Get-Command $name -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
    if ($py) {
        & $py.Source -c "import prun" 2>$null
        if ($LASTEXITCODE -eq 0) {
            & $py.Source -m prun monitor @args
            exit $LASTEXITCODE
        }
    }
}
[Console]::Error.WriteLine("monitor.ps1: prun not found on PATH and no python with the prun package (pip install prun-agents)")
exit 127
