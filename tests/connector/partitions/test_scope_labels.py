"""Partitions named for people in scoped pushes' errors and lineage (``scope_labels.partition_label``)."""

from __future__ import annotations

import pyarrow as pa

from mvtable.connector.partitions.scope_labels import partition_label
from mvtable.connector.partitions.spec import parse_partition_by
from mvtable.connector.schema import schema_to_json
from mvtable.connector.schema_evolution.field_ids import fresh_ids
from mvtable.lineage.partitioning import UNPARTITIONED

SCHEMA = pa.schema([("ts", pa.timestamp("us")), ("d", pa.date32()), ("region", pa.string()), ("id", pa.int64())])
TABLE_SCHEMA, _ = fresh_ids(schema_to_json(SCHEMA))


def label(items: list[str], key: tuple) -> str:
    return partition_label(parse_partition_by(items, TABLE_SCHEMA), TABLE_SCHEMA, key)


def test_time_partitions_read_as_dates():
    assert label(["day(ts)"], (19727,)) == "ts_day=2024-01-05"
    assert label(["month(ts)"], (648,)) == "ts_month=2024-01"
    assert label(["year(d)"], (54,)) == "d_year=2024"
    assert label(["hour(ts)"], (473448 + 10,)) == "ts_hour=2024-01-05-10"


def test_identity_bucket_truncate_and_null():
    assert label(["region", "bucket(16, id)"], ("eu", 3)) == "region=eu/id_bucket=3"
    assert label(["truncate(2, region)"], ("eu",)) == "region_trunc=eu"
    assert label(["ts"], (1704448800000000,)) == "ts=2024-01-05 10:00:00"
    assert label(["d"], ("2024-01-05",)) == "d=2024-01-05"
    assert label(["region"], (None,)) == "region=null"
    assert partition_label(UNPARTITIONED, TABLE_SCHEMA, ()) == "the whole table (unpartitioned)"
