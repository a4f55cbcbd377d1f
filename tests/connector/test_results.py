"""What ``Table``'s writes and maintenance calls return: public, frozen ``…Result`` values."""

from __future__ import annotations

import dataclasses
import datetime as dt
import warnings

import pyarrow.compute as pc
import pytest

import mvtable
from mvtable.connector import Table
from mvtable.connector.results import (
    CompactionResult,
    DeleteResult,
    GCResult,
    UpsertResult,
    VacuumResult,
    WriteResult,
)
from mvtable.lineage.enums import Operation

from .conftest import orders


def frozen(result: object) -> None:
    """Assigning any field of ``result`` is refused, and no field is a mutable list."""
    assert dataclasses.is_dataclass(result)
    for f in dataclasses.fields(result):
        assert not isinstance(getattr(result, f.name), (list, dict, set)), f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, dataclasses.fields(result)[0].name, 0)


def test_every_write_and_maintenance_call_returns_a_frozen_result_exported_from_mvtable(small_table):
    t = small_table
    calls = {
        "append": lambda: t.append(orders(2000, 10)),
        "overwrite": lambda: t.overwrite(orders(3000, 20), consistent_push=True),
        "write": lambda: t.write(orders(4000, 5), mode="append"),
        "delete": lambda: t.delete(pc.field("id") == 3001),
        "delete_rows": lambda: t.delete_rows({t.snapshot().visible_segment_ids()[0]: [0]}),
        "compact": lambda: t.compact(),
        "vacuum": lambda: t.vacuum(dry_run=True),
        "collect_garbage": lambda: t.collect_garbage(dry_run=True),
    }
    expected = {
        "append": WriteResult,
        "overwrite": WriteResult,
        "write": WriteResult,
        "delete": DeleteResult,
        "delete_rows": DeleteResult,
        "compact": CompactionResult,
        "vacuum": VacuumResult,
        "collect_garbage": GCResult,
    }
    for name, call in calls.items():
        result = call()
        assert type(result) is expected[name], name
        frozen(result)
        assert type(result).__name__.endswith("Result")
        assert getattr(mvtable, type(result).__name__) is type(result)  # documented at the front door
        assert type(result).__module__ == "mvtable.connector.results"


def test_upsert_returns_a_frozen_upsert_result(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, primary_key=["id"])
    t.append(orders(0, 10))
    result = t.upsert(orders(5, 10))
    assert result == UpsertResult(inserted_rows=5, updated_rows=5, version=2)
    frozen(result)
    assert mvtable.UpsertResult is UpsertResult


def test_a_write_result_says_what_the_commit_did(small_table):
    appended = small_table.append(orders(2000, 7))
    assert (appended.version, appended.read_version, appended.operation) == (3, 2, Operation.APPEND)
    assert (appended.added_rows, appended.added_segments, appended.attempts, appended.entry) == (7, 1, 1, None)
    assert appended.added_bytes > 0
    fields = {"version", "read_version", "operation", "added_rows", "added_segments", "added_bytes", "attempts", "entry"}
    assert set(dataclasses.asdict(appended)) == fields  # values only: nothing internal rides along
    pushed = small_table.overwrite(orders(0, 3), consistent_push=True, publish=False)
    assert pushed.operation == Operation.PUSH_STAGE and pushed.added_rows == 3
    assert pushed.entry == small_table.lineage()[-1].id  # the entry to publish or roll back


def test_the_write_results_old_attributes_still_work_with_a_deprecation_warning(small_table):
    result = small_table.append(orders(2000, 7))
    with pytest.warns(DeprecationWarning, match=r"WriteResult\.commit"):
        assert result.commit.version == result.version
    with pytest.warns(DeprecationWarning, match=r"WriteResult\.snapshot"):
        snapshot = result.snapshot
    assert snapshot.version == result.version
    with pytest.raises(TypeError):
        snapshot.segments["x"] = snapshot.segments[snapshot.visible_segment_ids()[0]]


def test_delete_returns_a_result_that_still_counts_like_the_old_int_with_a_warning(small_table):
    result = small_table.delete(pc.field("status") == "cancelled")
    assert (result.deleted_rows, result.version, result.segments) == (200, 3, 2)
    assert result == DeleteResult(200, 3, 2)
    with pytest.warns(DeprecationWarning, match=r"deleted_rows"):
        assert result == 200
    with pytest.warns(DeprecationWarning, match=r"deleted_rows"):
        assert int(result) == 200
    with pytest.warns(DeprecationWarning, match=r"deleted_rows"):
        assert result > 100 and 0 + result == 200
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert result.deleted_rows == 200 and result != DeleteResult(200, 4, 2)
        assert len({result, DeleteResult(200, 3, 2)}) == 1  # hashable, by value


def test_a_delete_that_matches_nothing_commits_nothing(small_table):
    result = small_table.delete(pc.field("id") < 0)
    assert result == DeleteResult(deleted_rows=0, version=None, segments=0)
    assert small_table.version == 2


def test_delete_by_key_returns_the_same_result_type(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, primary_key=["id"])
    t.append(orders(0, 10))
    result = t.delete(keys=[1, 2, 99])
    assert isinstance(result, DeleteResult) and (result.deleted_rows, result.version) == (2, 2)


def test_maintenance_results_hold_tuples_not_lists(small_table):
    small_table.delete(pc.field("id") < 500)
    compaction = small_table.compact(delete_ratio=0.1)
    assert compaction.commits == (small_table.version,) and compaction.complete and compaction.changed
    assert compaction.as_dict()["commits"] == [small_table.version]  # JSON-shaped, as before
    assert "rewrote" in compaction.summary()
    later = int((dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30)).timestamp() * 1000)
    vacuum = small_table.vacuum(retention="0s", force=True, now_ms=later)
    assert isinstance(vacuum.files, tuple) and vacuum.files and vacuum.complete
    gc = small_table.collect_garbage(now_ms=later)
    assert isinstance(gc.deleted, tuple)


def test_result_fields_match_the_internal_tallies_they_are_made_from():
    """``of`` copies a tally field by field: a field added to one and not the other fails here."""
    from mvtable.connector.compaction.driver import CompactionReport
    from mvtable.connector.gc import GCReport
    from mvtable.connector.vacuum import VacuumReport

    for tally, result in ((CompactionReport, CompactionResult), (VacuumReport, VacuumResult), (GCReport, GCResult)):
        assert [f.name for f in dataclasses.fields(tally)] == [f.name for f in dataclasses.fields(result)]


def test_data_that_is_not_arrow_is_refused_by_write(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema)
    with pytest.raises(mvtable.errors.InvalidOptionError, match="pyarrow Table"):
        t.write({"id": [1]})  # type: ignore[arg-type]
    assert t.write(orders(0, 1)).added_rows == 1
