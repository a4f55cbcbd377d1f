"""``format("mvtable")`` and ``USING mvtable`` on Spark's own Parquet scan: the Python half.

With mvtable's jar on the classpath, Spark resolves ``mvtable`` to the JVM class
``mvtable.DefaultSource`` (``jvm/DefaultSource.java``) before it asks for the Python source:
Spark's ``DataSource.lookupDataSource`` tries a class named ``<format>.DefaultSource`` first.
That class *is* Spark's Python data source provider, so everything it does not override runs
this package's ``MvTableDataSource`` unchanged: writes, streams, reads with a user schema.
For a batch read it adds the internal option ``PLAN_OPTION`` to the one planner call Spark
makes anyway (the source's ``schema()``, in Spark's pooled planner worker). ``schema()`` then
pins the version as always and also returns the *scan plan* (the files, their sizes and row
counts, where each deletion vector is) as JSON in the metadata of the first field: the
schema is the one thing that call brings back to the JVM. The JVM takes the plan out of the
schema, and its optimizer rule (``NativeScanRule``) reads those files with
``MaskedParquetFileFormat``: Spark's column pruning, filter pushdown and file splitting
apply, with no Python call per query; on a partitioned table each file carries its partition
as bounds on its columns, and the scan's file index skips the files Spark's filters rule out
(``native_partitions``). Files written under an older schema (a column since renamed,
dropped or widened) come in groups, one per file schema, each with the Spark SQL that reads
the table's columns from it by field id; the rule scans each group with its own columns and
unions the projections. The plan lives in the DataFrame's (or view's) analyzed plan, so it stays on the version it pinned, as the Python route does.

The pin, though, is held only while a query reads it: Spark tells the JVM when each SQL
query starts and ends, which it never tells a Python source. ``PinLifetime.java`` counts the
running queries of each plan. A plan starts idle: its pin lasts ``pinIdleTtl``. A query
runs under that pin while at least half of it is left, with no call here; one that starts
later, or is still running by then, has the JVM ask this source to renew the pin to ``pinTtl``
(``renewed``: it pins the version again if the pin lapsed and the version is still whole, else
raises the typed error), and when the last running query ends it asks to cut the renewed pin
back to ``pinIdleTtl`` (``idled``). So a finished Spark job holds back GC and vacuum for at
most ``pinIdleTtl``, not ``pinTtl``; the Python route keeps the ``pinTtl`` rule (``source``).

Why this route: a rule alone that finds the Python relation has no plan to use and would
have to call Python again per DataFrame (a second pin, possibly of another version) or per
query (a view would move between versions); a JVM provider that starts a Python process
per read pays an interpreter start on every ``load()``; a JVM source registered under the
name ``mvtable`` clashes with the Python one (Spark versions differ in which wins). Asking
Spark's own pooled planner worker, in the call it makes anyway, costs nothing extra per
DataFrame and nothing per query, and finds the Python environment (``spark.pyspark.python``,
worker env) Spark has already set up (measurements: benchmarks/README.md). Planning stays
here; the JVM only routes and reads.

A read the native scan cannot serve exactly is declined with a reason; the JVM logs the
reason once and reads through the Python source: the change feed (it binds to no version),
``MVTABLE_JVM_MASK=off``, the Python source's partition sizing options, stream options, a table on storage that Spark's
Hadoop file systems do not read (anything but local files)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from mvtable.errors import MvTableError
from mvtable.lineage.snapshot import Snapshot

from ..options import ReadOptions, option_names
from ..parallel import ordered_map
from ..pinning import PinnedSnapshot, idle, pin_ttl_s
from ..scan import staged_segments
from ..schema import schema_from_json
from ..schema_evolution.projection import ReadProjection, resolve
from ..segments import check_footers, open_parquet
from . import native_jvm
from .native_evolution import physical_schema, projection_exprs
from .native_partitions import file_bounds

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

logger = logging.getLogger("mvtable.connector")

PLAN_OPTION = "mvtable.nativePlan"  # set by DefaultSource.java; never reaches option checks
RENEW_OPTION = "mvtable.renewPin"  # "<version>:<pin id>", set by NativeScanRule.java when a renewal is due
IDLE_OPTION = "mvtable.idlePin"  # "<version>:<pin id>", set by PinLifetime.java when no running query reads it
PLAN_KEY = "mvtable.nativePlan"  # the field-metadata key NativePlan.java reads
_FOOTER_READERS = 8  # footers read at once when grouping files by schema (storage round trips)
PROTOCOL = 2  # NativePlan.PROTOCOL: a jar and a package of other versions fall back


_STREAM_OPTIONS = frozenset(
    {
        "starting_version",
        "starting_timestamp",
        "ending_version",
        "max_rows_per_trigger",
        "max_bytes_per_trigger",
        "skip_change_commits",
    }
)


def _names(fields: Iterable[str]) -> str:
    return ", ".join(sorted(option_names(fields)))


@dataclass(frozen=True)
class PlannedFile:
    """One segment file as Spark's Hadoop file systems name it, with its deletion vector.

    ``dv`` is the vector's line for ``MaskedParquetFileFormat`` (``None``: nothing deleted in it)."""

    path: str
    size: int
    rows: int
    dv: str | None
    segment: str


