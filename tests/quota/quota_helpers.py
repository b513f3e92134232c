"""Helpers for the quota tests: snapshot files written by hand and scripted probe commands."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

PROBE_SOURCE = r'''
import json, os, subprocess, sys, time
spec = json.loads(os.environ["QUOTA_TEST_SPEC_" + os.environ["PRUN_QUOTA_GROUP"].replace("-", "_")])
with open(spec["count"], "a") as f:
    f.write(os.environ["PRUN_QUOTA_GROUP"] + "\n")
if spec.get("grandchild"):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    with open(spec["grandchild"], "w") as f:
        f.write(str(child.pid))
if spec.get("hang"):
    sys.stdout.write("{")
    sys.stdout.flush()
    time.sleep(3600)
if spec.get("stderr"):
    sys.stderr.write(spec["stderr"] + "\n")
if "raw" in spec:
    sys.stdout.write(spec["raw"])
elif "json" in spec:
    print(json.dumps(spec["json"]))
sys.exit(spec.get("exit", 0))
'''


def iso(offset_s: float = 0.0) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + offset_s))


def entry(left, resets_in: float | None = 1800, age_s: float = 10, source="probe", **extra):
    e = {"left": left, "resets_at": None if resets_in is None else iso(resets_in),
         "read_at": iso(-age_s), "source": source, "error": None}
    e.update(extra)
    return e


class QuotaEnv:
    """Writes the snapshot and the config file the isolated environment points at."""

    def __init__(self, tmp_path: Path, monkeypatch):
        self.tmp = tmp_path
        self.mp = monkeypatch
        self.snapshot = Path(os.environ["PRUN_QUOTA_SNAPSHOT"])
        self.config = Path(os.environ["PRUN_CONFIG"])
        self.script = tmp_path / "probe.py"
        self.script.write_text(PROBE_SOURCE)
        self.probes: dict[str, dict] = {}
        self.settings: dict[str, str] = {}

    # snapshot ---------------------------------------------------------------------------------
    def write_snapshot(self, groups: dict, **top) -> None:
        obj = {"version": 1, "updated_at": iso(-10), "groups": groups}
        obj.update(top)
        self.snapshot.write_text(json.dumps(obj))

    def write_raw(self, text: str) -> None:
        self.snapshot.write_text(text)

    def read_snapshot(self) -> dict:
        return json.loads(self.snapshot.read_text())

    # probes -----------------------------------------------------------------------------------
    def probe(self, group: str, **spec) -> Path:
        """Configure a probe for ``group``; returns the file counting its runs."""
        count = self.tmp / f"probe-{group}.count"
        spec["count"] = str(count)
        self.probes[group] = spec
        self.mp.setenv("QUOTA_TEST_SPEC_" + group.replace("-", "_"), json.dumps(spec))
        self._write_config()
        return count

    def set(self, key: str, value: str) -> None:
        self.settings[key] = value
        self._write_config()

    def _write_config(self) -> None:
        lines = ["[quota]"] + [f"{k} = {json.dumps(v)}" for k, v in self.settings.items()]
        lines.append("[quota.probes]")
        for group in self.probes:
            lines.append(f"{group} = {json.dumps([sys.executable, str(self.script)])}")
        self.config.write_text("\n".join(lines) + "\n")


def runs(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0
