"""Hooks prun installs into agent CLIs (standalone scripts: standard library only)."""
