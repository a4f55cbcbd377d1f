"""Reading the change feed: the rows each version inserted and deleted.

Nothing is written for the feed at commit time. A version's changes (``versions.advance``)
name segments and deletion vectors the table keeps anyway, and the rows are read from the
segment files:

* a segment that became visible: its live rows, as inserts;
* a segment that stopped being visible: its rows live just before, as deletes;
* a DV that changed: the rows at the positions it gained, as deletes (the positions it
  lost, when a restore undeletes rows, as inserts) — one bitmap difference and a read of
  only the row groups holding those positions.

For an upsert (``UPSERT`` commits name their key columns) the deleted and inserted rows of
one version are paired by key: a key on both sides is an ``update_preimage`` /
``update_postimage`` pair, as in Delta's change data feed.

Each ``ChangeUnit`` carries everything an executor needs, so Spark reads them in tasks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from mvtable import checks
from mvtable.errors import InvalidOptionError, SchemaMismatchError, VersionNotFoundError
from mvtable.lineage.snapshot import SegmentState, Snapshot
from mvtable.storage import FileIO
from mvtable.visibility import deleted_in_range, load_dv, positions_array, process_cache

from ..expressions import check_filter, referenced_columns
from ..partitions.pruning import prune_segments
from ..pinning import pin_version, release
from ..post_commit import open_log
from ..scan import ScanTask, read_task
from ..schema import project, schema_from_json
from ..segments import iter_segment
from .versions import ChangeKind, SegmentChange, VersionDelta
from .walker import VersionWalker, check_readable

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)

INSERT = "insert"
DELETE = "delete"
UPDATE_PREIMAGE = "update_preimage"
UPDATE_POSTIMAGE = "update_postimage"

# Spark's TimestampType as Arrow (to_arrow_schema(..., timezone="UTC"))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


def change_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` plus the three change-feed columns.

    Raises:
        SchemaMismatchError: The table has a column of one of those names already."""
    taken = [n for n in schema.names if n.lower() in CHANGE_COLUMNS]
    if taken:
        raise SchemaMismatchError(
            f"the table has column(s) {taken}, which the change feed adds itself: it cannot be read as a change "
            "feed (a table that stores a change feed has them; read it as a plain table or select other columns)"
        )
    return (
        schema.append(pa.field(CHANGE_TYPE, pa.string(), nullable=False))
        .append(pa.field(COMMIT_VERSION, pa.int64(), nullable=False))
        .append(pa.field(COMMIT_TIMESTAMP, TIMESTAMP_TYPE, nullable=False))
    )


@dataclass(frozen=True)
class ChangeUnit:
    """The smallest piece of a version read at once: one segment's change, or all of an upsert's changes.

    An upsert's changes are paired by key, so they are read together."""

    version: int
    timestamp_ms: int
    changes: tuple[SegmentChange, ...]
    primary_key: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.changes)

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.changes)


def units_of(delta: VersionDelta) -> list[ChangeUnit]:
    """A version's changes cut into units, in the order the feed emits them."""
    if not delta.changes:
        return []
    if delta.primary_key:
        return [ChangeUnit(delta.version, delta.timestamp_ms, delta.changes, delta.primary_key)]
    return [ChangeUnit(delta.version, delta.timestamp_ms, (c,)) for c in delta.changes]


def read_unit(
    io: FileIO,
    unit: ChangeUnit,
    *,
    columns: Sequence[str] | None,
    with_meta: bool,
    schema: pa.Schema | None = None,
    primary_key: Sequence[str] = (),
) -> Iterator[pa.Table]:
    """The rows of ``unit``, projected to ``columns`` (all when None).

    They are tagged with the change-feed columns when ``with_meta``. ``schema`` is the table schema
    the feed is read under: every segment resolves its columns by its field ids, whatever schema it
    was written with. ``primary_key`` is the key under that schema: an upsert committed before a key
    column was renamed named the key by its old name."""
    key = unit.primary_key
    if key and schema is not None and primary_key and not all(k in schema.names for k in key):
        key = tuple(primary_key)
    read_cols = None if columns is None else list(dict.fromkeys([*columns, *key]))
    tagged: Iterator[tuple[str, pa.Table]] = (
        pair for c in unit.changes for pair in read_change(io, c, columns=read_cols, schema=schema)
    )
    if key:
        tagged = iter(pair_updates(list(tagged), key))
    for change_type, table in tagged:
        if columns is not None and table.column_names != list(columns):
            table = table.select(list(columns))
        if with_meta:
            table = tag(table, change_type, unit.version, unit.timestamp_ms)
        yield table


