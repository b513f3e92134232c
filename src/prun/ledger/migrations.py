"""The ledger's schema: an append-only list of migrations, applied in order when a ledger opens
(``PRAGMA user_version`` counts those applied). Never edit an entry once it is released: add a
new one."""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: the first schema
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        repo_root TEXT,
        plan_path TEXT,
        base TEXT,
        packet_ids TEXT NOT NULL,          -- JSON list, frozen
        packet_count INTEGER NOT NULL,
        deadline TEXT,                     -- ISO time, or NULL
        cancel_action TEXT,
        cancel_owner TEXT,
        parallel INTEGER,
        run_dir TEXT,
        check_command TEXT,
        on_event TEXT,
        setup TEXT,
        status TEXT NOT NULL,
        supervisor_pid INTEGER,
        supervisor_started REAL,
        created_at TEXT NOT NULL,
        finished_at TEXT
    );
    CREATE TABLE packets (
        run_id TEXT NOT NULL REFERENCES runs(id),
        id TEXT NOT NULL,
        kind TEXT,
        executor TEXT,
        model TEXT,
        mode TEXT,
        base TEXT,
        after TEXT,                        -- JSON list
        timeout_s REAL,
        spec TEXT,                         -- JSON: the whole frozen packet
        status TEXT NOT NULL,
        PRIMARY KEY (run_id, id)
    );
    CREATE TABLE attempts (
        id TEXT PRIMARY KEY,
        run_id TEXT,                       -- NULL for a standalone prun dispatch
        packet_id TEXT NOT NULL,           -- the unit id
        seq INTEGER NOT NULL DEFAULT 1,
        executor TEXT,
        requested_model TEXT,
        model TEXT,
        routing_reason TEXT,
        mode TEXT,
        workspace TEXT,
        base TEXT,
        state_dir TEXT,
        result_path TEXT,
        receipt TEXT,                      -- non-empty only once dispatched
        predecessor TEXT,
        continue_from TEXT,
        status TEXT NOT NULL,
        reason TEXT,
        exit_code INTEGER,
        error TEXT,
        resets_at TEXT,
        quarantine TEXT,
        created_at TEXT NOT NULL,
        dispatched_at TEXT,
        finished_at TEXT,
        updated_at TEXT NOT NULL
    );
    CREATE INDEX attempts_run ON attempts(run_id, packet_id);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        run_id TEXT,
        packet_id TEXT,
        attempt_id TEXT,
        kind TEXT NOT NULL,
        status TEXT,
        cause TEXT,
        data TEXT
    );
    CREATE INDEX events_run ON events(run_id, seq);
    CREATE TABLE requests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        kind TEXT NOT NULL,                -- cancel | reassign
        target TEXT,                       -- packet id, attempt id, or NULL for the whole run
        executor TEXT,
        cause TEXT,
        created_at TEXT NOT NULL,
        handled_at TEXT
    );
    """,
    # 2: the brief each attempt received, whether it ran sandboxed; a request's payload (a
    # follow-up's prompt)
    """
    ALTER TABLE attempts ADD COLUMN brief TEXT;
    ALTER TABLE attempts ADD COLUMN sandboxed INTEGER;
    ALTER TABLE requests ADD COLUMN data TEXT;
    """,
    # 3: what each attempt's agent CLI reported it used (NULL: not reported)
    """
    ALTER TABLE attempts ADD COLUMN tokens_in INTEGER;
    ALTER TABLE attempts ADD COLUMN tokens_out INTEGER;
    ALTER TABLE attempts ADD COLUMN tokens_cached INTEGER;
    ALTER TABLE attempts ADD COLUMN cost_usd REAL;
    """,
    # 4: the person's decisions on a run's packets (prun review): accept, reject or include one
    # attempt's change, who decided, when and why; the latest of a packet's attempt counts
    """
    CREATE TABLE decisions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL,
        packet_id TEXT NOT NULL,
        attempt_id TEXT,                   -- the deciding attempt it was made on, or NULL
        decision TEXT NOT NULL,            -- accept | reject | include
        note TEXT,
        who TEXT NOT NULL,
        at TEXT NOT NULL                   -- ISO time
    );
    CREATE INDEX decisions_run ON decisions(run_id, packet_id, id);
    """,
    # 5: the successors a packet was given after a cluster worker died mid-unit (the plan's
    # `worker_lost: retry` budget), kept here so that a resumed supervisor allows no more
    """
    ALTER TABLE packets ADD COLUMN lost_retries INTEGER NOT NULL DEFAULT 0;
    """,
    # 6: the acceptance check prun ran on an attempt's work (prun.git.accept): passed, failed,
    # timeout or error (NULL: not run), its exit code, seconds, output tail and full log
    """
    ALTER TABLE attempts ADD COLUMN accept_status TEXT;
    ALTER TABLE attempts ADD COLUMN accept_exit INTEGER;
    ALTER TABLE attempts ADD COLUMN accept_seconds REAL;
    ALTER TABLE attempts ADD COLUMN accept_tail TEXT;
    ALTER TABLE attempts ADD COLUMN accept_log TEXT;
    """,
    # 7: what a run's units need of the machine to start (prun run --memfree, --load,
    # --parallel auto): JSON {"memfree": bytes, "load": n}, NULL when nothing
    """
    ALTER TABLE runs ADD COLUMN admission TEXT;
    """,
    # 8: the candidate an attempt is of (1..N) when its packet has candidates (NULL: it has
    # none); the attempt's packet_id is then the candidate's unit, <packet>.c<k>
    """
    ALTER TABLE attempts ADD COLUMN candidate INTEGER;
    """,
    # 9: the plan's workspace: section (primed templates, prun.git.template) as JSON
    """
    ALTER TABLE runs ADD COLUMN workspace TEXT;
    """,
    # 10: what the run may spend (the plan's budget:, --budget-usd/--budget-tokens/--budget-hard)
    # as JSON (prun.plan.Budget.to_json), NULL: no budget
    """
    ALTER TABLE runs ADD COLUMN budget TEXT;
    """,
]


def _statements(script: str) -> list[str]:
    out, buf = [], []
    for line in script.splitlines():
        buf.append(line.split("--", 1)[0])
        if line.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if stmt.strip(";").strip():
                out.append(stmt)
            buf = []
    rest = "\n".join(buf).strip()
    if rest:
        out.append(rest)
    return out
