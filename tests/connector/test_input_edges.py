"""Inputs at the edge of what a table can hold: each either works or is a typed error at the
API boundary, before anything is written (issue 27, item 7)."""

from __future__ import annotations

import datetime as dt
import math
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable import checks
from mvtable.connector import Table
from mvtable.connector.stats import Predicate, date_bound
from mvtable.errors import InvalidOptionError, SchemaMismatchError, StorageLocationError

DATE32_MIN, DATE32_MAX = -(2**31), 2**31 - 1


def test_a_path_that_is_not_utf8_is_refused_before_anything_is_written(tmp_path) -> None:
    """A name in another encoding reaches Python with surrogate escapes; Arrow could never
    write a segment under it, so the table was created and could never be written."""
    path = os.fsdecode(os.fsencode(str(tmp_path)) + b"/caf\xe9")  # Latin-1 "café"
    for call in (
        lambda: Table.create(path, schema=pa.schema([("id", pa.int64())])),
        lambda: Table.open(path),
        lambda: Table(path).append(pa.table({"id": [1]})),
    ):
        with pytest.raises(StorageLocationError, match=r"is not UTF-8 \('\\udce9' at position \d+\).*rename the folder"):
            call()
    assert os.listdir(tmp_path) == []
    Table.create(str(tmp_path / "café"), schema=pa.schema([("id", pa.int64())])).append(pa.table({"id": [1]}))


def test_extreme_date32_values_are_written_and_read(tmp_path) -> None:
    """``date32`` spans millions of years; Python's dates (and so the ISO statistics) only
    1 to 9999. Such row groups keep no min/max for the column and are never skipped by it."""
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("d", pa.date32()), ("v", pa.int64())]))
    extreme = pa.table({"d": pa.array([DATE32_MAX, DATE32_MIN, None], pa.date32()), "v": [1, 2, 3]})
    ordinary = pa.table({"d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 12, 31)], pa.date32()), "v": [4, 5]})
    t.append(extreme)
    t.append(ordinary)
    got = t.to_arrow().sort_by("v")
    assert got.column("d").cast(pa.int32()).to_pylist() == [DATE32_MAX, DATE32_MIN, None, 19723, 20088]
    stats = [t.commit_log.read_commit(v).actions[0].segment.row_groups[0].stats["d"] for v in (1, 2)]
    assert (stats[0].min, stats[0].max, stats[0].null_count) == (None, None, 1)
    assert (stats[1].min, stats[1].max) == ("2024-01-01", "2024-12-31")
    # filters and predicates still select exactly; the extreme row group is read, not skipped
    after = t.to_arrow(predicates=[Predicate("d", ">=", dt.date(2024, 6, 1))])
    assert sorted(after.column("v").to_pylist()) == [1, 5]  # the far future is after June 2024
    far = pa.scalar(DATE32_MAX, pa.date32())
    assert t.to_arrow(filter=pc.field("d") == far).column("v").to_pylist() == [1]
    assert t.delete(pc.field("d") < pa.scalar(0, pa.date32())).deleted_rows == 1
    assert t.compact(min_input_files=2).commits
    assert sorted(t.to_arrow().column("v").to_pylist()) == [1, 3, 4, 5]  # the null date is not < 0
    assert date_bound(DATE32_MAX) is None and date_bound(0) == "1970-01-01" and date_bound(None) is None


def test_nanosecond_timestamps_into_a_microsecond_column(tmp_path) -> None:
    """Cast when exact, as Delta and Iceberg writers do; refused by name when a nanosecond
    part would be lost (nothing written), with the explicit truncation to use instead."""
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))]))
    exact = pa.table({"id": [1], "ts": pa.array([1_700_000_000_000_000_000], pa.timestamp("ns"))})
    t.append(exact)
    assert t.to_arrow().column("ts").to_pylist() == [dt.datetime(2023, 11, 14, 22, 13, 20)]
    lossy = pa.table({"id": [2, 3], "ts": pa.array([1_700_000_000_000_000_000, 1_700_000_000_000_000_001], pa.timestamp("ns"))})
    files = sorted(os.listdir(tmp_path / "t" / "data"))
    with pytest.raises(
        SchemaMismatchError, match=r"column 'ts': timestamp\[ns\] values cannot be stored as the table's timestamp\[us\]"
    ) as err:
        t.append(lossy)
    assert "1700000000000000001" in str(err.value) and "safe=False" in str(err.value)
    with pytest.raises(SchemaMismatchError, match="column 'ts'"):
        t.overwrite(lossy)
    assert t.version == 1 and sorted(os.listdir(tmp_path / "t" / "data")) == files
    truncated = lossy.set_column(1, "ts", pc.cast(lossy.column("ts"), pa.timestamp("us"), safe=False))
    t.append(truncated)
    assert t.to_arrow().num_rows == 3


def test_nanosecond_timestamps_into_a_keyed_table(tmp_path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.timestamp("us", tz="UTC"))]),
        primary_key=["id"],
    )
    lossy = pa.table({"id": [1], "ts": pa.array([1_001], pa.timestamp("ns", tz="UTC"))})
    for write in (t.append, t.upsert):
        with pytest.raises(SchemaMismatchError, match=r"column 'ts'.*tz='UTC'"):
            write(lossy)
    assert t.version == 0
    t.upsert(pa.table({"id": [1], "ts": pa.array([1_000], pa.timestamp("ns", tz="UTC"))}))
    assert t.to_arrow().column("ts").cast(pa.int64()).to_pylist() == [1]


@pytest.mark.parametrize("now_ms", [math.nan, math.inf, -math.inf, -1, "1700000000000", True, dt.datetime(2024, 1, 1)])
def test_a_clock_that_is_not_a_time_is_refused(tmp_path, now_ms) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": [1]}))
    before = sorted(os.listdir(tmp_path / "t" / "_mvtable" / "log"))
    with pytest.raises(InvalidOptionError, match="now_ms must be a"):
        t.collect_garbage(now_ms=now_ms)
    with pytest.raises(InvalidOptionError, match="now_ms must be a"):
        t.vacuum(now_ms=now_ms)
    assert sorted(os.listdir(tmp_path / "t" / "_mvtable" / "log")) == before


def test_clock_values_that_are_times() -> None:
    assert checks.epoch_ms(None) is None
    assert checks.epoch_ms(1_700_000_000_000) == 1_700_000_000_000
    assert checks.epoch_ms(1_700_000_000_000.7) == 1_700_000_000_000
    assert checks.epoch_ms(0) == 0
