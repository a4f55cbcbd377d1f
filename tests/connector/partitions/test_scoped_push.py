"""Scoped consistent pushes through the Python API: ``overwrite(…, consistent_push=True, replace_where=…)``.

Each test builds a table whose segments hold one day each (one append per day), so the
statistics alone say which day a segment holds, and checks what the push replaced, read,
rewrote and kept, and what rollback, publish and concurrent writers see."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, cli, scoped_push, writes
from mvtable.errors import (
    ConcurrentReplaceError,
    InvalidFilterError,
    InvalidOptionError,
    PushInProgressError,
    ReplaceWhereViolationError,
)

DAY_A, DAY_B, DAY_C = dt.date(2024, 1, 5), dt.date(2024, 1, 6), dt.date(2024, 1, 7)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def content(t: Table) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow().to_pylist())


def two_days(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(DAY_A, 1, 2, 3))
    t.append(rows(DAY_B, 4, 5, 6))
    return t


def on_day(day: dt.date) -> pc.Expression:
    return pc.field("day") == day


def last_push_parameters(t: Table) -> dict:
    return [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters


def test_a_predicate_aligned_to_segments_reads_and_rewrites_no_data_file(tmp_path):
    t = two_days(tmp_path)
    # every data file out of the way: a push that opened one would fail
    data_dir = Path(t.uri) / "data"
    hidden = tmp_path / "hidden"
    data_dir.rename(hidden)
    try:
        result = t.overwrite(rows(DAY_A, 7, 8, v="new"), consistent_push=True, replace_where=on_day(DAY_A))
    finally:
        for f in hidden.iterdir():
            (data_dir / f.name).parent.mkdir(exist_ok=True)
            f.rename(data_dir / f.name)
        hidden.rmdir()
    assert content(t) == [("2024-01-05", 7, "new"), ("2024-01-05", 8, "new")] + [("2024-01-06", i, "old") for i in (4, 5, 6)]
    params = last_push_parameters(t)
    assert params["replacedSegments"] == 1 and params["rewrittenSegments"] == 0 and params["probedSegments"] == 0
    assert params["replaceWhere"] == "(day == 2024-01-05)"
    assert result.added_segments == 1  # the data only: no copy of any kept row


def test_a_row_outside_replace_where_is_refused_naming_it_and_nothing_is_committed(tmp_path):
    t = two_days(tmp_path)
    before = t.version
    data = pa.concat_tables([rows(DAY_A, 7), rows(DAY_C, 9, v="stray")])
    with pytest.raises(ReplaceWhereViolationError) as err:
        t.overwrite(data, consistent_push=True, replace_where=on_day(DAY_A))
    assert (
        "row 1 of the data is outside replace_where (day == 2024-01-05): {day=2024-01-07, id=9, v='stray'}" in err.value.message
    )
    assert t.version == before and t.lineage() == []
    # a row where the predicate is null is outside it too
    with pytest.raises(ReplaceWhereViolationError, match="row 0"):
        t.overwrite(
            pa.table({"day": [None], "id": [1], "v": ["x"]}, schema=SCHEMA), consistent_push=True, replace_where=on_day(DAY_A)
        )
    assert t.version == before


def test_any_predicate_works_rows_it_matches_are_replaced_by_copy_on_write(tmp_path):
    t = two_days(tmp_path)
    t.delete(pc.field("id") == 2)  # a deleted row of the segment the push rewrites stays deleted
    result = t.overwrite(
        rows(DAY_A, 30, v="new"), consistent_push=True, replace_where=(pc.field("day") == DAY_A) & (pc.field("id") >= 3)
    )
    assert content(t) == [("2024-01-05", 1, "old"), ("2024-01-05", 30, "new")] + [("2024-01-06", i, "old") for i in (4, 5, 6)]
    params = last_push_parameters(t)
    assert params["rewrittenSegments"] == 1 and params["replacedSegments"] == 0 and params["probedSegments"] == 1
    assert result.added_segments == 2  # the data, and the kept row of day A
    # rolled back, the original segment comes back with its deletion vector
    t.rollback(entry=result.entry)
    assert content(t) == [("2024-01-05", i, "old") for i in (1, 3)] + [("2024-01-06", i, "old") for i in (4, 5, 6)]


def test_a_predicate_that_is_no_conjunction_is_decided_by_reading_its_columns(tmp_path):
    t = two_days(tmp_path)
    t.overwrite(rows(DAY_B, 40, v="new"), consistent_push=True, replace_where=(pc.field("day") == DAY_B) | (pc.field("id") > 100))
    assert content(t) == [("2024-01-05", i, "old") for i in (1, 2, 3)] + [("2024-01-06", 40, "new")]
    params = last_push_parameters(t)
    # both segments read (the predicate's columns), one matched whole, the other not at all
    assert params["probedSegments"] == 2 and params["replacedSegments"] == 1 and params["rewrittenSegments"] == 0


def test_an_append_during_the_push_of_its_day_stays_visible(tmp_path):
    t = two_days(tmp_path)
    data = rows(DAY_A, 7, v="new")
    scope = scoped_push.request(data, replace_where=on_day(DAY_A), partition_overwrite=None)
    plan = writes.begin_write(t.uri, storage_options=None, incoming=SCHEMA, mode="overwrite", consistent_push=True, scope=scope)
    t.append(rows(DAY_A, 99, v="landed meanwhile"))  # the push started: it replaces what it read
    segments = writes.write_data(plan, data.to_batches())
    writes.finish_write(plan, segments)
    assert ("2024-01-05", 99, "landed meanwhile") in content(t)
    assert [r for r in content(t) if r[0] == "2024-01-05"] == [("2024-01-05", 7, "new"), ("2024-01-05", 99, "landed meanwhile")]


def test_the_lineage_shows_the_scope(tmp_path, capsys, monkeypatch):
    t = two_days(tmp_path)
    t.overwrite(rows(DAY_A, 7), consistent_push=True, replace_where=on_day(DAY_A))
    (view,) = t.lineage()
    assert view.scope == "replace_where (day == 2024-01-05)"
    # wide enough that no cell wraps: where a cell wraps depends on the other cells (pids, paths)
    monkeypatch.setenv("COLUMNS", "400")
    assert cli.main(["lineage", t.uri]) == 0
    out = capsys.readouterr().out
    assert "replace_where (day == 2024-01-05)" in out
    assert cli.main(["lineage", t.uri, "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["scope"] == "replace_where (day == 2024-01-05)" and record["partitions"]


def test_a_delete_on_a_segment_the_push_rewrites_is_a_conflict_and_nothing_lands(tmp_path):
    t = two_days(tmp_path)
    data = rows(DAY_A, 1, v="new")
    predicate = (pc.field("day") == DAY_A) & (pc.field("id") == 1)
    plan = writes.begin_write(
        t.uri,
        storage_options=None,
        incoming=SCHEMA,
        mode="overwrite",
        consistent_push=True,
        scope=scoped_push.request(data, replace_where=predicate, partition_overwrite=None),
    )
    assert plan.scoped is not None and len(plan.scoped.rewritten) == 1
    t.delete(pc.field("id") == 2)  # a row the push would copy
    segments = writes.write_data(plan, data.to_batches())
    with pytest.raises(ConcurrentReplaceError, match="which it rewrites, were deleted by a concurrent commit"):
        writes.finish_write(plan, segments)
    writes.abort_write(plan, segments)
    assert content(t) == [("2024-01-05", i, "old") for i in (1, 3)] + [("2024-01-06", i, "old") for i in (4, 5, 6)]


def test_deletes_and_compaction_of_other_days_do_not_conflict(tmp_path):
    t = two_days(tmp_path)
    t.append(rows(DAY_B, 7))  # a second segment of day B: something to compact
    data = rows(DAY_A, 70, v="new")
    plan = writes.begin_write(
        t.uri,
        storage_options=None,
        incoming=SCHEMA,
        mode="overwrite",
        consistent_push=True,
        scope=scoped_push.request(data, replace_where=on_day(DAY_A), partition_overwrite=None),
    )
    t.delete(pc.field("id") == 5)
    assert t.compact(min_input_files=2).input_segments == 2  # day B's two; day A's is held by the push
    segments = writes.write_data(plan, data.to_batches())
    writes.finish_write(plan, segments)
    assert content(t) == [("2024-01-05", 70, "new")] + [("2024-01-06", i, "old") for i in (4, 6, 7)]


def test_options_that_do_not_go_together(tmp_path):
    t = two_days(tmp_path)
    with pytest.raises(InvalidOptionError, match="use it with mode\\('overwrite'\\) and consistent_push=True"):
        t.overwrite(rows(DAY_A, 1), replace_where=on_day(DAY_A))
    with pytest.raises(InvalidOptionError, match="give one"):
        t.overwrite(rows(DAY_A, 1), consistent_push=True, replace_where=on_day(DAY_A), partition_overwrite="dynamic")
    with pytest.raises(InvalidOptionError, match="takes 'dynamic'"):
        t.overwrite(rows(DAY_A, 1), consistent_push=True, partition_overwrite="static")
    with pytest.raises(InvalidOptionError, match="must be a pyarrow.compute.Expression"):
        t.overwrite(rows(DAY_A, 1), consistent_push=True, replace_where="day = '2024-01-05'")
    with pytest.raises(InvalidFilterError, match="column 'nope'"):
        t.overwrite(rows(DAY_A, 1), consistent_push=True, replace_where=pc.field("nope") == 1)
    with pytest.raises(InvalidOptionError, match="mode\\('overwrite'\\)"):
        t.write(rows(DAY_A, 1), mode="append", consistent_push=False, replace_where=on_day(DAY_A))
    assert t.lineage() == [] and len(t.history()) == 3


def test_two_pushes_of_one_day_of_an_unpartitioned_table_block_each_other(tmp_path):
    """Without partitions a scoped push holds the whole (single) partition."""
    t = two_days(tmp_path)
    data = rows(DAY_A, 7)
    plan = writes.begin_write(
        t.uri,
        storage_options=None,
        incoming=SCHEMA,
        mode="overwrite",
        consistent_push=True,
        scope=scoped_push.request(data, replace_where=on_day(DAY_A), partition_overwrite=None),
    )
    try:
        with pytest.raises(PushInProgressError) as err:
            t.overwrite(rows(DAY_B, 8), consistent_push=True, replace_where=on_day(DAY_B))
        assert err.value.owner == f"pid {os.getpid()} on {os.uname().nodename}"
        assert "the whole table (unpartitioned)" in err.value.message
    finally:
        writes.abort_write(plan, [])
