"""The closed vocabularies of the log: lineage entry states and commit operation names.

Both are ``str`` enums whose values are exactly the strings the log has always stored, so
existing commit files and checkpoints parse unchanged, while code compares members instead
of bare strings (a typo is an ``AttributeError`` or a mypy error, not a silent mismatch).
A value outside the enum in a commit file makes the file invalid (a typed
``CorruptMetadataError``): every writer of this format writes one of these.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["LineageState", "Operation"]


class _Name(str, Enum):
    """A ``str`` enum that prints as its value (``f"{x}"``, ``str(x)``, ``"%s" % x``) on every Python ≥ 3.10.

    The default for mixed-in enums changed between Python versions."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class LineageState(_Name):
    """Where a lineage entry (one push replacing ``segments_from`` by ``segments_to``) stands.

    IN_PROGRESS → COMPLETED (published) or REVERTED (rolled back); COMPLETED → REVERTED.
    Readers see ``segments_from`` while IN_PROGRESS or REVERTED, ``segments_to`` once COMPLETED."""

    IN_PROGRESS = "IN_PROGRESS"
    COMPLETED = "COMPLETED"
    REVERTED = "REVERTED"


class Operation(_Name):
    """What a commit did, as its ``operation`` field records it (shown by history)."""

    CREATE = "CREATE"  # the first commit of a table (metadata + any first segments)
    APPEND = "APPEND"  # new segments added
    OVERWRITE = "OVERWRITE"  # every visible segment replaced, no lineage
    PUSH_START = "PUSH_START"  # a consistent push opened its IN_PROGRESS lineage entry
    PUSH_STAGE = "PUSH_STAGE"  # a push uploaded its segments without publishing them
    CONSISTENT_PUSH = "CONSISTENT_PUSH"  # a push uploaded and published in one commit
    PUSH_ABORT = "PUSH_ABORT"  # a failed push reverted its own entry
    PUBLISH = "PUBLISH"  # an IN_PROGRESS entry became COMPLETED
    ROLLBACK = "ROLLBACK"  # an entry became REVERTED
    RESTORE = "RESTORE"  # the table was set back to the content of an older version
    DELETE = "DELETE"  # rows deleted through deletion vectors
    RETENTION = "RETENTION"  # lineage retention removed replaced segments and purged entries
    UPSERT = "UPSERT"  # keyed rows inserted, the rows they replace deleted (names its key columns)
    DELETE_BY_KEY = "DELETE_BY_KEY"  # rows deleted by primary key
    STREAM_APPEND = "STREAM_APPEND"  # a streaming micro-batch appended (once per batch id)
    STREAM_COMPLETE = "STREAM_COMPLETE"  # a streaming micro-batch replaced the table (complete mode)
    COMPACT = "COMPACT"  # segments rewritten: rows moved, none changed
    UPDATE_SCHEMA = "UPDATE_SCHEMA"  # columns added, renamed, dropped or widened (no data file rewritten)
    UPDATE_PARTITIONING = "UPDATE_PARTITIONING"  # a new partition spec for new writes (old segments keep theirs)
    DROP_PARTITIONS = "DROP_PARTITIONS"  # whole partitions left the table: past partitionRetention, or a delete covering them
    TXN_PREPARE = "TXN_PREPARE"  # a multi-table transaction prepared its (invisible) entry in this table
    TXN_COMMIT = "TXN_COMMIT"  # a committed transaction's entry became visible in this table
    TXN_ABORT = "TXN_ABORT"  # an aborted transaction's entry was reverted in this table
    TXN_ROLLBACK = "TXN_ROLLBACK"  # a committed transaction was rolled back as one, this table's part
