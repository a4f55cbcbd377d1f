"""``Table.snapshot()`` and ``Table.pin()`` hand out read-only snapshots: a caller that
changes one cannot change what the ``Table`` reads next."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.snapshot_view import is_read_only, read_only
from mvtable.lineage import LineageState

from .conftest import orders


def test_clearing_the_snapshot_cannot_empty_the_table(small_table):
    snap = small_table.snapshot()
    with pytest.raises(AttributeError):
        snap.segments.clear()  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        snap.segments["gone"] = snap.segments[snap.visible_segment_ids()[0]]
    with pytest.raises(TypeError):
        del snap.dvs["x"]
    with pytest.raises(TypeError):
        snap.properties["rowGroupRows"] = "1"
    with pytest.raises(TypeError):
        snap.transactions["app"] = 1
    assert small_table.to_arrow().num_rows == 2000
    assert len(small_table.snapshot().visible_segment_ids()) == 2


def test_the_parts_changed_in_place_elsewhere_are_the_views_own(small_table):
    small_table.overwrite(orders(0, 10), consistent_push=True)
    snap = small_table.snapshot()
    [entry] = snap.lineage.values()
    entry.state = LineageState.REVERTED  # a copy: the table's own entry stays COMPLETED
    snap.table_schema["fields"].clear()
    snap.history.clear()
    assert small_table.lineage()[0].state == LineageState.COMPLETED
    assert small_table.schema.names == ["id", "status", "price"]
    assert len(small_table.history()) == 5  # create, two appends, the push (start, end)
    assert small_table.to_arrow().num_rows == 10


def test_pinned_and_older_snapshots_are_read_only_too(small_table):
    with small_table.pin() as pinned:
        assert is_read_only(pinned.snapshot)
        with pytest.raises(TypeError):
            pinned.snapshot.segments["x"] = None  # type: ignore[assignment]
    old = small_table.snapshot(1)
    assert is_read_only(old) and old.version == 1 and len(old.visible_segment_ids()) == 1


def test_each_call_is_a_view_of_its_own_and_an_old_one_stays_put(small_table):
    first = small_table.snapshot()
    first.history.clear()
    assert len(small_table.snapshot().history) == 3  # one caller's copy is not the next one's
    small_table.append(orders(5000, 3))
    newer = small_table.snapshot()
    assert newer is not first and newer.version == first.version + 1
    assert first.version == 2 and len(first.visible_segment_ids()) == 2  # the old view did not move
    assert len(newer.visible_segment_ids()) == 3


def test_a_view_is_accepted_wherever_a_snapshot_is(small_table):
    read = small_table.snapshot()
    sid = read.visible_segment_ids()[0]
    small_table.append(orders(5000, 3))  # the view is behind now: the commit catches up from it
    result = small_table.delete_rows({sid: [0, 1, 2]}, read=read)
    assert result.deleted_rows == 3 and result.version == 4
    assert small_table.delete(pc.field("id") == 5000).deleted_rows == 1
    assert Table.open(small_table.uri).to_arrow().num_rows == 2000 + 3 - 4


def test_read_only_of_a_view_is_the_view_and_equals_the_snapshot(small_table):
    snap = small_table.commit_log.snapshot()
    view = read_only(snap)
    assert read_only(view) is view
    assert view == snap and not is_read_only(snap)
