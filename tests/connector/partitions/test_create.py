"""Creating a partitioned table: the spec recorded as spec 1 with Iceberg's names, every
transform, typed errors for bad specs with nothing committed, and the first write creating one."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.errors import InvalidOptionError, PartitionSpecError

from .conftest import events


@pytest.mark.parametrize(
    "item, name, transform",
    [
        ("region", "region", "identity"),
        ("year(ts)", "ts_year", "year"),
        ("month(ts)", "ts_month", "month"),
        ("day(ts)", "ts_day", "day"),
        ("hour(ts)", "ts_hour", "hour"),
        ("month(day)", "day_month", "month"),
        ("bucket(16, id)", "id_bucket", "bucket[16]"),
        ("truncate(4, name)", "name_trunc", "truncate[4]"),
        ("truncate(10, amount)", "amount_trunc", "truncate[10]"),
    ],
)
def test_create_with_each_transform(tmp_path, item, name, transform) -> None:
    t = Table.create(str(tmp_path / "t"), schema=events(1).schema, partition_by=[item])
    s = t.snapshot()
    assert s.default_spec_id == 1 and set(s.partition_specs) == {0, 1}
    (field,) = s.partition_specs[1].fields
    assert (field.name, field.transform, field.field_id) == (name, transform, 1000)
    column = item.rstrip(")").split("(")[-1].split(",")[-1].strip()
    assert field.source_id == {f.name: i + 1 for i, f in enumerate(events(1).schema)}[column]
    # the spec is part of the first version: time travel to it sees it too
    assert t.snapshot(0).partition_specs[1] == s.partition_specs[1]
    t.append(events(50))
    assert t.to_arrow().sort_by("id").equals(events(50).sort_by("id"))


@pytest.mark.parametrize(
    "partition_by, named",
    [
        (["nope"], "nope"),
        (["day(nope)"], "nope"),
        (["s.a"], "s.a"),
        (["day(region)"], "region"),
        (["hour(day)"], "day"),
        (["bucket(4, ts_list)"], "ts_list"),
        (["region", "region"], "region"),
        (["bucket(0, id)"], "bucket(0, id)"),
        (["truncate(-2, name)"], "truncate(-2, name)"),
        (["frobnicate(id)"], "frobnicate"),
        (["day(ts)", "hour(ts)"], "hour(ts)"),
    ],
    ids=[
        "unknown",
        "unknown-in-transform",
        "nested",
        "day-of-string",
        "hour-of-date",
        "bucket-of-list",
        "twice",
        "zero-buckets",
        "negative-width",
        "unknown-transform",
        "two-time-transforms",
    ],
)
def test_a_bad_spec_names_the_field_and_creates_nothing(tmp_path, partition_by, named) -> None:
    schema = (
        events(1).schema.append(pa.field("s", pa.struct([("a", pa.int32())]))).append(pa.field("ts_list", pa.list_(pa.int64())))
    )
    uri = str(tmp_path / "t")
    with pytest.raises(PartitionSpecError) as info:
        Table.create(uri, schema=schema, partition_by=partition_by)
    assert named in info.value.message
    log = tmp_path / "t" / "_mvtable" / "log"
    assert not log.exists() or not os.listdir(log)
    assert not Table(uri).commit_log.exists()


def test_the_first_write_creates_the_table_with_its_spec(tmp_path) -> None:
    t = Table(str(tmp_path / "t"))
    t.append(events(30), partition_by=["day(ts)", "region"])
    s = t.snapshot()
    assert [f.name for f in s.partition_specs[1].fields] == ["ts_day", "region"]
    assert all(seg.file.spec_id == 1 for seg in s.visible_segments())
    # repeating the spec on later writes is fine; another one is refused, nothing written
    t.append(events(10, start=30), partition_by=["day(ts)", "region"])
    with pytest.raises(InvalidOptionError, match="update_partitioning"):
        t.append(events(10, start=40), partition_by=["month(ts)"])
    with pytest.raises(InvalidOptionError, match="update_partitioning"):
        t.overwrite(events(10, start=40), partition_by=[])
    assert t.version == 1 and t.to_arrow().num_rows == 40


def test_a_table_without_partition_by_is_unpartitioned(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=events(1).schema)
    t.append(events(20))
    s = t.snapshot()
    assert s.default_spec_id == 0 and not s.default_spec.partitioned
    assert all(seg.file.spec_id is None and seg.file.partition is None for seg in s.visible_segments())
    assert len(s.visible_segments()) == 1
    # and its log does not mention partitions at all (readable by an mvtable from before them)
    for name in os.listdir(tmp_path / "t" / "_mvtable" / "log"):
        assert b"partition" not in (tmp_path / "t" / "_mvtable" / "log" / name).read_bytes()