def tag(table: pa.Table, change_type: str, version: int, timestamp_ms: int) -> pa.Table:
    n = table.num_rows
    table = table.append_column(pa.field(CHANGE_TYPE, pa.string(), nullable=False), pa.array([change_type] * n, pa.string()))
    table = table.append_column(pa.field(COMMIT_VERSION, pa.int64(), nullable=False), pa.array(np.full(n, version, np.int64)))
    stamps = pa.array(np.full(n, timestamp_ms * 1000, np.int64)).cast(TIMESTAMP_TYPE)
    return table.append_column(pa.field(COMMIT_TIMESTAMP, TIMESTAMP_TYPE, nullable=False), stamps)


def read_change(
    io: FileIO, change: SegmentChange, *, columns: Sequence[str] | None, schema: pa.Schema | None = None
) -> Iterator[tuple[str, pa.Table]]:
    """``(change type, rows)`` of one segment's change, read by the field ids of ``schema`` when given."""
    seg = change.segment
    groups = tuple(range(len(seg.row_groups)))
    if change.kind is ChangeKind.INSERT_LIVE:
        for t in read_task(io, ScanTask(seg, groups, change.dv_after), columns=columns, schema=schema):
            yield INSERT, t
        return
    if change.kind is ChangeKind.DELETE_LIVE:
        for t in read_task(io, ScanTask(seg, groups, change.dv_before), columns=columns, schema=schema):
            yield DELETE, t
        return
    before = _bitmap(io, change.dv_before)
    after = _bitmap(io, change.dv_after)
    for change_type, positions in ((DELETE, after - before), (INSERT, before - after)):
        if len(positions):
            for t in iter_segment(io, seg, groups, columns, masks=OnlyPositions(positions_array(positions)), schema=schema):
                if t.num_rows:
                    yield change_type, t


def _bitmap(io: FileIO, ref: object | None) -> BitMap64:
    return BitMap64() if ref is None else load_dv(io, ref, cache=process_cache())


class OnlyPositions:
    """A mask source that keeps exactly ``positions`` (sorted ``uint64``).

    The reader then decodes only the row groups that hold one of them."""

    def __init__(self, positions: np.ndarray) -> None:
        self.positions = positions

    def keep_mask(self, start: int, count: int) -> np.ndarray | None:
        mask = np.zeros(count, dtype=bool)
        mask[deleted_in_range(self.positions, start, count)] = True
        return mask


def pair_updates(tagged: list[tuple[str, pa.Table]], key: Sequence[str]) -> list[tuple[str, pa.Table]]:
    """Turn an upsert's deletes and inserts of the same key into pre/post images."""
    deleted = [t for kind, t in tagged if kind == DELETE]
    inserted = [t for kind, t in tagged if kind == INSERT]
    if not deleted or not inserted:
        return tagged
    old, new = pa.concat_tables(deleted), pa.concat_tables(inserted)
    old_hit, new_hit = _member(old, new, key), _member(new, old, key)
    out = [
        (DELETE, old.filter(pa.array(~old_hit))),
        (UPDATE_PREIMAGE, old.filter(pa.array(old_hit))),
        (UPDATE_POSTIMAGE, new.filter(pa.array(new_hit))),
        (INSERT, new.filter(pa.array(~new_hit))),
    ]
    return [(kind, t) for kind, t in out if t.num_rows]


