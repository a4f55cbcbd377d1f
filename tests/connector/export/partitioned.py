"""Partitioned tables for the export tests, built through the log.

``add_spec`` records a partition spec by a metadata action (as partition evolution does) and
``append_by_partition`` splits rows by the table's default spec into one segment per
partition, each with its partition tuple in the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mvtable.connector import Table
from mvtable.connector.partitions.spec import parse_partition_by, spec_columns
from mvtable.connector.partitions.values import encode_value
from mvtable.connector.schema import schema_from_json
from mvtable.connector.segments import write_segments
from mvtable.lineage.actions import AddSegment, MetadataAction
from mvtable.lineage.enums import Operation
from mvtable.lineage.partitioning import PartitionSpec


def add_spec(t: Table, items: Sequence[str]) -> PartitionSpec:
    """Record a new partition spec over ``items`` and make it the default (new field ids, as Iceberg gives)."""
    snap = t.snapshot()
    specs = dict(snap.partition_specs)
    first = 1 + max((f.field_id for s in specs.values() for f in s.fields), default=999)
    spec = parse_partition_by(list(items), snap.table_schema, spec_id=max(specs) + 1, first_field_id=first)
    action = MetadataAction(
        table_id=snap.table_id,
        table_schema=snap.table_schema,
        properties=dict(snap.properties),
        schema_id=snap.schema_id,
        last_field_id=snap.last_field_id,
        partition_specs=(*specs.values(), spec),
        default_spec_id=spec.spec_id,
    )
    t.commit_log.commit(read=snap, operation=Operation.UPDATE_SCHEMA, build=lambda _: [action])
    return spec


def partition_keys(spec: PartitionSpec, table_schema: dict[str, Any], data: pa.Table) -> list[tuple[Any, ...]]:
    """Each row's partition tuple under ``spec``, as the log stores it."""
    arrow = schema_from_json(table_schema)
    columns = []
    for _, column, transform in spec_columns(spec, table_schema):
        assert column is not None
        source = arrow.field(column).type
        values = transform.apply(data.column(column)).to_pylist()
        columns.append([encode_value(v, transform, source) for v in values])
    return list(zip(*columns)) if columns else [() for _ in range(data.num_rows)]


def append_by_partition(t: Table, data: pa.Table) -> int:
    """Append ``data`` as one segment per partition of the default spec; the number of segments."""
    snap = t.snapshot()
    spec = snap.default_spec
    keys = partition_keys(spec, snap.table_schema, data)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    actions = []
    for key, rows in groups.items():
        part = data.take(pa.array(rows, pa.int64())).cast(schema_from_json(snap.table_schema))
        for seg in write_segments(t.io, part, row_group_rows=10_000):
            actions.append(AddSegment(segment=seg.model_copy(update={"spec_id": spec.spec_id, "partition": key})))
    t.commit_log.commit(read=snap, operation=Operation.APPEND, build=lambda _: actions)
    return len(actions)
