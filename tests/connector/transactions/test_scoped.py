"""Scoped overwrites inside a transaction: ``tx.overwrite(t, data, replace_where=…)`` / ``partition_overwrite="dynamic"``.

The transaction's entry in a day-partitioned table replaces only the days it covers and
records them as its scope: a push of another day runs while the transaction is prepared, a
push of the same day waits, and ``rollback_transaction`` brings back exactly the rows of
those days."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mvtable
from mvtable import faults
from mvtable.connector import Table
from mvtable.errors import (
    DuplicateKeyError,
    InvalidOptionError,
    PushInProgressError,
    ReplaceWhereViolationError,
    TransactionConflictError,
)

DAY_A, DAY_B, DAY_C = dt.date(2024, 1, 5), dt.date(2024, 1, 6), dt.date(2024, 1, 7)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def content(t: Table, version: int | None = None) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow(version=version).to_pylist())


def on_day(day: dt.date) -> pc.Expression:
    return pc.field("day") == day


def dim_ids(t: Table) -> list[int]:
    return sorted(t.to_arrow().column("id").to_pylist())


@pytest.fixture
def star(tmp_path: Path) -> tuple[Table, Table]:
    """A fact table partitioned by day (three days, one segment each) and an unpartitioned dimension."""
    fact = Table.create(str(tmp_path / "fact"), schema=SCHEMA, partition_by=["day"])
    fact.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4), rows(DAY_C, 5, 6)]))
    dim = Table(str(tmp_path / "dim"))
    dim.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    return fact, dim


def test_refresh_one_day_and_a_dimension_then_another_day_then_rollback(star):
    fact, dim = star
    with mvtable.transaction() as tx:
        assert tx.overwrite(fact, rows(DAY_B, 30, 40, 41, v="new"), consistent_push=True, replace_where=on_day(DAY_B)) == 3
        tx.overwrite(dim, pa.table({"id": pa.array([9], pa.int64())}))
    assert content(fact) == [
        ("2024-01-05", 1, "old"),
        ("2024-01-05", 2, "old"),
        ("2024-01-06", 30, "new"),
        ("2024-01-06", 40, "new"),
        ("2024-01-06", 41, "new"),
        ("2024-01-07", 5, "old"),
        ("2024-01-07", 6, "old"),
    ]
    assert dim_ids(dim) == [9]
    (entry,) = [e for e in fact.lineage() if e.id == tx.id]
    assert entry.scope == f"replace_where {on_day(DAY_B)}" and len(entry.segments_from) == 1
    prepare = [h for h in fact.history() if h.operation == "TXN_PREPARE"][-1].parameters
    assert prepare["replaceWhere"] == str(on_day(DAY_B)) and prepare["partitions"] == ["day=2024-01-06"]

    # a later push of another day of the fact table
    fact.overwrite(rows(DAY_C, 50, v="later"), consistent_push=True, replace_where=on_day(DAY_C))
    assert tx.id in {e.id for e in fact.lineage()}  # the other day's push leaves the transaction's entry be

    mvtable.rollback_transaction(tx.id, tables=[fact])
    assert content(fact) == [
        ("2024-01-05", 1, "old"),
        ("2024-01-05", 2, "old"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
        ("2024-01-07", 50, "later"),
    ]
    assert dim_ids(dim) == [1, 2]


def test_a_row_outside_replace_where_is_refused_before_anything_is_prepared(star):
    fact, dim = star
    before = fact.version
    files = sorted(p.name for p in Path(fact.uri, "data").rglob("*.parquet"))
    with pytest.raises(ReplaceWhereViolationError, match="outside replace_where") as err, mvtable.transaction() as tx:
        tx.overwrite(dim, pa.table({"id": pa.array([9], pa.int64())}))
        tx.overwrite(fact, pa.concat_tables([rows(DAY_B, 30), rows(DAY_C, 99)]), replace_where=on_day(DAY_B))
    assert "row 1 of the data" in err.value.message
    assert fact.version == before and dim_ids(dim) == [1, 2]
    assert sorted(p.name for p in Path(fact.uri, "data").rglob("*.parquet")) == files  # nothing of the call was written
    assert [e for e in fact.lineage() if e.id == tx.id] == []


def test_dynamic_overwrite_replaces_the_days_the_data_holds(star):
    fact, _ = star
    with mvtable.transaction() as tx:
        tx.overwrite(fact, pa.concat_tables([rows(DAY_A, 10, v="new"), rows(DAY_C, 70, v="new")]), partition_overwrite="dynamic")
    assert content(fact) == [
        ("2024-01-05", 10, "new"),
        ("2024-01-06", 3, "old"),
        ("2024-01-06", 4, "old"),
        ("2024-01-07", 70, "new"),
    ]
    (entry,) = [e for e in fact.lineage() if e.id == tx.id]
    assert entry.scope == "dynamic partition overwrite"
    prepare = [h for h in fact.history() if h.operation == "TXN_PREPARE"][-1].parameters
    assert prepare["partitions"] == ["day=2024-01-05", "day=2024-01-07"] and prepare["replacedSegments"] == 2
    mvtable.rollback_transaction(tx.id, tables=[fact])
    assert content(fact) == content(fact, 1)


def test_a_predicate_across_partitions_rewrites_and_keeps_the_rest(tmp_path):
    # unpartitioned, two days in one segment: replace_where on one id range copies the rest on write
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(pa.concat_tables([rows(DAY_A, 1, 2, 3), rows(DAY_B, 4)]))
    other = Table(str(tmp_path / "other"))
    other.append(pa.table({"id": pa.array([1], pa.int64())}))
    with mvtable.transaction() as tx:
        tx.overwrite(t, rows(DAY_A, 2, v="new"), replace_where=(pc.field("id") >= 2) & (pc.field("id") <= 3))
        tx.append(other, pa.table({"id": pa.array([2], pa.int64())}))
    with pytest.raises(InvalidOptionError, match="copies rows of the table on write"), mvtable.transaction() as tx2:
        tx2.overwrite(t, rows(DAY_A, 1, v="x"), replace_where=pc.field("id") == 1)  # cuts through the kept copy of 1 and 4
        tx2.delete(t, pc.field("id") == 4)
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "new"), ("2024-01-06", 4, "old")]
    prepare = [h for h in t.history() if h.operation == "TXN_PREPARE"][-1].parameters
    assert prepare["rewrittenSegments"] == 1
    mvtable.rollback_transaction(tx.id, tables=[t])
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-05", 3, "old"), ("2024-01-06", 4, "old")]
    assert sorted(other.to_arrow().column("id").to_pylist()) == [1]


def test_a_push_of_another_day_runs_while_the_transaction_is_prepared_one_of_the_same_day_waits(star):
    fact, dim = star
    tx = mvtable.transaction()
    tx.overwrite(fact, rows(DAY_B, 30, v="new"), replace_where=on_day(DAY_B))
    tx.overwrite(dim, pa.table({"id": pa.array([9], pa.int64())}))
    seen = {}

    def meanwhile() -> None:
        fact.overwrite(rows(DAY_A, 10, v="other"), consistent_push=True, replace_where=on_day(DAY_A))
        with pytest.raises(PushInProgressError, match="multi-table transaction prepared over partition day=2024-01-06") as err:
            fact.overwrite(rows(DAY_B, 31, v="same"), consistent_push=True, replace_where=on_day(DAY_B))
        seen["partitions"] = err.value.partitions

    with faults.run_at("transaction.after_prepare.2", meanwhile):
        tx.commit()
    assert seen["partitions"] == ("day=2024-01-06",)
    assert content(fact) == [
        ("2024-01-05", 10, "other"),
        ("2024-01-06", 30, "new"),
        ("2024-01-07", 5, "old"),
        ("2024-01-07", 6, "old"),
    ]
    assert dim_ids(dim) == [9]


def test_a_live_push_of_the_same_day_fails_the_prepare(star):
    fact, dim = star
    tx = mvtable.transaction()
    tx.overwrite(dim, pa.table({"id": pa.array([9], pa.int64())}))
    tx.overwrite(fact, rows(DAY_B, 30, v="new"), replace_where=on_day(DAY_B))
    staged = fact.overwrite(rows(DAY_B, 31, v="staged"), consistent_push=True, replace_where=on_day(DAY_B), publish=False)
    with pytest.raises(TransactionConflictError, match="in progress over partition day=2024-01-06"):
        tx.commit()
    assert dim_ids(dim) == [1, 2]
    fact.publish(staged.entry)
    assert ("2024-01-06", 31, "staged") in content(fact)


def test_keyed_table_scoped_overwrite_checks_keys_like_a_single_push(tmp_path):
    t = Table.create(str(tmp_path / "k"), schema=SCHEMA, partition_by=["day"], primary_key=["id"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4)]))
    with pytest.raises(DuplicateKeyError), mvtable.transaction() as tx:
        tx.overwrite(t, rows(DAY_B, 1, v="new"), replace_where=on_day(DAY_B))  # key 1 lives on day A, which stays
    with mvtable.transaction() as tx:
        tx.overwrite(t, rows(DAY_B, 3, 5, v="new"), replace_where=on_day(DAY_B))  # key 3 is replaced: free
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-06", 3, "new"), ("2024-01-06", 5, "new")]


def test_scope_options_that_do_not_fit_are_refused(star):
    fact, _ = star
    with mvtable.transaction() as tx:
        with pytest.raises(InvalidOptionError, match="consistent_push=True"):
            tx.overwrite(fact, rows(DAY_B, 1), consistent_push=False, replace_where=on_day(DAY_B))
        with pytest.raises(InvalidOptionError, match="give one"):
            tx.overwrite(fact, rows(DAY_B, 1), replace_where=on_day(DAY_B), partition_overwrite="dynamic")
        with pytest.raises(InvalidOptionError, match="takes 'dynamic'"):
            tx.overwrite(fact, rows(DAY_B, 1), partition_overwrite="static")
        tx.append(fact, rows(DAY_A, 7))
        with pytest.raises(InvalidOptionError, match="first write to the table"):
            tx.overwrite(fact, rows(DAY_B, 1), replace_where=on_day(DAY_B))
    assert ("2024-01-05", 7, "old") in content(fact)


def test_a_delete_on_a_segment_it_rewrites_before_the_prepare_fails_the_transaction(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(pa.concat_tables([rows(DAY_A, 1, 2, 3), rows(DAY_B, 4)]))
    dim = Table(str(tmp_path / "dim"))
    dim.append(pa.table({"id": pa.array([1], pa.int64())}))
    tx = mvtable.transaction()
    tx.append(dim, pa.table({"id": pa.array([2], pa.int64())}))
    tx.overwrite(t, rows(DAY_A, 2, v="new"), replace_where=pc.field("id") == 2)  # copies rows 1, 3 and 4 on write
    t.delete(pc.field("id") == 4)  # a row the copy keeps: it would come back
    with pytest.raises(TransactionConflictError, match="which it rewrites, were deleted"):
        tx.commit()
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-05", 3, "old")]
    assert dim_ids(dim) == [1]


def test_a_new_key_equal_to_a_kept_rows_key_is_refused(tmp_path):
    t = Table.create(str(tmp_path / "k"), schema=SCHEMA, primary_key=["id"])
    t.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3)]))  # one segment: day A's rows are cut out of it
    with pytest.raises(DuplicateKeyError), mvtable.transaction() as tx:
        tx.overwrite(t, rows(DAY_A, 3, v="new"), replace_where=on_day(DAY_A))  # key 3 stays, in the kept copy of day B
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-06", 3, "old")]


def test_a_dynamic_overwrite_creates_a_table_that_does_not_exist(tmp_path):
    with mvtable.transaction() as tx:
        tx.overwrite(str(tmp_path / "new"), rows(DAY_A, 1), partition_overwrite="dynamic")
    assert content(Table(str(tmp_path / "new"))) == [("2024-01-05", 1, "old")]


def test_a_delete_on_a_segment_it_rewrites_after_the_prepare_aborts_before_the_decision(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(pa.concat_tables([rows(DAY_A, 1, 2, 3), rows(DAY_B, 4)]))
    dim = Table(str(tmp_path / "dim"))
    dim.append(pa.table({"id": pa.array([1], pa.int64())}))
    tx = mvtable.transaction()
    tx.overwrite(t, rows(DAY_A, 2, v="new"), replace_where=pc.field("id") == 2)
    tx.append(dim, pa.table({"id": pa.array([2], pa.int64())}))
    with (
        faults.run_at("transaction.after_prepare.2", lambda: t.delete(pc.field("id") == 4)),
        pytest.raises(TransactionConflictError, match="which its scoped overwrite rewrites, were deleted"),
    ):
        tx.commit()
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old"), ("2024-01-05", 3, "old")]
    assert dim_ids(dim) == [1]
    assert [e.state for e in t.lineage() if e.id == tx.id] == ["REVERTED"]


class Stop(Exception):
    """Raised at a protocol step to stop the driver there, as a crash of the block would."""


def _stop() -> None:
    raise Stop()


def test_a_decided_unfinalized_scoped_transaction_is_finished_by_the_next_push_of_its_day(star):
    fact, dim = star
    tx = mvtable.transaction()
    tx.overwrite(fact, rows(DAY_B, 30, v="new"), replace_where=on_day(DAY_B))
    tx.overwrite(dim, pa.table({"id": pa.array([9], pa.int64())}))
    with faults.run_at("transaction.after_decision", _stop), pytest.raises(Stop):
        tx.commit()  # decided COMMITTED, no table finalized: the owner "crashed"
    fact.overwrite(rows(DAY_B, 31, v="next"), consistent_push=True, replace_where=on_day(DAY_B))
    states = {e.id: e.state for e in fact.lineage()}
    assert states[tx.id] == "COMPLETED"  # finished first, then replaced by the push of the same day
    assert [r for r in content(fact) if r[0] == "2024-01-06"] == [("2024-01-06", 31, "next")]
    assert dim_ids(dim) == [1, 2]  # a plain reader of the other table: not finalized yet (the documented window)
    versions = mvtable.consistent_versions([fact, dim])  # finalizes it: the decision stands for every table
    assert sorted(dim.to_arrow(version=versions[dim.uri]).column("id").to_pylist()) == [9]
