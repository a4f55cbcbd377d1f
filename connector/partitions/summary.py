"""``Table.partitions()``: one row per partition of a snapshot, from the log alone (Iceberg's ``partitions`` table).

Columns: one per partition field, named by the field and typed by its transform's result
(``ts_day`` a date, ``id_bucket`` an int32, ``region`` the column's own type; null where a
row's spec has no such field, after partition evolution), then ``spec_id``, ``segments``
(visible segments), ``rows`` (live rows: what a scan returns), ``deleted_rows`` (rows the
deletion vectors delete, from their cardinalities: no file is read), ``bytes`` (the
segments' file sizes) and ``last_modified_version`` (the newest version that added one of
its visible segments; a delete by deletion vector does not count, as the log records no
version per deletion vector). Segments written without a partition (an unpartitioned table,
or before partitioning) form one row of spec 0 with null values.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from mvtable.lineage.partitioning import PartitionValue
from mvtable.lineage.snapshot import Snapshot

from ..schema import schema_from_json
from .spec import spec_columns
from .values import decode_value

__all__ = ["STAT_COLUMNS", "partitions_table"]

STAT_COLUMNS = ("spec_id", "segments", "rows", "deleted_rows", "bytes", "last_modified_version")


def partitions_table(snapshot: Snapshot) -> pa.Table:
    """One row per (spec, partition) among ``snapshot``'s visible segments, sorted by spec and values (nulls first)."""
    arrow = schema_from_json(snapshot.table_schema)
    groups: dict[tuple[int, tuple[PartitionValue, ...]], list[int]] = {}
    for seg in snapshot.visible_segments():
        f = seg.file
        key = (f.spec_id or 0, f.partition or ())
        deleted = snapshot.dvs[f.id].cardinality if f.id in snapshot.dvs else 0
        acc = groups.get(key)
        if acc is None:
            acc = groups[key] = [0, 0, 0, 0, -1]
        acc[0] += 1
        acc[1] += f.num_rows - deleted
        acc[2] += deleted
        acc[3] += f.size_bytes
        acc[4] = max(acc[4], seg.added_version)
    # the partition columns: every field of every spec in use, in spec order, once by name
    fields: dict[str, pa.DataType] = {}
    layouts: dict[int, list[tuple[str, Any, pa.DataType] | None]] = {}
    for spec_id in sorted({k[0] for k in groups}):
        spec = snapshot.partition_specs.get(spec_id)
        layout: list[tuple[str, Any, pa.DataType] | None] = []
        for field, column, transform in spec_columns(spec, snapshot.table_schema) if spec is not None else []:
            if column is None:  # its column was dropped: the values stay unreadable
                layout.append(None)
                continue
            source = arrow.field(column).type
            fields.setdefault(field.name, transform.result_type(source))
            layout.append((field.name, transform, source))
        layouts[spec_id] = layout
    rows: list[dict[str, Any]] = []
    for (spec_id, partition), acc in groups.items():
        row: dict[str, Any] = dict.fromkeys(fields)
        for slot, stored in zip(layouts.get(spec_id, []), partition):
            if slot is not None:
                name, transform, source = slot
                row[name] = decode_value(stored, transform, source, where=f"spec {spec_id} partition")
        row.update(zip(STAT_COLUMNS, (spec_id, *acc)))
        rows.append(row)
    rows.sort(key=lambda r: (r["spec_id"], *((r[n] is not None, r[n]) for n in fields)))
    schema = pa.schema(
        [
            *(pa.field(n, t) for n, t in fields.items()),
            pa.field("spec_id", pa.int32(), nullable=False),
            *(pa.field(n, pa.int64(), nullable=False) for n in STAT_COLUMNS[1:]),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)