@dataclass(frozen=True)
class JvmRequest:
    """What the JVM asked the source for besides a schema.

    That is the scan plan, the renewal of the pin a plan holds (``renew``: ``"<version>:<pin id>"``)
    or its cut to the idle lifetime (``idle``, the same form)."""

    plan: bool = False
    renew: str | None = None
    idle: str | None = None


def take_jvm_options(options: Mapping[str, Any]) -> tuple[Any, JvmRequest]:
    """``options`` without the JVM's internal options, and what those asked for.

    They are not read options, and read options refuse unknown names."""
    internal = {PLAN_OPTION.lower(), RENEW_OPTION.lower(), IDLE_OPTION.lower()}
    found = {k.lower(): v for k, v in options.items() if k.lower() in internal}
    if not found:
        return options, JvmRequest()
    kept = {k: v for k, v in options.items() if k.lower() not in internal}
    request = JvmRequest(
        plan=PLAN_OPTION.lower() in found, renew=found.get(RENEW_OPTION.lower()), idle=found.get(IDLE_OPTION.lower())
    )
    try:
        return type(options)(kept), request  # type: ignore[call-arg]  # Spark's case-insensitive dict keeps its type
    except TypeError:
        return kept, request


def renewed(opts: ReadOptions, token: str) -> StructType:
    """Renew the pin of a native read (``token``: ``"<version>:<pin id>"``) for ``pinTtl`` more.

    It pins the version again if the pin expired while it is still whole (else the
    ``PinExpiredError`` / ``NotFoundError`` a Python read would raise); the schema carries
    the pin that now holds the version. The JVM asks while the DataFrame or view is queried,
    before a query runs when the pin was cut to ``pinIdleTtl`` (see ``idled``), and once half of
    ``pinTtl`` has passed, as the Python reader's tasks renew theirs."""
    from pyspark.sql.types import StringType, StructField, StructType

    from mvtable.storage import open_file_io

    from ..pinning import SnapshotPin, renew
    from ..post_commit import open_log

    version, _, pin_id = token.partition(":")
    io = open_file_io(opts.path, opts.storage_options)
    pin = renew(io, SnapshotPin(int(version), pin_id), commit_log=open_log(io), owner="Spark read")
    doc = {"protocol": PROTOCOL, "renewed": True, "version": pin.version, "pinId": pin.pin_id}
    return StructType([StructField("renewed", StringType(), True, {PLAN_KEY: json.dumps(doc)})])


def idled(opts: ReadOptions, token: str) -> StructType:
    """Cut the pin of a native read (``token``: ``"<version>:<pin id>"``) to ``pinIdleTtl`` from now.

    The JVM asks when Spark reports that the last running query reading it has ended
    (``PinLifetime.java``): a DataFrame or ``USING`` view may be queried again, so its pin
    is not released, but GC and vacuum need not wait ``pinTtl`` for a read nobody runs.
    Its next query renews the pin first (``renewed``)."""
    from pyspark.sql.types import StringType, StructField, StructType

    from mvtable.storage import open_file_io

    from ..pinning import SnapshotPin, idle

    version, _, pin_id = token.partition(":")
    idle(open_file_io(opts.path, opts.storage_options), SnapshotPin(int(version), pin_id), ttl_s=opts.pin_idle_ttl_s)
    doc = {"protocol": PROTOCOL, "idled": True, "version": int(version), "pinId": pin_id}
    return StructType([StructField("idled", StringType(), True, {PLAN_KEY: json.dumps(doc)})])


