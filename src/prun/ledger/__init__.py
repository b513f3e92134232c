"""The ledger: one SQLite database of runs, packets, attempts and every state change
(``store``)."""

from .store import (
    MIGRATIONS,
    TERMINAL,
    Ledger,
    PacketStatus,
    RunStatus,
    Status,
    default_path,
    now_iso,
    prun_dir,
    record_dispatch,
    record_receipt,
    repo_root,
)

__all__ = ["MIGRATIONS", "TERMINAL", "Ledger", "PacketStatus", "RunStatus", "Status",
           "default_path", "now_iso", "prun_dir", "record_dispatch", "record_receipt",
           "repo_root"]
