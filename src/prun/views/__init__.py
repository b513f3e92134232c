"""A run's read-only views: the run read back from the ledger (``model``), its terse lines
(``lines``), the live table (``live``) and following a run from another terminal (``follow``).
Nothing here changes a run."""
