"""``read_native(spark, path)``: an mvtable snapshot as a DataFrame on Spark's own Parquet reader, deletes applied in the JVM.

Why a second read path: every batch of a Python data source crosses from a Python worker
into the JVM as Arrow, and Spark converts it to rows there (``decimal128`` one value at a
time). That ingest alone costs more than Spark's native Parquet scan, before any Parquet
decode or deletion mask, which puts a scan with deletes above its targets
(benchmarks/README.md has the ingest floor). Spark's vectorized Parquet reader has no such
cost, and since Spark 3.5 it generates each row's position in its file
(``_metadata.row_index``), which is exactly what a deletion vector addresses. So:

* the snapshot (version, time travel, staged lineage entry) is resolved and pinned on the
  driver, like the data source does, and Spark reads just its visible segment files, with
  the table's schema (no inference, no listing of ``data/``);
* segments without a deletion vector are a plain Parquet scan; the others are read by
  ``native_jvm``'s ``MaskedParquetFileFormat`` (Spark's Parquet format plus a column that
  marks each deleted row, filled in the JVM from the row positions Spark's reader
  generates), and the two are unioned.

Spark's own Parquet filter pushdown, row-group skipping, column pruning and file splitting
apply to filters and projections written on the result (they are pushed into the scans). On
a partitioned table the files are read through mvtable's file index (``PlannedScan.java``),
which knows each file's partition (``native_partitions``): those filters then skip whole
files of other partitions too, and a column every file's partition fixes (identity, ``day``
of a date) is served from the partition rather than read (``PartitionValues.java``).

Where that JVM class cannot be built or loaded (no JDK, Spark Connect,
``MVTABLE_JVM_MASK=off``), the masked segments are read by ``spark.read.parquet`` with
``_metadata.row_index`` and filtered by their dense deletion bitmaps in Spark expressions
(``native_mask``): the same rows, but slower than the JVM mask, which reads at about native
Parquet speed (``benchmarks/README.md``, "The JVM mask").

Limits: the paths (segments and deletion-vector files) must be readable by Spark's Hadoop
file systems (``spark_uri`` maps the table root, e.g. ``s3://`` for fsspec to ``s3a://``
for Hadoop). The JVM mask ships only the deletion vectors' locations and executors read
them; the expression mask builds the bitmaps on the driver and ships them with the plan
(inline, up to 32 MB) or broadcast (join), ~125 MB for deletes in a billion rows."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from mvtable.conf import parse_period
from mvtable.errors import InvalidOptionError, SchemaMismatchError
from mvtable.storage import open_file_io

from ..partitions.pruning import prune_segments
from ..pinning import PinnedSnapshot, pin_snapshot
from ..post_commit import open_log
from ..scan import stats_apply
from ..schema import schema_from_json, schema_to_json
from ..schema_evolution.field_ids import strip_ids
from ..stats import Predicate, row_groups_to_read
from . import native_jvm
from .native_args import Filter, checked_columns, to_predicates
from .native_evolution import physical_schema, projection_exprs
from .native_mask import apply_mask, mask_for, unused_name
from .native_partitions import file_bounds
from .native_plan import PROTOCOL, PlannedFile, by_file_schema, file_entry, planned_files, scan_segments

logger = logging.getLogger("mvtable.connector")

_SQL_OPS = {"==": "=", "=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def read_native(
    spark: Any,
    path: str,
    *,
    version: int | None = None,
    timestamp: str | None = None,
    lineage_entry: str | None = None,
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] | None = (),
    storage_options: Mapping[str, Any] | None = None,
    spark_uri: str | None = None,
    pin_ttl: str | None = None,
    min_partitions: int | None = None,
) -> Any:
    """The rows of one snapshot of the table at ``path`` as a DataFrame read by Spark's native Parquet reader, deletes removed.

    See the module docstring for how.

    ``version`` / ``timestamp`` (a timestamp string, as ``timestampAsOf``) travel in time;
    ``lineage_entry`` reads the staged snapshot of a consistent push (write-audit-publish);
    ``columns`` projects (Spark prunes columns itself, so this is only a convenience);
    ``filters`` (``[("l_shipdate", ">=", date(1994, 1, 1)), …]``) are applied to the result
    *and* prune whole segments first, by partition (a ``ts`` range drops the other days of a
    ``day(ts)`` table from the log alone, as ``Table.scan`` does) and then by the log's
    statistics, so a one-month query neither lists the other files nor builds their deletion
    bitmaps (filters written
    later on the DataFrame are still pushed into the Parquet scan, and with the JVM mask skip
    other partitions' files, but cannot prune the bitmaps); ``spark_uri`` is the table root as Spark's file systems name it when that
    differs from ``path``. The version is pinned for ``pin_ttl`` (default ``pinTtl``) so
    that visibility GC keeps its deletion vectors and vacuum its files while the DataFrame
    is in use; the pin is never released (Spark says nothing when a DataFrame is dropped),
    it expires.

    Partitioning is Spark's own file-source sizing (``spark.sql.files.maxPartitionBytes``,
    ``spark.sql.files.minPartitionNum``, default the cluster's parallelism; files with
    deletes split like any other, Spark generating ``row_index`` per split).
    ``min_partitions`` raises ``spark.sql.files.minPartitionNum`` to at least that for the
    session (Spark reads it when it plans each query, so it cannot be scoped to one
    DataFrame) — the counterpart of the data source's ``minPartitions`` option.

    Use it where Spark's Parquet speed matters (full scans, wide rows, SQL through
    ``create_view``); the ``mvtable`` data source remains the reader for everything else
    (row addresses, S3 through fsspec without Hadoop).

    Raises:
        InvalidOptionError: More than one of ``version``, ``timestamp`` and ``lineage_entry``,
            a malformed ``columns``, ``filters``, ``pin_ttl`` or ``min_partitions``, a column
            the table does not have, or a ``lineage_entry`` it does not have (or has reverted).
        InvalidFilterError: A filter does not fit the table's schema.
        SchemaMismatchError: The table has a column named ``_metadata`` and mvtable's JVM mask
            is not available here; read it with ``spark.read.format("mvtable")``.
        TableNotFoundError: There is no mvtable table at ``path``.
        VersionNotFoundError: No such version (or no longer), or none at or before ``timestamp``.
        DeletionVectorNotFoundError: The version's deletion vectors were collected before it
            was pinned; read a newer version.
        FilesMissingError: A data file the version needs is gone (vacuumed or deleted by hand).
        CorruptSegmentError: A data file's footer is not the one the log recorded.
        CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
        StorageLocationError: ``path`` cannot hold a table (an empty path, a file, an unknown protocol).
        StorageError: The store refused or failed a read (permissions, network).
    """
    if sum(x is not None for x in (version, timestamp, lineage_entry)) > 1:
        raise InvalidOptionError("read_native: pass at most one of version, timestamp and lineage_entry")
    ttl_s = None if pin_ttl is None else parse_period(pin_ttl, name="read_native pin_ttl")  # SettingsError if bad
    io = open_file_io(path, dict(storage_options or {}))
    pinned = pin_snapshot(io, open_log(io), version=version, timestamp=timestamp, ttl_s=ttl_s, owner="read_native")
    try:
        return native_frame(
            spark,
            pinned,
            lineage_entry=lineage_entry,
            columns=columns,
            filters=filters,
            spark_uri=spark_uri,
            min_partitions=min_partitions,
        )
    except BaseException:
        pinned.release()
        raise


def native_frame(
    spark: Any,
    pinned: PinnedSnapshot,
    *,
    lineage_entry: str | None = None,
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] | None = (),
    spark_uri: str | None = None,
    min_partitions: int | None = None,
) -> Any:
    """``read_native`` of a snapshot the caller pinned already.

    ``create_view`` holds its own pin for as long as the view lives."""
    from pyspark.sql.types import StructType

    _raise_min_partitions(spark, min_partitions)
    io, snapshot = pinned.io, pinned.snapshot
    table_schema = schema_from_json(snapshot.table_schema)
    out_schema = checked_columns(columns, table_schema)
    predicates = to_predicates(filters, table_schema)
    segments = scan_segments(snapshot, lineage_entry)
    if predicates:
        # by partition first, from the log alone (as plan_scan): no statistic of, footer of or
        # deletion vector of another partition's segment is looked at
        segments, by_partition = prune_segments(
            segments,
            specs=snapshot.partition_specs,
            table_schema=snapshot.table_schema,
            arrow=table_schema,
            predicates=predicates,
        )
        by_partitions = len(segments)
        segments = [
            seg
            for seg in segments
            if not stats_apply(snapshot, seg) or row_groups_to_read(seg.file.row_groups, predicates, table_schema)
        ]
        logger.debug(
            "read_native: %d segment(s) read; %d pruned by partition, %d by statistics",
            len(segments),
            by_partition,
            by_partitions - len(segments),
        )
    full = StructType.fromJson(strip_ids(schema_to_json(table_schema)))  # Spark's schema shows no field ids
    names = list(out_schema.names)
    where = " AND ".join(_sql(p, table_schema) for p in predicates)
    if not segments:
        return spark.createDataFrame([], full).select(*names)

    root = (spark_uri or io.uri).rstrip("/")
    parts = []
    jvm = native_jvm.available(spark)
    bounds = file_bounds(snapshot, segments) if jvm else {}  # each partitioned file's, for PlannedScan.java
    # segments written under an older schema are read per file schema, by field id (native_evolution);
    # every footer is checked on the way (Spark checks the pages, not the footers)
    by_schema = by_file_schema(io, snapshot, segments, table_schema)
    for projection, file_schema, members in by_schema:
        read_schema = full if projection is None else physical_schema(projection, file_schema)
        # files without deletes are a plain scan (no row_index to generate); a union also keeps
        # their sizes out of the mask's file keys. Partitioned files go on mvtable's file index, so
        # a WHERE on the result skips other partitions' files (bounds name today's columns: not
        # for files of an older schema); the others are read as Spark lists them.
        for deletes, on_index in ((False, True), (False, False), (True, True), (True, False)):
            group = [
                seg
                for seg in members
                if (snapshot.dvs.get(seg.id) is not None) == deletes and (projection is None and seg.id in bounds) == on_index
            ]
            if not group:
                continue
            planned = planned_files(snapshot, group, root=root)
            files = [f.path for f in planned]
            if on_index:
                mask = unused_name("_mv_deleted", read_schema.names) if deletes else None
                df = _planned_scan(spark, read_schema, planned, bounds, root=root, mask_column=mask)
            elif not deletes:
                df = spark.read.schema(read_schema).options(**native_jvm.VERIFY_PAGE_CHECKSUMS).parquet(*files)
            elif jvm:
                lines = [f.dv for f in planned if f.dv is not None]
                df = native_jvm.masked_scan(
                    spark, read_schema, files, lines, mask_column=unused_name("_mv_deleted", read_schema.names)
                )
            else:
                _refuse_metadata_column(table_schema)
                scan = spark.read.schema(read_schema).options(**native_jvm.VERIFY_PAGE_CHECKSUMS).parquet(*files)
                df = apply_mask(scan, mask_for(spark, io, snapshot, group), read_schema.names)
            if projection is not None:
                df = df.selectExpr(*projection_exprs(projection))
            parts.append(df.where(where) if where else df)
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.selectExpr(*[_quote(n) for n in names])


def _planned_scan(
    spark: Any,
    schema: Any,
    planned: Sequence[PlannedFile],
    bounds: Mapping[str, list[dict[str, Any]]],
    *,
    root: str,
    mask_column: str | None,
) -> Any:
    """``planned`` read by Spark's Parquet scan on mvtable's file index (``PlannedScan.java``).

    With ``mask_column`` (every file has deletes) the JVM mask fills it and deleted rows are
    dropped. The file index knows each file's partition bounds, so filters written on the result
    skip whole files (``native_partitions``)."""
    from pyspark.sql import DataFrame

    jsession = spark._jsparkSession
    native_jvm.session_loader(spark)
    plan = {
        "protocol": PROTOCOL,
        "native": True,
        "version": 0,
        "pinId": "",
        "root": root,
        "files": [file_entry(f, bounds.get(f.segment)) for f in planned],
    }
    jschema = jsession.parseDataType(schema.json())
    jdf = spark._jvm.io.mvtable.spark.PlannedScan.frame(jsession, json.dumps(plan), jschema, mask_column)
    df = DataFrame(jdf, spark)
    return df if mask_column is None else df.where(f"`{mask_column}` = 0").drop(mask_column)


def _refuse_metadata_column(table_schema: pa.Schema) -> None:
    if any(n.lower() == "_metadata" for n in table_schema.names):
        raise SchemaMismatchError(
            "the table has a column named _metadata, which hides Spark's file metadata column that the expression "
            "mask applies deletion vectors with (used where mvtable's JVM mask is not available: "
            f"{native_jvm.SWITCH}=off, no javac, Spark Connect); read it with spark.read.format('mvtable') instead"
        )


_MIN_PARTITIONS = "spark.sql.files.minPartitionNum"


def _raise_min_partitions(spark: Any, n: int | None) -> None:
    """``min_partitions``: raise Spark's ``spark.sql.files.minPartitionNum`` for the session, never lower it.

    Spark sizes file scans by it (default: the cluster's parallelism), a session setting
    read when each query is planned, so it cannot be scoped to one read; this logs that it
    raised it."""
    if n is None:
        return
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidOptionError(f"read_native: min_partitions must be a positive integer, not {n!r}")
    current = spark.conf.get(_MIN_PARTITIONS, None)
    if current is None or int(current) < n:
        spark.conf.set(_MIN_PARTITIONS, str(n))
        logger.info("read_native: %s raised to %d for this session (was %s)", _MIN_PARTITIONS, n, current or "unset")


def _sql(p: Predicate, schema: pa.Schema) -> str:
    col = _quote(p.column)
    if p.op == "is_null":
        return f"{col} IS NULL"
    if p.op == "not_null":
        return f"{col} IS NOT NULL"
    t = schema.field(p.column).type
    if p.op in ("in", "not_in"):
        items = ", ".join(_literal(v, t) for v in p.value)
        return f"{col} {'IN' if p.op == 'in' else 'NOT IN'} ({items})" if items else ("false" if p.op == "in" else "true")
    return f"{col} {_SQL_OPS[p.op]} {_literal(p.value, t)}"


def _literal(value: Any, t: pa.DataType) -> str:
    """A Spark SQL literal for ``value`` compared with a column of type ``t``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, Decimal)):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise InvalidOptionError(f"read_native: cannot compare a {t} column with {value!r}")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