def table_root(uri: str) -> str:
    """The table root as Spark's Hadoop file systems name it (a local path as ``file:``)."""
    if "://" not in uri:
        return "file://" + os.path.abspath(uri).rstrip("/")
    return uri.rstrip("/")


def scan_segments(snapshot: Snapshot, lineage_entry: str | None) -> list[Any]:
    """The segments a read of ``snapshot`` sees (a staged push's with ``lineage_entry``)."""
    return staged_segments(snapshot, lineage_entry) if lineage_entry else snapshot.visible_segments()


def schema_never_changed(snapshot: Snapshot) -> bool:
    """Whether every file of ``snapshot`` has its schema, known without opening one (ids recorded, no change since)."""
    return snapshot.schema_id == 0 and snapshot.schema_break_version < 0 and bool(snapshot.last_field_id)


def by_file_schema(
    io: Any, snapshot: Snapshot, segments: Sequence[Any], table_schema: Any
) -> list[tuple[ReadProjection | None, Any, list[Any]]]:
    """``segments`` grouped by how they read under ``table_schema``: (projection or None, a file schema, members).

    Spark's Parquet scan matches columns by name, so the files whose columns differ by field id from
    the table's (written before a rename, drop or type change, or before field ids) are read with a
    projection per file schema (``native_evolution``). The files that read as they are form one
    group, with projection and schema None, first; a table whose schema never changed is that group
    alone. Every footer is read once and checked against the log either way: Spark's reader checks
    the pages, not the footers, so this is the scan's footer check too.

    Raises:
        FilesMissingError: a file is gone.
        CorruptSegmentError: a footer is damaged."""
    if schema_never_changed(snapshot):
        check_footers(io, [seg.file for seg in segments])
        return [(None, None, list(segments))]

    def file_schema(seg: Any) -> pa.Schema:
        return open_parquet(io, seg.file.path, footer_crc32=seg.file.footer_crc32).schema_arrow

    as_is: list[Any] = []
    groups: dict[bytes, tuple[ReadProjection | None, Any, list[Any]]] = {}
    schemas = ordered_map(file_schema, segments, workers=min(_FOOTER_READERS, max(1, len(segments))))
    for seg, schema in zip(segments, schemas):
        key = schema.serialize().to_pybytes()
        if key not in groups:
            groups[key] = (resolve(schema, table_schema), schema, [])
        (as_is if groups[key][0] is None else groups[key][2]).append(seg)
    evolved = [g for g in groups.values() if g[0] is not None]
    return ([(None, None, as_is)] if as_is else []) + evolved


