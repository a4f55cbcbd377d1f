"""Scoped consistent pushes from Spark: ``.option("replaceWhere", …)`` and ``.option("partitionOverwriteMode", "dynamic")``.

The SQL predicate is read on the driver; tasks check their rows against it; a dynamic
overwrite is planned once its tasks ran and lands in one commit."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.errors import DuplicateKeyError, InvalidOptionError, ReplaceWhereViolationError, from_spark

pytestmark = pytest.mark.spark

DAY_A, DAY_B = dt.date(2024, 1, 5), dt.date(2024, 1, 6)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def two_days(path: str) -> Table:
    t = Table.create(path, schema=SCHEMA)
    t.append(rows(DAY_A, 1, 2, 3))
    t.append(rows(DAY_B, 4, 5, 6))
    return t


def content(t: Table) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow().to_pylist())


def frame(spark, *items: tuple[str, int, str]):
    return spark.createDataFrame(list(items), "day string, id long, v string").selectExpr("CAST(day AS DATE) AS day", "id", "v")


def push(df, path: str, **options: str) -> None:
    w = df.write.format("mvtable").mode("overwrite").option("consistentPush", "true")
    for k, v in options.items():
        w = w.option(k, v)
    w.save(path)


def test_replace_where_from_spark_replaces_one_day(spark, tmp_path):
    path = str(tmp_path / "t")
    t = two_days(path)
    push(frame(spark, ("2024-01-05", 7, "new")), path, replaceWhere="day = '2024-01-05'")
    assert content(t) == [("2024-01-05", 7, "new")] + [("2024-01-06", i, "old") for i in (4, 5, 6)]
    (entry,) = t.lineage()
    assert entry.scope == "replace_where day = '2024-01-05'"
    params = [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters
    assert params["replacedSegments"] == 1 and params["rewrittenSegments"] == 0 and params["probedSegments"] == 0
    # a predicate that cuts a segment: the rows it leaves are copied by the driver
    push(frame(spark, ("2024-01-06", 5, "new")), path, replaceWhere="day = DATE '2024-01-06' AND id BETWEEN 5 AND 6")
    assert content(t) == [("2024-01-05", 7, "new"), ("2024-01-06", 4, "old"), ("2024-01-06", 5, "new")]


def test_a_row_outside_replace_where_fails_the_write_and_nothing_is_visible(spark, tmp_path):
    path = str(tmp_path / "t")
    t = two_days(path)
    before = content(t)
    with pytest.raises(Exception) as err:
        push(frame(spark, ("2024-01-05", 7, "ok"), ("2024-01-09", 8, "stray")), path, replaceWhere="day = '2024-01-05'")
    mv = from_spark(err.value)
    assert isinstance(mv, ReplaceWhereViolationError), err.value
    assert "day=2024-01-09, id=8, v='stray'" in mv.message
    assert content(t) == before
    assert [e.state for e in t.lineage()] == ["REVERTED"]  # the push that started is reverted, never visible


def test_replace_where_that_cannot_be_read_is_a_typed_error(spark, tmp_path):
    path = str(tmp_path / "t")
    two_days(path)
    for predicate, problem in (("day = '2024-01-05' OR id = 1", "OR is not read"), ("upper(v) = 'X'", "function call")):
        with pytest.raises(Exception) as err:
            push(frame(spark, ("2024-01-05", 7, "x")), path, replaceWhere=predicate)
        mv = from_spark(err.value)
        assert isinstance(mv, InvalidOptionError) and problem in mv.message, err.value
    with pytest.raises(Exception) as err:
        frame(spark, ("2024-01-05", 7, "x")).write.format("mvtable").mode("overwrite").option(
            "replaceWhere", "day = '2024-01-05'"
        ).save(path)
    assert isinstance(from_spark(err.value), InvalidOptionError)


def test_dynamic_partition_overwrite_is_one_commit(spark, tmp_path):
    """On a table without partitions the data's partition is the whole table, as in Delta."""
    path = str(tmp_path / "t")
    t = two_days(path)
    push(frame(spark, ("2024-01-05", 7, "new")), path, partitionOverwriteMode="dynamic")
    assert content(t) == [("2024-01-05", 7, "new")]
    assert [h.operation for h in t.history()][-1] == "CONSISTENT_PUSH"
    assert "PUSH_START" not in [h.operation for h in t.history()]
    (entry,) = t.lineage()
    assert entry.scope == "dynamic partition overwrite" and entry.state == "COMPLETED"


def test_dynamic_partition_overwrite_of_a_partitioned_table_replaces_the_datas_days(spark, tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, schema=SCHEMA, partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4), rows(dt.date(2024, 1, 7), 5)]))
    push(frame(spark, ("2024-01-05", 10, "new"), ("2024-01-07", 30, "new")), path, partitionOverwriteMode="dynamic")
    assert content(t) == [
        ("2024-01-05", 10, "new"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
        ("2024-01-07", 30, "new"),
    ]
    (entry,) = t.lineage()
    assert entry.partitions == ("day=2024-01-05", "day=2024-01-07")
    params = [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (2, 0, 0)


def test_replace_where_of_one_partition_from_spark_reads_no_data_file(spark, tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, schema=SCHEMA, partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4)]))
    push(frame(spark, ("2024-01-06", 40, "new")), path, replaceWhere="day = '2024-01-06'")
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-06", 40, "new")]
    (entry,) = t.lineage()
    assert entry.partitions == ("day=2024-01-06",)
    params = [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (1, 0, 0)


def test_replace_where_on_a_keyed_table_from_spark_keeps_keys_unique(spark, tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, schema=SCHEMA, primary_key=["id"], partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4)]))
    # key 3 lives in day B, which the push leaves alone
    with pytest.raises(Exception) as err:
        push(frame(spark, ("2024-01-05", 3, "new")), path, replaceWhere="day = '2024-01-05'")
    assert isinstance(from_spark(err.value), DuplicateKeyError), err.value
    # a predicate cutting day A: key 2 is kept by the copy, key 1 replaced and written again
    push(
        frame(spark, ("2024-01-05", 1, "new"), ("2024-01-05", 7, "new")), path, replaceWhere="day = '2024-01-05' AND id IN (1, 7)"
    )
    assert content(t) == [
        ("2024-01-05", 1, "new"),
        ("2024-01-05", 2, "old"),
        ("2024-01-05", 7, "new"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
    ]
    params = [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters
    assert params["rewrittenSegments"] == 1


def test_dynamic_overwrite_of_a_keyed_table_from_spark_checks_keys_at_its_commit(spark, tmp_path):
    path = str(tmp_path / "t")
    t = Table.create(path, schema=SCHEMA, primary_key=["id"], partition_by=["day"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4)]))
    with pytest.raises(Exception) as err:  # key 3 lives in day B, which the push leaves alone
        push(frame(spark, ("2024-01-05", 3, "new")), path, partitionOverwriteMode="dynamic")
    assert isinstance(from_spark(err.value), DuplicateKeyError), err.value
    assert [h.operation for h in t.history()][-1] == "APPEND"  # nothing committed
    push(frame(spark, ("2024-01-05", 1, "new"), ("2024-01-05", 9, "new")), path, partitionOverwriteMode="dynamic")
    assert content(t) == [("2024-01-05", 1, "new"), ("2024-01-05", 9, "new"), ("2024-01-06", 3, "old"), ("2024-01-06", 4, "old")]
