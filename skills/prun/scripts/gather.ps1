# Wait until result files land; prints GATHER-START, then DONE <path> per file.
# Usage: gather.ps1 <result-file-1> <result-file-2> ...   (see docs/monitor-gather.md)
# Runs `prun gather` with the same arguments: prun from PATH, else `python -m prun`.
$prun = Get-Command prun -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
if ($prun) {
    & $prun.Source gather @args
    exit $LASTEXITCODE
}
foreach ($name in @('python3', 'python', 'py')) {
    $py = Get-Command $name -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
    if ($py) {
        & $py.Source -c "import prun" 2>$null
        if ($LASTEXITCODE -eq 0) {
            & $py.Source -m prun gather @args
            exit $LASTEXITCODE
        }
    }
}
[Console]::Error.WriteLine("gather.ps1: prun not found on PATH and no python with the prun package (pip install prun-agents)")
exit 127
