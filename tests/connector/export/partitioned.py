"""Partition evolution for the export tests, through the log.

``add_spec`` records a new partition spec by a metadata action and makes it the default, as
partition evolution does (later appends split by it); ``partition_keys`` is each row's
partition tuple, the oracle of which files a filter must keep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from mvtable.connector import Table
from mvtable.connector.partitions.spec import parse_partition_by, spec_columns
from mvtable.connector.partitions.values import encode_value
from mvtable.connector.schema import schema_from_json
from mvtable.lineage.actions import MetadataAction
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