def schema_groups(io: Any, snapshot: Snapshot, segments: Sequence[Any]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The plan's file schemas other than the table's, and the one each segment of such a schema has (by segment id).

    Each group is its files' physical read schema (Spark JSON) and, per table column, the Spark SQL
    expression over those columns that reads it (``native_evolution``): the JVM scans each group
    with its schema and projects it to the table's columns, by field id. Segments of the table's
    own schema are in no group."""
    groups: list[dict[str, Any]] = []
    group_of: dict[str, int] = {}
    for projection, file_schema, members in by_file_schema(io, snapshot, segments, schema_from_json(snapshot.table_schema)):
        if projection is None:
            continue
        columns = dict(zip(projection.columns, projection_exprs(projection)))
        groups.append({"schema": physical_schema(projection, file_schema).jsonValue(), "columns": columns})
        group_of.update((seg.id, len(groups) - 1) for seg in members)
    return groups, group_of


def planned_files(snapshot: Snapshot, segments: Sequence[Any], *, root: str) -> list[PlannedFile]:
    """The files of ``segments`` under ``root``, each with its deletion vector's line."""
    out = []
    for seg in segments:
        ref = snapshot.dvs.get(seg.id)
        name = seg.file.path.rsplit("/", 1)[-1]
        dv = None if ref is None else native_jvm.dv_line(name, seg.file.num_rows, ref, root=root)
        out.append(PlannedFile(f"{root}/{seg.file.path}", int(seg.file.size_bytes), int(seg.file.num_rows), dv, seg.id))
    return out


def decline_reason(opts: ReadOptions, *, uri: str) -> str | None:
    """Why this read cannot run on Spark's Parquet scan, or ``None`` when it can."""
    if os.environ.get(native_jvm.SWITCH, "").lower() in ("off", "0", "false", "no"):
        return f"{native_jvm.SWITCH}=off"
    if opts.read_change_feed:
        return "readChangeFeed reads versions one after another"
    sizing = {"max_partition_bytes", "min_partitions"} & opts.model_fields_set
    if sizing:
        # Spark's file scan sizes its splits by spark.sql.files.maxPartitionBytes / minPartitionNum
        return f"{_names(sizing)} size the Python source's partitions"
    unbound = _STREAM_OPTIONS & opts.model_fields_set
    if unbound:  # a stream's, or options a batch read refuses (the Python reader says which)
        return f"{_names(unbound)} are options of streams and change feeds"
    scheme = uri.split("://", 1)[0].lower() if "://" in uri else "file"
    if scheme != "file":
        return f"the table is on {scheme}:// storage, which mvtable reads itself (Spark's file scan reads local tables)"
    return None


def with_plan(schema: StructType, opts: ReadOptions, pinned: PinnedSnapshot | None) -> StructType:
    """``schema`` with the scan plan (or the reason there is none) in its first field's metadata.

    ``pinned`` is the read's pinned snapshot (``None`` for a change feed)."""
    uri = pinned.io.uri if pinned is not None else opts.path
    reason = "the table has no columns" if not schema.fields else decline_reason(opts, uri=uri)
    if reason is not None or pinned is None:
        return _attach(schema, {"protocol": PROTOCOL, "native": False, "reason": reason or "nothing pinned"})
    snapshot = pinned.snapshot
    root = table_root(uri)
    try:
        segments = scan_segments(snapshot, opts.lineage_entry)
    except MvTableError as exc:  # a bad lineageEntry: the Python source raises it where it always has
        return _attach(schema, {"protocol": PROTOCOL, "native": False, "reason": f"the scan cannot be planned: {exc}"})
    # files written under an older schema: read per file schema, projected by field id (NativeScanRule.java);
    # every footer checked on the way (Spark checks the pages, not the footers)
    groups, group_of = schema_groups(pinned.io, snapshot, segments)
    files = planned_files(snapshot, segments, root=root)
    bounds = file_bounds(snapshot, segments)  # PlannedFileIndex skips files by Spark's filters with them
    # no query runs it yet: the pin lasts pinIdleTtl until the first one renews it (PinLifetime.java)
    idle(pinned.io, pinned.pin, ttl_s=opts.pin_idle_ttl_s)
    plan = {
        "protocol": PROTOCOL,
        "native": True,
        "version": pinned.version,
        "pinId": pinned.pin.pin_id,
        "renewAfterMs": int(pin_ttl_s() * 500),  # half of pinTtl, as the Python reader's tasks
        "idle": True,
        "idleTtlMs": int(opts.pin_idle_ttl_s * 1000),
        "root": root,
        "rowAddress": opts.with_row_address,  # _mv_segment, _mv_row: filled by MaskedParquetFileFormat
        "groups": groups,
        # bounds name today's columns: not for the files of an older schema
        "files": [
            file_entry(f, None, group=group_of[f.segment]) if f.segment in group_of else file_entry(f, bounds.get(f.segment))
            for f in files
        ],
    }
    return _attach(schema, plan)


def file_entry(f: PlannedFile, bounds: list[dict[str, Any]] | None, *, group: int | None = None) -> dict[str, Any]:
    """One file of a scan plan as the JVM reads it (``NativePlan.java``); ``group``: its schema group, if not the table's."""
    entry: dict[str, Any] = {"path": f.path, "size": f.size, "rows": f.rows, "dv": f.dv, "segment": f.segment}
    if bounds:
        entry["bounds"] = bounds
    if group is not None:
        entry["group"] = group
    return entry


def _attach(schema: StructType, plan: dict[str, Any]) -> StructType:
    from pyspark.sql.types import StructField, StructType

    if not schema.fields:
        return schema
    first = schema.fields[0]
    meta = {**(first.metadata or {}), PLAN_KEY: json.dumps(plan, separators=(",", ":"))}
    return StructType([StructField(first.name, first.dataType, first.nullable, meta), *schema.fields[1:]])


def attach_jar(spark: Any) -> bool:
    """Make ``format("mvtable")`` in ``spark`` use the native scan where it can.

    The jar is added to the running session (built on first use). ``False`` (the reason
    logged once): every read goes through the Python source."""
    return native_jvm.available(spark)
