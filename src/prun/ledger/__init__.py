"""The ledger: one SQLite database of runs, packets, attempts and every state change.

    statuses     the statuses of attempts, packets and runs, and the transition table
    migrations   the schema, an append-only list of migrations
    store        the ``Ledger``: where it is, opening it (migrations applied)
    writes       transactions, and the write queue while a supervisor batches its writes
    runs         runs, their frozen packet sets, control requests
    attempts     attempts: one dispatch of one packet
    decisions    the person's accept, reject or include of a packet (prun review)
    events       the append-only event log
    dispatches   what a standalone ``prun dispatch`` records
"""

from .attempts import AttemptFields
from .decisions import DECISIONS
from .dispatches import record_receipt
from .migrations import MIGRATIONS
from .runs import PacketRecord, RunRecord
from .statuses import (
    ATTEMPT_STATUS,
    PACKET_STATUS,
    TERMINAL,
    OutcomeKind,
    PacketStatus,
    RunStatus,
    Status,
    attempt_status,
)
from .store import Ledger, default_path, prun_dir, repo_root
from .writes import now_iso

__all__ = ["ATTEMPT_STATUS", "DECISIONS", "MIGRATIONS", "PACKET_STATUS", "TERMINAL",
           "AttemptFields", "Ledger",
           "OutcomeKind", "PacketRecord", "PacketStatus", "RunRecord", "RunStatus", "Status",
           "attempt_status", "default_path", "now_iso", "prun_dir", "record_receipt", "repo_root"]
