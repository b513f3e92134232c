"""A run's cluster: where its units go (``cluster.json`` in the run dir, written when the run
is frozen, read by every supervisor of the run, a resumed one included)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .._util.fsutil import atomic_write, read_json
from ..settings import parse_cluster_address

FILE = "cluster.json"
WORKER_LOST = ("fail", "retry")


@dataclass(frozen=True)
class ClusterConfig:
    """The scheduler's address and what follows a worker lost mid-unit: ``fail`` (the
    attempt fails with reason ``worker-lost``) or ``retry`` (one linked successor attempt
    per packet)."""

    address: str
    worker_lost: str = "fail"

    def write(self, run_dir: str) -> None:
        atomic_write(os.path.join(run_dir, FILE),
                     json.dumps({"address": self.address, "worker_lost": self.worker_lost}))


def read(run_dir: str) -> ClusterConfig | None:
    """The run's cluster, or None for a run on this machine."""
    data = read_json(os.path.join(run_dir, FILE))
    if not isinstance(data, dict) or not data.get("address"):
        return None
    lost = data.get("worker_lost")
    return ClusterConfig(str(data["address"]), lost if lost in WORKER_LOST else "fail")


def resolve(given: str | None, plan_address: str | None, plan_lost: str,
            setting: str | None) -> ClusterConfig | None:
    """The run's cluster: ``--cluster``, else the plan's ``cluster:``, else
    ``$PRUN_CLUSTER``; None when none names one."""
    if given:
        return ClusterConfig(parse_cluster_address(given, "--cluster"), plan_lost)
    address = plan_address or setting
    return ClusterConfig(address, plan_lost) if address else None
