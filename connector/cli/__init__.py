"""The ``mvtable`` command line: look at a table and run its lifecycle operations.

::

    mvtable lineage  URI                       lineage entries (consistent pushes)
    mvtable history  URI [--limit N]           commits, oldest first
    mvtable rollback URI (--entry ID | --version N | --transaction ID)
    mvtable restore  URI --version N
    mvtable publish  URI --entry ID
    mvtable vacuum   URI [--dry-run] [--retention 7d] [--force] [--time-budget S]
    mvtable gc       URI [--dry-run] [--time-budget S]
    mvtable compact  URI [--dry-run] [--target-size 128MiB] [--min-input-files N] [--delete-ratio F]
    mvtable inspect  URI [--version N] [--row-groups]
    mvtable pins     URI [--release OWNER]     reader pins; release those of a reader that is gone
    mvtable timeline URI [--version N] [--html FILE] [--max-partitions N]
    mvtable export   (iceberg | delta) URI [--all-versions]

Every subcommand takes ``--json`` (a JSON array of objects whose field names are those of
the Python API; timestamps in ISO-8601) and ``--storage-option KEY=VALUE`` (repeatable;
fsspec / s3fs options such as ``key``, ``secret``, ``endpoint_url``).

Exit codes (:data:`EXIT_OK` …):

* 0 — done, including an idempotent no-op ("nothing changed");
* 1 — an mvtable error (no table, unknown version or entry, a forbidden lineage
  transition, files missing, damaged metadata, a storage failure): the problem and what to
  do are on stderr, and nothing was committed;
* 2 — usage error (bad or missing arguments);
* 3 — retryable: another writer committed something incompatible at the same time
  (``CommitConflictError``), or the store did not confirm the commit
  (``CommitStateUnknownError``). Nothing conflicting landed; every command is idempotent,
  so running it again is safe and reports whether the change is there;
* 130 — interrupted (Ctrl-C); run it again to resume.

With ``--json`` a failure also prints one JSON object on stdout: ``{"error": message,
"type": error class name, "hint": hint or null, "exit_code": n}``.
"""

from __future__ import annotations

from .main import EXIT_CONFLICT, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, PROG, main
from .parser import build_parser

__all__ = ["EXIT_CONFLICT", "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "PROG", "build_parser", "main"]
