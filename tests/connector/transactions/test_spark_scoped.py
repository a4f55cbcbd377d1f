"""Scoped overwrites in a Spark transaction: ``tx.write(df, path, mode="overwrite", replaceWhere=…)`` and
``partitionOverwriteMode="dynamic"``: the tasks write on the cluster, the transaction's entry
replaces only the days covered, and ``rollback_transaction`` brings exactly those back."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table
from mvtable.errors import InvalidOptionError, ReplaceWhereViolationError, from_spark

pytestmark = pytest.mark.spark

DAY_A, DAY_B, DAY_C = dt.date(2024, 1, 5), dt.date(2024, 1, 6), dt.date(2024, 1, 7)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def content(t: Table) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow().to_pylist())


def frame(spark, *items: tuple[str, int, str]):
    return spark.createDataFrame(list(items), "day string, id long, v string").selectExpr("CAST(day AS DATE) AS day", "id", "v")


def test_spark_transaction_refreshes_one_day_and_a_dimension_and_rolls_back_as_one(spark, tmp_path):
    fact = Table.create(str(tmp_path / "fact"), schema=SCHEMA, partition_by=["day"])
    fact.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4), rows(DAY_C, 5, 6)]))
    dim = Table(str(tmp_path / "dim"))
    dim.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    before = content(fact)

    with mvtable.transaction(spark=spark) as tx:
        fresh = frame(spark, ("2024-01-06", 30, "new"), ("2024-01-06", 31, "new")).repartition(2)
        assert tx.write(fresh, fact.uri, mode="overwrite", replaceWhere="day = '2024-01-06'") == 2
        tx.write(spark.createDataFrame([(9,)], "id long"), dim.uri, mode="overwrite")
        assert content(fact) == before  # nothing visible inside
    assert content(fact) == [
        ("2024-01-05", 1, "old"),
        ("2024-01-05", 2, "old"),
        ("2024-01-06", 30, "new"),
        ("2024-01-06", 31, "new"),
        ("2024-01-07", 5, "old"),
        ("2024-01-07", 6, "old"),
    ]
    assert dim.to_arrow().column("id").to_pylist() == [9]
    prepare = [h for h in fact.history() if h.operation == "TXN_PREPARE"][-1].parameters
    assert prepare["replaceWhere"] == "day = '2024-01-06'" and prepare["partitions"] == ["day=2024-01-06"]

    # a later push of another day, then the transaction rolled back: only its day and the dimension go back
    fact.overwrite(rows(DAY_C, 50, v="later"), consistent_push=True, replace_where=pc.field("day") == DAY_C)
    mvtable.rollback_transaction(tx.id, tables=[fact, dim])
    assert content(fact) == [
        ("2024-01-05", 1, "old"),
        ("2024-01-05", 2, "old"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
        ("2024-01-07", 50, "later"),
    ]
    assert sorted(dim.to_arrow().column("id").to_pylist()) == [1, 2]

    # dynamic: the days the tasks wrote, planned once they ran
    with mvtable.transaction(spark=spark) as tx2:
        tx2.write(frame(spark, ("2024-01-05", 10, "dyn")), fact.uri, mode="overwrite", partitionOverwriteMode="dynamic")
    assert content(fact) == [
        ("2024-01-05", 10, "dyn"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
        ("2024-01-07", 50, "later"),
    ]
    prepare = [h for h in fact.history() if h.operation == "TXN_PREPARE"][-1].parameters
    assert prepare["partitionOverwriteMode"] == "dynamic" and prepare["partitions"] == ["day=2024-01-05"]

    # a row outside replaceWhere fails in its task: nothing of the transaction lands
    version = fact.version
    with pytest.raises(Exception) as err, mvtable.transaction(spark=spark) as tx3:
        tx3.write(spark.createDataFrame([(7,)], "id long"), dim.uri, mode="overwrite")
        tx3.write(frame(spark, ("2024-01-09", 8, "stray")), fact.uri, mode="overwrite", replaceWhere="day = '2024-01-06'")
    assert isinstance(from_spark(err.value), ReplaceWhereViolationError), err.value
    assert fact.version == version and sorted(dim.to_arrow().column("id").to_pylist()) == [1, 2]

    with pytest.raises(InvalidOptionError, match="mode\\('overwrite'\\)"):
        mvtable.transaction(spark=spark).write(frame(spark), fact.uri, mode="append", replaceWhere="day = '2024-01-06'")
    with pytest.raises(InvalidOptionError, match="not a partition overwrite mode"):
        mvtable.transaction(spark=spark).write(frame(spark), fact.uri, mode="overwrite", partitionOverwriteMode="sometimes")