def _member(table: pa.Table, other: pa.Table, key: Sequence[str]) -> np.ndarray:
    """Which rows of ``table`` have a key that ``other`` has too."""
    index = "__mvtable_row"
    left = table.select(list(key)).append_column(index, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    right = other.select(list(key)).group_by(list(key)).aggregate([])
    hits = left.join(right, keys=list(key), join_type="left semi").column(index).to_numpy()
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[hits] = True
    return mask


def plan_changes(
    io: FileIO, start_version: int, end_version: int | None = None, *, names: tuple[str, str] = ("start_version", "end_version")
) -> tuple[pa.Schema, list[ChangeUnit]]:
    """The table schema and the units of versions ``start_version`` to ``end_version``, inclusive, in version order.

    ``end_version`` None means the newest. ``names`` are what the caller calls the two
    bounds (Spark's ``startingVersion``/``endingVersion``), for the errors.

    Raises:
        VersionNotFoundError: ``end_version`` does not exist, or GC has removed the changes of
            ``start_version``.
        InvalidOptionError: ``start_version`` is after ``end_version``."""
    schema, units, _ = plan_changes_at(io, start_version, end_version, names=names)
    return schema, units


def plan_changes_at(
    io: FileIO, start_version: int, end_version: int | None = None, *, names: tuple[str, str] = ("start_version", "end_version")
) -> tuple[pa.Schema, list[ChangeUnit], Snapshot]:
    """``plan_changes``, and the snapshot of the last version read (its partition specs prune the units).

    ``end_version`` None means the newest. ``names`` are what the caller calls the two
    bounds (Spark's ``startingVersion``/``endingVersion``), for the errors.

    Raises:
        VersionNotFoundError: ``end_version`` does not exist, or GC has removed the changes of
            ``start_version``.
        InvalidOptionError: ``start_version`` is after ``end_version``."""
    start_name, end_name = names
    start_version = checks.version(start_version, name=start_name)
    end_version = None if end_version is None else checks.version(end_version, name=end_name)
    commit_log = open_log(io)
    listing = commit_log.listing()
    latest = listing.latest
    end = latest if end_version is None else end_version
    if end > latest:
        raise VersionNotFoundError(f"{end_name} {end} does not exist; the table's versions end at {latest}")
    check_readable(start_version, listing, option=start_name)
    if start_version > end:
        raise InvalidOptionError(f"{start_name} {start_version} is after {end_name} {end}")
    end_snapshot = commit_log.snapshot(end, listing=listing)
    schema = schema_from_json(end_snapshot.table_schema).with_metadata({_KEY_META: json.dumps(list(end_snapshot.primary_key))})
    walker = VersionWalker(commit_log)
    return schema, [unit for version in range(start_version, end + 1) for unit in units_of(walker.delta(version))], end_snapshot


_KEY_META = b"mvtable.primaryKey"  # the key of the schema ``plan_changes`` hands out, in its metadata


def schema_key(schema: pa.Schema) -> tuple[str, ...]:
    """The primary key ``plan_changes`` recorded on its schema (the key of the newest version read)."""
    raw = (schema.metadata or {}).get(_KEY_META)
    return tuple(json.loads(raw)) if raw else ()


def read_changes(
    io: FileIO,
    start_version: int,
    end_version: int | None = None,
    *,
    columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
) -> pa.Table:
    """Every change of versions ``start_version`` to ``end_version`` (the newest when None), inclusive, in version order.

    The rows carry the change-feed columns. ``filter`` (a ``pyarrow.compute`` expression over
    the table's columns) keeps the changed rows it matches; on a partitioned table, units
    whose segments' partitions cannot match it are not read at all (``partitions.pruning``).

    Raises:
        InvalidFilterError: ``filter`` does not fit the table's schema."""
    start_version = checks.version(start_version, name="start_version")
    pin = pin_version(io, max(start_version - 1, 0), owner="change feed")
    try:
        full, units, end_snapshot = plan_changes_at(io, start_version, end_version)
        key = schema_key(full)
        plain = full.with_metadata(None)
        schema = project(plain, columns)
        names = None if columns is None else schema.names
        read_names = names
        if filter is not None:
            check_filter(filter, plain, what="change feed filter")
            units = prune_units(units, end_snapshot, plain, filter)
            needed = referenced_columns(filter, plain)
            if names is not None:
                read_names = list(dict.fromkeys([*names, *(needed if needed is not None else plain.names)]))
        tables = [
            t for unit in units for t in read_unit(io, unit, columns=read_names, with_meta=True, schema=plain, primary_key=key)
        ]
        if filter is not None:
            keep = [*(names if names is not None else plain.names), *CHANGE_COLUMNS]
            tables = [t.filter(filter).select(keep) for t in tables]
    finally:
        release(io, pin)
    out_schema = change_schema(schema)
    return pa.concat_tables([t.cast(out_schema) for t in tables]) if tables else out_schema.empty_table()


def prune_units(units: Sequence[ChangeUnit], snapshot: Snapshot, schema: pa.Schema, filter: pc.Expression) -> list[ChangeUnit]:
    """The units of which some segment's partition may match ``filter`` (a unit is read whole or not at all)."""
    states = [SegmentState(c.segment, 0) for unit in units for c in unit.changes]
    kept, pruned = prune_segments(
        states, specs=snapshot.partition_specs, table_schema=snapshot.table_schema, arrow=schema, filter=filter
    )
    if not pruned:
        return list(units)
    alive = {id(s.file) for s in kept}
    return [unit for unit in units if any(id(c.segment) in alive for c in unit.changes)]
