"""SQL procedures: Python UDTFs registered by ``mvtable.connector.register(spark)``.

``CALL`` needs a JVM catalog, so each procedure is a table function called with named
arguments::

    SELECT * FROM mvtable_lineage('/data/t')
    SELECT * FROM mvtable_history(table => '/data/t')
    SELECT * FROM mvtable_rollback(table => '/data/t', entry => '<entry id>')
    SELECT * FROM mvtable_rollback(table => '/data/t', version => 12)
    SELECT * FROM mvtable_rollback(table => '/data/t', transaction => 'txn-…')   -- every table it wrote
    SELECT * FROM mvtable_restore(table => '/data/t', version => 12)
    SELECT * FROM mvtable_publish(table => '/data/t', entry => '<entry id>')
    SELECT * FROM mvtable_vacuum(table => '/data/t', dry_run => true, retention => '7d', force => false)
    SELECT * FROM mvtable_gc(table => '/data/t', dry_run => true)
    SELECT * FROM mvtable_compact(table => '/data/t', dry_run => false, target_size => '128MiB')

Every procedure also takes ``options => '{"key": "…", "endpoint_url": "…"}'``: storage
options (fsspec / s3fs) as a JSON object.

Like any query, a procedure runs when the result is collected (``.collect()``,
``.show()``), and again each time it is collected: ``spark.sql("SELECT * FROM
mvtable_gc(…)")`` alone does nothing. Run it once with ``.show()``/``.collect()`` and do not
keep the DataFrame: a second ``df.count()`` of ``mvtable_rollback(version => 0)`` restores
again, dropping rows appended in between. Spark may also run a UDTF more than once (task
retries), so every procedure is idempotent: the action procedures (rollback, restore,
publish) report ``changed = false`` when the table already was as asked, and
vacuum/GC/compaction find nothing left to do. Failures raise the typed mvtable error
(``InvalidLineageTransitionError: …``), which Spark surfaces as a ``PythonException``
whose message ends with the error's class and message.

The UDTFs run in a Python worker on an executor, so the table's location must be
reachable from executors (as it must for reads and writes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)


def _schema(*fields: tuple[str, Any]) -> StructType:
    return StructType([StructField(name, dtype, True) for name, dtype in fields])


LINEAGE_SCHEMA = _schema(
    ("id", StringType()),
    ("segments_from", ArrayType(StringType())),
    ("segments_to", ArrayType(StringType())),
    ("state", StringType()),
    ("timestamp", TimestampType()),
    ("started_version", LongType()),
    ("state_version", LongType()),
    ("owner", StringType()),
    ("lease_expires", TimestampType()),
    ("status", StringType()),
    ("revert_reason", StringType()),
)

HISTORY_SCHEMA = _schema(
    ("version", LongType()),
    ("timestamp", TimestampType()),
    ("operation", StringType()),
    ("parameters", StringType()),  # JSON object
    ("metrics", StringType()),  # JSON object
    ("writer", StringType()),
)

ACTION_SCHEMA = _schema(
    ("operation", StringType()),
    ("version", LongType()),
    ("changed", BooleanType()),
    ("message", StringType()),
)

VACUUM_SCHEMA = _schema(
    ("dry_run", BooleanType()),
    ("changed", BooleanType()),
    ("files", LongType()),  # how many files were (dry run: would be) deleted
    ("bytes", LongType()),
    ("segments_expired", LongType()),
    ("entries_purged", LongType()),
    ("safe_version", LongType()),
    ("retention_s", DoubleType()),
    ("complete", BooleanType()),
    ("batches", LongType()),
    ("paths", ArrayType(StringType())),  # dry runs only: the files that would be deleted
    ("message", StringType()),
)

GC_SCHEMA = _schema(
    ("dry_run", BooleanType()),
    ("changed", BooleanType()),
    ("files", LongType()),  # dv_files_deleted + log_files_deleted + pins_expired
    ("bytes", LongType()),
    ("dv_files_deleted", LongType()),
    ("log_files_deleted", LongType()),
    ("pins_expired", LongType()),
    ("safe_version", LongType()),
    ("complete", BooleanType()),
    ("batches", LongType()),
    ("paths", ArrayType(StringType())),  # dry runs only: the files that would be deleted
    ("message", StringType()),
)

COMPACT_SCHEMA = _schema(
    ("dry_run", BooleanType()),
    ("changed", BooleanType()),
    ("bins", LongType()),
    ("committed_bins", LongType()),
    ("dropped_bins", LongType()),  # replaced by a concurrent push: run again later
    ("input_segments", LongType()),
    ("output_segments", LongType()),
    ("input_bytes", LongType()),
    ("output_bytes", LongType()),
    ("rows_dropped", LongType()),
    ("deletes_remapped", LongType()),
    ("commits", ArrayType(LongType())),
    ("complete", BooleanType()),
    ("message", StringType()),
)


# -- argument checking ------------------------------------------------------------------
def _invalid(message: str) -> Exception:
    from mvtable.errors import InvalidOptionError

    return InvalidOptionError(message)


def storage_options(options: Any, *, procedure: str) -> dict[str, Any]:
    """``options => '{…}'`` (a JSON object, or NULL) as a dict."""
    if options is None or (isinstance(options, str) and not options.strip()):
        return {}
    if isinstance(options, Mapping):
        return dict(options)
    if not isinstance(options, str):
        raise _invalid(f"{procedure}: options must be a JSON object in a string, not {type(options).__name__}")
    try:
        parsed = json.loads(options)
    except ValueError as exc:
        raise _invalid(f'{procedure}: options is not valid JSON ({exc}); pass e.g. options => \'{{"key": "…"}}\'') from None
    if not isinstance(parsed, dict):
        raise _invalid(f"{procedure}: options must be a JSON object, not {type(parsed).__name__}")
    return parsed


def _table_arg(table: Any, procedure: str) -> str:
    if not isinstance(table, str) or not table.strip():
        raise _invalid(f"{procedure} needs table => '<path or URL of the table>'")
    return table


def _version_arg(version: Any, procedure: str) -> int | None:
    if version is None:
        return None
    if isinstance(version, bool):
        raise _invalid(f"{procedure}: version must be an integer, not a boolean")
    if isinstance(version, str) and version.strip().isdigit():
        version = int(version.strip())
    if not isinstance(version, int) or version < 0:
        raise _invalid(f"{procedure}: version must be a non-negative integer, not {version!r}")
    return version


def _bool_arg(value: Any, name: str, procedure: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _invalid(f"{procedure}: {name} must be true or false, not {value!r}")


def _str_arg(value: Any, name: str, procedure: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _invalid(f"{procedure}: {name} must be a non-empty string, not {value!r}")
    return value.strip()


def _open(table: Any, options: Any, procedure: str):
    from mvtable.connector.table import Table

    return Table.open(_table_arg(table, procedure), storage_options=storage_options(options, procedure=procedure))


def _json(obj: Mapping[str, Any]) -> str:
    return json.dumps(dict(obj), sort_keys=True, default=str)


# -- rows (shared with tests and other callers) -----------------------------------------
# States and operations are str enums; rows carry their plain values (``.value``) so Spark's
# serializers see ``str``.
def lineage_rows(table) -> Iterator[tuple]:
    for e in table.lineage():
        yield (
            e.id,
            list(e.segments_from),
            list(e.segments_to),
            e.state.value,
            e.timestamp,
            e.started_version,
            e.state_version,
            e.owner,
            e.lease_expires,
            e.status,
            e.revert_reason,
        )


def history_rows(table) -> Iterator[tuple]:
    for h in table.history():
        yield (h.version, h.timestamp, h.operation.value, _json(h.parameters), _json(h.metrics), h.writer)


def action_row(result) -> tuple:
    return (result.operation.value, result.version, result.changed, result.message)


def transaction_rows(table, transaction_id: str) -> Iterator[tuple]:
    """Roll back a multi-table transaction that wrote ``table``: one action row per table it wrote."""
    from mvtable.connector.transactions import rollback_transaction

    result = rollback_transaction(transaction_id, tables=[table], storage_options=table.storage_options)
    for uri, version in result.versions:
        changed = uri in result.changed
        what = "rolled back" if changed else "was rolled back already"
        yield ("TXN_ROLLBACK", version, changed, f"transaction {transaction_id} {what} in {uri}")


def vacuum_row(report) -> tuple:
    from mvtable.connector.describe import vacuum_changed, vacuum_summary

    files = list(report.files)
    return (
        bool(report.dry_run),
        vacuum_changed(report),
        len(files),
        int(report.bytes),
        int(report.segments_expired),
        int(report.entries_purged),
        int(report.safe_version),
        float(report.retention_s),
        bool(report.complete),
        int(report.batches),
        files if report.dry_run else None,
        with_holds(vacuum_summary(report), report.held_back),
    )


def gc_row(report) -> tuple:
    from mvtable.connector.describe import gc_changed, gc_files, gc_summary

    return (
        bool(report.dry_run),
        gc_changed(report),
        gc_files(report),
        int(report.bytes_freed),
        int(report.dv_files_deleted),
        int(report.log_files_deleted),
        int(report.pins_expired),
        int(report.safe_version),
        bool(report.complete),
        int(report.batches),
        list(report.deleted) if report.dry_run else None,
        with_holds(gc_summary(report), report.held_back),
    )


def compact_row(report) -> tuple:
    return (
        bool(report.dry_run),
        report.changed,
        report.bins,
        report.committed_bins,
        len(report.dropped),
        report.input_segments,
        report.output_segments,
        report.input_bytes,
        report.output_bytes,
        report.rows_dropped,
        report.deletes_remapped,
        list(report.commits),
        report.complete,
        report.summary(),
    )


# -- the UDTFs --------------------------------------------------------------------------
class LineageProcedure:
    """``mvtable_lineage(table [, options])``: one row per lineage entry, oldest first."""

    def eval(self, table: str, options: str | None = None) -> Iterator[tuple]:
        yield from lineage_rows(_open(table, options, "mvtable_lineage"))


class HistoryProcedure:
    """``mvtable_history(table [, options])``: one row per commit, oldest first."""

    def eval(self, table: str, options: str | None = None) -> Iterator[tuple]:
        yield from history_rows(_open(table, options, "mvtable_history"))


class RollbackProcedure:
    """``mvtable_rollback(table, entry => id | version => n | transaction => id [, options])``.

    It reverts one consistent push, restores the table as of a version, or rolls a
    multi-table transaction back in every table it wrote (one row per table)."""

    def eval(
        self,
        table: str,
        entry: str | None = None,
        version: int | None = None,
        options: str | None = None,
        transaction: str | None = None,
    ) -> Iterator[tuple]:
        name = "mvtable_rollback"
        entry_id, v = _str_arg(entry, "entry", name), _version_arg(version, name)
        txn = _str_arg(transaction, "transaction", name)
        if sum(x is not None for x in (entry_id, v, txn)) != 1:
            raise _invalid(f"{name} takes exactly one of entry => '<lineage entry id>', version => <n> and transaction => '<id>'")
        t = _open(table, options, name)
        if txn is not None:
            yield from transaction_rows(t, txn)
            return
        yield action_row(t.rollback(entry=entry_id) if entry_id is not None else t.rollback(version=v))


class RestoreProcedure:
    """``mvtable_restore(table, version => n [, options])``."""

    def eval(self, table: str, version: int | None = None, options: str | None = None) -> Iterator[tuple]:
        name = "mvtable_restore"
        v = _version_arg(version, name)
        if v is None:
            raise _invalid(f"{name} needs version => <n> (see mvtable_history for the versions)")
        yield action_row(_open(table, options, name).restore(version=v))


class PublishProcedure:
    """``mvtable_publish(table, entry => id [, options])``: complete a staged push."""

    def eval(self, table: str, entry: str | None = None, options: str | None = None) -> Iterator[tuple]:
        name = "mvtable_publish"
        entry_id = _str_arg(entry, "entry", name)
        if entry_id is None:
            raise _invalid(f"{name} needs entry => '<lineage entry id>' (see mvtable_lineage)")
        yield action_row(_open(table, options, name).publish(entry_id))


class VacuumProcedure:
    """``mvtable_vacuum(table [, dry_run, retention, force, options])``."""

    def eval(
        self, table: str, dry_run: bool = False, retention: str | None = None, force: bool = False, options: str | None = None
    ) -> Iterator[tuple]:
        name = "mvtable_vacuum"
        dry, forced, keep = (
            _bool_arg(dry_run, "dry_run", name),
            _bool_arg(force, "force", name),
            _str_arg(retention, "retention", name),
        )
        t = _open(table, options, name)
        yield vacuum_row(t.vacuum(retention=keep, dry_run=dry, force=forced))


class GCProcedure:
    """``mvtable_gc(table [, dry_run, options, force])``: visibility GC.

    ``force`` is for a table whose orphanGracePeriod is below the safe minimum."""

    def eval(self, table: str, dry_run: bool = False, options: str | None = None, force: bool = False) -> Iterator[tuple]:
        name = "mvtable_gc"
        dry, forced = _bool_arg(dry_run, "dry_run", name), _bool_arg(force, "force", name)
        yield gc_row(_open(table, options, name).collect_garbage(dry_run=dry, force=forced))


class CompactProcedure:
    """``mvtable_compact(table [, dry_run, target_size, min_input_files, delete_ratio, max_bytes_per_commit, options])``.

    Compaction, run inside this one task (for one Spark task per bin, call
    ``mvtable.compact(spark, path)`` from the driver)."""

    def eval(
        self,
        table: str,
        dry_run: bool = False,
        target_size: str | None = None,
        min_input_files: int | None = None,
        delete_ratio: float | None = None,
        max_bytes_per_commit: str | None = None,
        options: str | None = None,
    ) -> Iterator[tuple]:
        name = "mvtable_compact"
        t = _open(table, options, name)
        report = t.compact(
            target_file_size=_str_arg(target_size, "target_size", name),
            min_input_files=min_input_files,
            delete_ratio=float(delete_ratio) if isinstance(delete_ratio, (int, float, Decimal)) else delete_ratio,
            max_bytes_per_commit=_str_arg(max_bytes_per_commit, "max_bytes_per_commit", name),
            dry_run=_bool_arg(dry_run, "dry_run", name),
        )
        yield compact_row(report)


PROCEDURES: dict[str, tuple[type, StructType]] = {
    "mvtable_lineage": (LineageProcedure, LINEAGE_SCHEMA),
    "mvtable_history": (HistoryProcedure, HISTORY_SCHEMA),
    "mvtable_rollback": (RollbackProcedure, ACTION_SCHEMA),
    "mvtable_restore": (RestoreProcedure, ACTION_SCHEMA),
    "mvtable_publish": (PublishProcedure, ACTION_SCHEMA),
    "mvtable_vacuum": (VacuumProcedure, VACUUM_SCHEMA),
    "mvtable_gc": (GCProcedure, GC_SCHEMA),
    "mvtable_compact": (CompactProcedure, COMPACT_SCHEMA),
}


def with_holds(summary: str, holds: Any) -> str:
    """A maintenance summary with what held the run back (pins, retention, grace periods)."""
    from mvtable.connector.holds import describe

    lines = describe(holds, limit=5)
    return summary + ("; kept because: " + "; ".join(lines) if lines else "")


def register_procedures(spark: Any) -> list[str]:
    """Register every procedure this session does not have yet as a SQL table function of ``spark``.

    Returns the names of all of them."""
    from pyspark.sql.functions import udtf

    for name, (cls, schema) in PROCEDURES.items():
        if spark.catalog.functionExists(name):
            continue
        # Plain (pickled-row) UDTFs: Arrow UDTFs need pandas, and these return a row or a few.
        spark.udtf.register(name, udtf(cls, returnType=schema, useArrow=False))
    return list(PROCEDURES)
