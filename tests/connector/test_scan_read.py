"""Reading segments: grouped multi-row-group reads with one deletion mask, the threaded
``Table.scan`` path against the single-threaded (Spark) path, row addresses, the delete
path that evaluates a predicate to positions, and the Parquet encoding of segments."""

from __future__ import annotations

import decimal
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mvtable.connector import Table
from mvtable.connector.parallel import ordered_map
from mvtable.connector.scan import plan_scan, read_task
from mvtable.connector.segments import (
    ROW_ADDRESS_ROW,
    ROW_ADDRESS_SEGMENT,
    read_runs,
    repeated_string,
)
from mvtable.connector.stats import Predicate

from .conftest import orders


def wide(start: int, n: int) -> pa.Table:
    """Nulls in every column type, a decimal, a string: what the grouped reads must keep."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "k": pa.array([None if i % 7 == 0 else int(i % 13) for i in ids], pa.int32()),
            "amount": pa.array([None if i % 11 == 0 else decimal.Decimal(int(i)) / 100 for i in ids], pa.decimal128(15, 2)),
            "note": pa.array([None if i % 5 == 0 else f"note-{i}" for i in ids], pa.string()),
        }
    )


@pytest.fixture
def wide_table(table_uri) -> Table:
    """Three segments (1000, 1000, 500 rows) of 64-row row groups: 16 + 16 + 8 row groups."""
    t = Table.create(table_uri, schema=wide(0, 1).schema, properties={"rowGroupRows": "64"})
    t.append(wide(0, 1000))
    t.append(wide(1000, 1000))
    t.append(wide(2000, 500))
    return t


def expected_rows(keep: np.ndarray) -> pa.Table:
    return wide(0, 2500).filter(pa.array(keep))


def by_id(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def test_threaded_scan_equals_single_threaded_with_dvs_spanning_row_groups(wide_table):
    ids = np.arange(2500)
    # deletes cross row-group and segment boundaries, and empty a whole row group (128..191)
    gone = ((ids >= 60) & (ids < 70)) | ((ids >= 128) & (ids < 192)) | ((ids >= 990) & (ids < 1010)) | (ids % 17 == 3)
    assert wide_table.delete(pc.field("id").isin(pa.array(ids[gone]))).deleted_rows == int(gone.sum())
    threaded = wide_table.scan().to_arrow()
    single = wide_table.scan(use_threads=False).to_arrow()
    assert threaded.schema == single.schema == wide_table.schema
    assert threaded.equals(single)  # same rows, same order
    assert by_id(threaded).equals(expected_rows(~gone))


def test_read_runs_group_row_groups_and_join_masks(wide_table):
    wide_table.delete((pc.field("id") >= 64) & (pc.field("id") < 128))  # row group 1: fully deleted
    wide_table.delete(pc.field("id") == 130)
    task = plan_scan(wide_table.snapshot()).tasks[0]
    from mvtable.connector.scan import task_masks

    masks = task_masks(wide_table.io, task)
    runs = list(read_runs(task.segment, task.row_groups, masks, read_rows=200))
    flat = [i for run, _ in runs for i in run]
    assert 1 not in flat and flat == [i for i in task.row_groups if i != 1]
    assert all(sum(task.segment.row_groups[i].num_rows for i in run) <= 200 for run, _ in runs)
    run, keep = runs[0]
    assert run == [0, 2, 3] and keep is not None and len(keep) == 192 and not keep[64 + 2]
    assert runs[1][1] is None  # no deletes in that run
    single = list(read_runs(task.segment, task.row_groups, masks, read_rows=None))
    assert all(len(r) == 1 for r, _ in single)


@pytest.mark.parametrize("read_rows", [None, 64, 150, 10_000])
def test_read_task_grouping_does_not_change_rows(wide_table, read_rows):
    wide_table.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 3), 0))
    plan = plan_scan(wide_table.snapshot(), predicates=[Predicate("id", ">=", 100)])
    reference = pa.concat_tables(t for task in plan.tasks for t in read_task(wide_table.io, task, columns=None))
    got = pa.concat_tables(
        t for task in plan.tasks for t in read_task(wide_table.io, task, columns=None, use_threads=True, read_rows=read_rows)
    )
    assert got.equals(reference)


def test_threaded_scan_with_columns_filter_and_row_address(wide_table):
    wide_table.delete(pc.field("k") == 4)
    for use_threads in (True, False):
        scan = wide_table.scan(columns=["note"], filter=pc.field("id") > 1500, with_row_address=True, use_threads=use_threads)
        t = scan.to_arrow()
        assert t.column_names == ["note", ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW]
        full = wide(0, 2500)
        ks = full.column("k").to_numpy(zero_copy_only=False)
        want = (np.arange(2500) > 1500) & ~(ks == 4)
        assert t.num_rows == int(want.sum())
        assert t.column("note").to_pylist() == full.filter(pa.array(want)).column("note").to_pylist()
        # the address of each row is where it lives: position = id - segment start
        segs = {s.id: s for s in wide_table.snapshot().visible_segments()}
        starts = {sid: (1000 if s.file.num_rows == 1000 else 2000) for sid, s in segs.items()}
        assert set(t.column(ROW_ADDRESS_SEGMENT).to_pylist()) <= set(segs)
        ids = np.flatnonzero(want)
        firsts = [starts[s] for s in t.column(ROW_ADDRESS_SEGMENT).to_pylist()]
        assert (t.column(ROW_ADDRESS_ROW).to_numpy() + np.array(firsts) == ids).all()


def test_row_addresses_delete_the_rows_they_name(wide_table):
    hit = wide_table.scan(filter=pc.field("k") == 2, with_row_address=True).to_arrow()
    positions: dict[str, list[int]] = {}
    for sid, row in zip(hit.column(ROW_ADDRESS_SEGMENT).to_pylist(), hit.column(ROW_ADDRESS_ROW).to_pylist()):
        positions.setdefault(sid, []).append(row)
    assert wide_table.delete_rows(positions).deleted_rows == hit.num_rows
    assert wide_table.scan(filter=pc.field("k") == 2).count() == 0


def test_delete_with_predicate_on_several_columns_and_nulls(wide_table):
    full = wide(0, 2500)
    k = full.column("k").to_numpy(zero_copy_only=False)
    note_null = full.column("note").is_null().to_numpy(zero_copy_only=False)
    expr = (pc.field("k") == 3) & (pc.field("note").is_valid()) | (pc.field("amount") > decimal.Decimal("24.50"))
    want = full.filter(expr).num_rows
    amount = np.array([a is not None and a > decimal.Decimal("24.50") for a in full.column("amount").to_pylist()])
    assert want == int((((k == 3) & ~note_null) | amount).sum()) > 0
    assert wide_table.delete(expr).deleted_rows == want
    assert wide_table.to_arrow().num_rows == 2500 - want
    # k is null on every 7th row: ``k != 100`` is null there, not true, so those rows stay
    live = wide_table.to_arrow()
    non_null = live.num_rows - live.column("k").null_count
    assert wide_table.delete(pc.field("k") != 100).deleted_rows == non_null
    left = wide_table.to_arrow()
    assert left.num_rows == live.column("k").null_count > 0
    assert left.column("k").null_count == left.num_rows


def test_delete_nothing_matches_commits_nothing(wide_table):
    version = wide_table.version
    assert wide_table.delete(pc.field("id") < 0).deleted_rows == 0
    assert wide_table.version == version
    assert wide_table.delete(pc.field("note") == "no such note").deleted_rows == 0
    assert wide_table.version == version


def test_delete_skips_rows_already_deleted_and_counts_exactly(wide_table):
    assert wide_table.delete(pc.field("id") < 300).deleted_rows == 300
    assert wide_table.delete(pc.field("id") < 310).deleted_rows == 10  # row groups 0..3 are fully deleted now
    assert wide_table.delete(pc.field("id") >= 0).deleted_rows == 2500 - 310
    assert wide_table.to_arrow().num_rows == 0
    assert wide_table.scan(use_threads=False).to_arrow().num_rows == 0


def test_empty_table_and_empty_results(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema)
    assert t.to_arrow().num_rows == 0 and t.to_arrow().schema == t.schema
    assert t.delete(pc.field("id") > 0).deleted_rows == 0
    t.append(orders(0, 10))
    assert t.scan(filter=pc.field("id") > 100).to_arrow().num_rows == 0


def test_segments_store_short_decimals_as_integers(wide_table):
    seg = wide_table.snapshot().visible_segments()[0]
    meta = pq.ParquetFile(f"{wide_table.uri}/{seg.file.path}").metadata
    assert meta.schema.column(2).physical_type == "INT64"  # decimal(15, 2)
    assert wide_table.schema.field("amount").type == pa.decimal128(15, 2)
    assert by_id(wide_table.to_arrow()).equals(wide(0, 2500))


def test_repeated_string():
    assert repeated_string("abc", 3).to_pylist() == ["abc"] * 3
    assert repeated_string("é", 2).to_pylist() == ["é", "é"]
    assert repeated_string("x", 0).to_pylist() == []
    assert repeated_string("", 2).to_pylist() == ["", ""]
    arr = repeated_string("seg", 5)
    arr.validate(full=True)
    assert arr.type == pa.string()


def test_ordered_map_keeps_order_bounds_work_and_raises_in_turn():
    def slow_first(x: int) -> int:
        time.sleep(0.05 if x == 0 else 0)
        return x * 2

    assert list(ordered_map(slow_first, range(20), workers=3)) == [x * 2 for x in range(20)]
    assert list(ordered_map(slow_first, range(5), workers=1)) == [0, 2, 4, 6, 8]
    started: list[int] = []
    lock = threading.Lock()

    def record(x: int) -> int:
        with lock:
            started.append(x)
        return x

    it = ordered_map(record, range(100), workers=2, ahead=1)
    assert next(it) == 0
    it.close()
    assert len(started) <= 4  # never more than workers + ahead (+ the refill) in flight

    def boom(x: int) -> int:
        if x == 3:
            raise ValueError("three")
        return x

    got = ordered_map(boom, range(10), workers=2)
    assert [next(got) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="three"):
        next(got)


def test_positions_at_matches_row_positions_for_gapped_runs(wide_table):
    from mvtable.connector.segments import positions_at, row_positions

    seg = wide_table.snapshot().visible_segments()[0].file
    for run in ([0], [2, 3, 4], [0, 2, 5, 15], [1, 3]):
        every = row_positions(seg, run)
        offsets = np.array(sorted({0, len(every) - 1, len(every) // 2, 63, 64, 65} & set(range(len(every)))))
        assert (positions_at(seg, run, offsets) == every[offsets]).all()


def test_low_cardinality_strings_read_as_dictionaries_come_back_as_strings(table_uri):
    from mvtable.connector.segments import dictionary_columns

    n = 30_000
    rng = np.random.default_rng(7)
    data = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "flag": pa.array([None if i % 9 == 0 else "AR"[i % 2] for i in range(n)], pa.string()),
            # unique 100-byte strings: the dictionary overflows 1 MiB, the rest is plain pages
            "text": pa.array([f"{i:08d}" + "x" * 92 for i in rng.permutation(n)], pa.string()),
            "raw": pa.array([b"ab" if i % 3 else None for i in range(n)], pa.binary()),
        }
    )
    t = Table.create(table_uri, schema=data.schema, properties={"rowGroupRows": "15000"})
    t.append(data)
    seg = t.snapshot().visible_segments()[0].file
    pf = pq.ParquetFile(f"{table_uri}/{seg.path}")
    assert dictionary_columns(pf.metadata, pf.schema_arrow, [0, 1], None) == ["flag", "raw"]
    assert dictionary_columns(pf.metadata, pf.schema_arrow, [0, 1], ["id", "flag"]) == ["flag"]
    t.delete(pc.equal(pc.bit_wise_and(pc.field("id"), 3), 1))
    want = data.filter(pa.array(np.arange(n) % 4 != 1))
    for use_threads in (True, False):
        got = t.scan(use_threads=use_threads).to_arrow()
        assert got.schema == data.schema
        assert got.equals(want)
    assert t.scan(columns=["flag"]).to_arrow().column("flag").equals(want.column("flag"))
    assert t.delete(pc.field("flag") == "A").deleted_rows == want.filter(pc.field("flag") == "A").num_rows


def test_delete_filter_must_be_boolean_and_may_name_no_column(small_table):
    from mvtable.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="boolean"):
        small_table.delete(pc.field("id") + 1)
    assert small_table.delete(pc.scalar(False)).deleted_rows == 0
    assert small_table.delete(pc.scalar(True) & (pc.field("id") < 5)).deleted_rows == 5
    assert small_table.delete(pc.scalar(True)).deleted_rows == 1995
    assert small_table.to_arrow().num_rows == 0


def test_local_segments_are_read_memory_mapped(tmp_path) -> None:
    """Local reads map segment files instead of copying them into read buffers."""
    import pyarrow.fs as pafs

    from mvtable.storage import open_file_io

    fs, _ = open_file_io(str(tmp_path), {}).arrow()
    assert fs.equals(pafs.LocalFileSystem(use_mmap=True))
    assert not fs.equals(pafs.LocalFileSystem())


@pytest.mark.parametrize("deletes", [False, True])
def test_one_segment_threaded_read_equals_the_single_threaded_read(table_uri, deletes: bool):
    """With and without deletes (runs with no deletes skip the filter), the threaded
    grouped read returns the rows, in order, of the one-row-group-at-a-time read."""
    t = Table.create(table_uri, schema=wide(0, 1).schema, properties={"rowGroupRows": "64"})
    t.append(wide(0, 1000))
    if deletes:
        t.delete(pc.field("k") == 5)
    threaded = t.scan().to_arrow()
    assert threaded.equals(t.scan(use_threads=False).to_arrow())
    ks = wide(0, 1000).column("k").to_numpy(zero_copy_only=False)
    keep = ~(ks == 5) if deletes else np.ones(1000, dtype=bool)
    assert threaded.equals(wide(0, 1000).filter(pa.array(keep)))


def test_one_large_segment_is_read_in_pieces_on_every_thread_in_order(table_uri, monkeypatch):
    """A threaded scan cuts each segment into pieces of at most ``PIECE_ROWS`` rows (whole
    row groups) so that one big segment keeps every reader thread busy; the rows still come
    back in order, deletes applied."""
    from mvtable.connector import table_scan

    t = Table.create(table_uri, schema=wide(0, 1).schema, properties={"rowGroupRows": "64"})
    t.append(wide(0, 1000))  # one segment of 16 row groups
    t.delete(pc.field("id").isin(pa.array(np.arange(4, 1000, 9))))
    monkeypatch.setattr(table_scan, "PIECE_ROWS", 256)
    threads: set[int] = set()
    pieces: list[tuple[int, ...]] = []
    read = table_scan.TableScan._read

    def spy(self, task, **kw):
        threads.add(threading.get_ident())
        pieces.append(task.row_groups)
        time.sleep(0.01)  # long enough for the second worker to take a piece
        return read(self, task, **kw)

    monkeypatch.setattr(table_scan.TableScan, "_read", spy)
    monkeypatch.setattr(table_scan, "default_workers", lambda: 2)
    out = t.scan().to_arrow()
    assert sorted(pieces) == [tuple(range(i, i + 4)) for i in range(0, 16, 4)]
    assert len(threads) >= 2
    ids = np.arange(1000)
    assert out.equals(wide(0, 1000).filter(pa.array(ids % 9 != 4)))
