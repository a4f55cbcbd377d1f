"""Writers split rows by partition: every segment of a partitioned table holds the rows of
exactly one partition, whatever the write (append, overwrite, consistent push, upsert,
transaction), null values included; compaction keeps partitions apart."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table
from mvtable.connector.partitions.spec import spec_columns
from mvtable.connector.partitions.values import encode_value
from mvtable.connector.partitions.writing import split_by_partition
from mvtable.connector.segments import open_parquet

from .conftest import events


def check_one_partition_per_segment(t: Table) -> int:
    """Read every visible segment back and check that its rows all transform to its recorded partition."""
    s = t.snapshot()
    spec = s.partition_specs[1]
    columns = spec_columns(spec, s.table_schema)
    seen = set()
    for seg in s.visible_segments():
        f = seg.file
        assert f.spec_id == 1 and f.partition is not None
        data = open_parquet(t.io, f.path).read()
        for (field, column, transform), stored in zip(columns, f.partition):
            values = transform.apply(data.column(column))
            encoded = {encode_value(v, transform, data.schema.field(column).type) for v in values.to_pylist()}
            assert encoded == {stored}, (field.name, f.partition, encoded)
        seen.add(f.partition)
    return len(seen)


def test_an_append_writes_one_segment_per_partition(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=events(1).schema, partition_by=["day(ts)", "region"])
    data = events(120, hours=2)  # 10 days, 3 regions
    t.append(data)
    assert check_one_partition_per_segment(t) == 30 == len(t.snapshot().visible_segments())
    assert t.to_arrow().sort_by("id").equals(data)


def test_null_partition_values(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=events(1).schema, partition_by=["day(ts)", "region"])
    data = events(70, nulls=True)
    t.append(data)
    check_one_partition_per_segment(t)
    parts = {seg.file.partition for seg in t.snapshot().visible_segments()}
    assert (None, None) in parts
    nulls = t.to_arrow(filter=pc.field("ts").is_null())
    assert nulls.num_rows == 10 and nulls.column("region").null_count == 10


def test_split_keeps_row_order_within_each_partition() -> None:
    from mvtable.connector.partitions.spec import parse_partition_by
    from mvtable.connector.schema import schema_to_json
    from mvtable.connector.schema_evolution.field_ids import fresh_ids

    data = events(40, hours=11)
    schema_json, _ = fresh_ids(schema_to_json(data.schema))
    groups = split_by_partition(data, parse_partition_by(["bucket(3, id)"], schema_json), schema_json)
    assert sorted(p for p, _ in groups) == [(0,), (1,), (2,)]
    assert sum(rows.num_rows for _, rows in groups) == 40
    for _, rows in groups:
        ids = rows.column("id").to_pylist()
        assert ids == sorted(ids)


@pytest.mark.parametrize("push", [False, True], ids=["overwrite", "consistent-push"])
def test_overwrites_split_too(tmp_path, push) -> None:
    t = Table.create(str(tmp_path / "t"), schema=events(1).schema, partition_by=["month(ts)"])
    t.append(events(50))
    t.overwrite(events(400, hours=4), consistent_push=push)  # ~67 days: three months
    assert check_one_partition_per_segment(t) == 3
    assert t.to_arrow().num_rows == 400


def test_keyed_upserts_and_transactions_split(tmp_path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=events(1).schema, partition_by=["truncate(8, name)", "bucket(2, id)"], primary_key=["id"])
    t.append(events(30))
    t.upsert(events(40, start=20))  # 10 updates, 20 inserts
    assert t.to_arrow().num_rows == 60
    with mvtable.transaction() as tx:
        tx.append(uri, events(5, start=100))
    assert t.to_arrow().num_rows == 65
    check_one_partition_per_segment(t)


def test_compaction_never_mixes_partitions(tmp_path) -> None:
    t = Table.create(
        str(tmp_path / "t"), schema=events(1).schema, partition_by=["region"], properties={"compactMinInputFiles": "2"}
    )
    for i in range(4):
        t.append(events(30, start=30 * i))
    before = t.snapshot()
    assert len(before.visible_segments()) == 12
    result = t.compact()
    s = t.snapshot()
    assert (result.input_segments, result.output_segments) == (12, 3)
    assert sorted(seg.file.partition for seg in s.visible_segments()) == [("apac",), ("eu",), ("us",)]
    check_one_partition_per_segment(t)
    assert t.to_arrow().sort_by("id").equals(events(120))


def test_split_with_many_distinct_values_in_many_fields() -> None:
    """The combined partition code of five high-cardinality fields would overflow 64 bits: it is renumbered."""
    import numpy as np

    from mvtable.connector.partitions.spec import parse_partition_by
    from mvtable.connector.schema import schema_to_json
    from mvtable.connector.schema_evolution.field_ids import fresh_ids

    n = 20_000
    data = pa.table({c: np.arange(n) * k for c, k in zip("abcde", (1, 7, 3, 11, 13))})
    schema_json, _ = fresh_ids(schema_to_json(data.schema))
    groups = split_by_partition(data, parse_partition_by(list("abcde"), schema_json), schema_json)
    assert len(groups) == n
    assert all(part == tuple(rows.to_pylist()[0].values()) for part, rows in groups[:: n // 50])
