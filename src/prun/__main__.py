from prun.cli import entry

entry()
