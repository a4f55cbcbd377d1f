"""Row-level deletes through the Table API: deletion vectors, MVCC, conflicts, cache."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, deletes, segments
from mvtable.errors import CommitConflictError, ConcurrentReplaceError, CorruptDeletionVectorError, InvalidRowAddressError
from mvtable.visibility import process_cache

from .conftest import orders


def data_files(t: Table) -> set[str]:
    return set(os.listdir(os.path.join(t.uri, "data")))


def test_delete_by_predicate_rewrites_no_data_file(small_table):
    files = data_files(small_table)
    assert small_table.delete(pc.field("status") == "cancelled").deleted_rows == 200
    assert data_files(small_table) == files
    live = small_table.to_arrow()
    assert live.num_rows == 1800
    assert "cancelled" not in live.column("status").to_pylist()
    # MVCC: the version before the delete still has every row
    assert small_table.scan(version=2).count() == 2000
    assert small_table.history()[-1].operation == "DELETE"
    assert small_table.history()[-1].metrics["deleted_rows"] == 200


def test_deleting_deleted_rows_is_a_noop(small_table):
    small_table.delete(pc.field("id") < 10)
    version = small_table.version
    assert small_table.delete(pc.field("id") < 10).deleted_rows == 0
    assert small_table.version == version
    assert small_table.delete(pc.field("id") < 12).deleted_rows == 2


def test_dvs_accumulate_per_segment(small_table):
    small_table.delete(pc.field("id") == 1)
    small_table.delete(pc.field("id") == 2)
    snap = small_table.snapshot()
    assert sum(ref.cardinality for ref in snap.dvs.values()) == 2
    assert sorted(small_table.to_arrow().column("id").to_pylist())[:3] == [0, 3, 4]


def test_small_dvs_inline_large_in_files(small_table):
    small_table.delete(pc.field("id") == 5)
    [ref] = small_table.snapshot().dvs.values()
    assert ref.inline is not None and ref.path is None
    small_table.delete((pc.bit_wise_and(pc.field("id"), 3) == 0) & (pc.field("id") >= 1000))
    refs = small_table.snapshot().dvs
    assert any(r.path is not None and r.path.startswith("_mvtable/dv/") for r in refs.values())


def test_bad_addresses_commit_nothing(small_table):
    seg = small_table.snapshot().visible_segments()[0]
    version = small_table.version
    with pytest.raises(InvalidRowAddressError, match="does not exist"):
        small_table.delete_rows({seg.id: [1, seg.file.num_rows]})
    with pytest.raises(InvalidRowAddressError, match="not part of the table"):
        small_table.delete_rows({"nosuchsegment": [1]})
    with pytest.raises(InvalidRowAddressError, match="negative"):
        small_table.delete_rows({seg.id: [-1]})
    assert small_table.version == version


def test_fully_deleted_row_groups_are_not_read(small_table, monkeypatch):
    small_table.delete(pc.field("id") < 300)  # row groups 0..2 of the first segment
    calls = []
    real = segments.read_row_groups

    def counting(pf, segment, indices, *args, **kwargs):
        calls.extend(indices)
        return real(pf, segment, indices, *args, **kwargs)

    monkeypatch.setattr(segments, "read_row_groups", counting)
    for use_threads in (False, True):
        calls.clear()
        assert small_table.scan(use_threads=use_threads).count() == 1700
        assert len(calls) == 20 - 3


def test_second_scan_reads_no_dv_bytes(small_table):
    small_table.delete(pc.bit_wise_and(pc.field("id"), 1) == 0)
    cache = process_cache()
    cache.clear()
    small_table.scan().count()
    first = cache.stats()["bytes_read"]
    small_table.scan().count()
    assert first > 0
    assert cache.stats()["bytes_read"] == first


def test_corrupt_dv_file_is_a_typed_error(small_table):
    small_table.delete(pc.bit_wise_and(pc.field("id"), 1) == 0)
    ref = next(r for r in small_table.snapshot().dvs.values() if r.path)
    path = os.path.join(small_table.uri, ref.path)
    blob = bytearray(open(path, "rb").read())
    blob[ref.offset + 10] ^= 0xFF
    open(path, "wb").write(bytes(blob))
    process_cache().clear()
    with pytest.raises(CorruptDeletionVectorError):
        small_table.to_arrow()


def test_delete_of_replaced_segment_conflicts(small_table):
    read = small_table.snapshot()
    seg = read.visible_segments()[0]
    small_table.overwrite(orders(9000, 3))
    with pytest.raises(ConcurrentReplaceError):
        small_table.delete_rows({seg.id: [1, 2]}, read=read)
    assert small_table.scan().count() == 3


def _delete_in_process(uri: str, seg: str, rows: list[int], barrier, out) -> None:
    t = Table.open(uri)
    read = t.snapshot()
    barrier.wait()
    try:
        out.put(("ok", t.delete_rows({seg: rows}, read=read).deleted_rows))
    except CommitConflictError as exc:
        out.put(("conflict", str(exc)))


def _overwrite_in_process(uri: str, barrier, out) -> None:
    t = Table.open(uri)
    barrier.wait()
    t.overwrite(orders(50_000, 10))
    out.put(("ok", "overwrite"))


def test_concurrent_deletes_on_one_segment_both_land(small_table):
    ctx = mp.get_context("spawn")
    seg = small_table.snapshot().visible_segments()[0].id
    barrier, out = ctx.Barrier(3), ctx.Queue()
    rows_a = list(range(0, 100))
    rows_b = list(range(50, 150))  # overlapping
    procs = [ctx.Process(target=_delete_in_process, args=(small_table.uri, seg, r, barrier, out)) for r in (rows_a, rows_b)]
    procs.append(ctx.Process(target=_delete_in_process, args=(small_table.uri, seg, list(range(900, 910)), barrier, out)))
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(kind == "ok" for kind, _ in results), results
    assert sum(n for _, n in results) == 160
    live = set(small_table.to_arrow().column("id").to_pylist())
    assert live == set(range(2000)) - set(range(0, 150)) - set(range(900, 910))


def test_delete_racing_an_overwrite_never_mixes(small_table):
    ctx = mp.get_context("spawn")
    seg = small_table.snapshot().visible_segments()[0].id
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_delete_in_process, args=(small_table.uri, seg, list(range(10)), barrier, out)),
        ctx.Process(target=_overwrite_in_process, args=(small_table.uri, barrier, out)),
    ]
    for p in procs:
        p.start()
    results = dict((v if k == "ok" and v == "overwrite" else k, v) for k, v in [out.get(timeout=60) for _ in procs])
    for p in procs:
        p.join(timeout=60)
    assert "overwrite" in results
    # either the delete landed first (then overwrite replaced everything) or it conflicted
    final = small_table.to_arrow().column("id").to_pylist()
    assert sorted(final) == list(range(50_000, 50_010))
    history = [h.operation for h in small_table.history()]
    if "conflict" in results:
        assert "DELETE" not in history
    else:
        assert history.index("DELETE") < history.index("OVERWRITE")


def test_row_address_scan_matches_physical_positions(small_table):
    out = small_table.scan(with_row_address=True, filter=pc.field("id") == 1234).to_arrow()
    [row] = out.to_pylist()
    seg = small_table.snapshot().segments[row["_mv_segment"]].file
    assert row["_mv_row"] == 234 and seg.num_rows == 1000
    small_table.delete_rows({row["_mv_segment"]: np.array([row["_mv_row"]])})
    assert small_table.scan(filter=pc.field("id") == 1234).count() == 0


def test_a_retried_delete_rewrites_only_the_dvs_a_concurrent_commit_changed(table_uri, monkeypatch):
    """Two lost races, forced: a concurrent append (no DV changed: the retry writes no DV
    file) and a concurrent delete in one of our segments (only that segment's DV is
    written again). The commit names the DV files of the first attempt for the others."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100", "dvInlineMaxBytes": "0"})
    for start in (0, 1000, 2000):
        t.append(orders(start, 1000))
    a, b, c = (s.id for s in t.snapshot().visible_segments())
    other = Table.open(table_uri)
    races = [lambda: other.append(orders(5000, 5)), lambda: other.delete_rows({b: [999]})]
    racing: list[bool] = []
    written: list[list[str]] = []  # the segments of each DV file our delete writes
    real_write = deletes.write_dvs

    def write_dvs(io, bitmaps, **kwargs):
        if not racing:
            written.append(sorted(bitmaps))
        return real_write(io, bitmaps, **kwargs)

    real_put = t.io.put_if_absent

    def put_if_absent(path, data, **kwargs):
        if races:  # someone else takes the version first
            racing.append(True)
            races.pop(0)()
            racing.clear()
        return real_put(path, data, **kwargs)

    monkeypatch.setattr(deletes, "write_dvs", write_dvs)
    monkeypatch.setattr(t.io, "put_if_absent", put_if_absent)
    result = t.delete_rows({sid: list(range(0, 600, 2)) for sid in (a, b, c)})
    assert not races and result.deleted_rows == 900 and result.segments == 3
    assert written == [sorted([a, b, c]), [b]]
    dvs = t.snapshot().dvs
    first, second = dvs[a].path, dvs[b].path
    assert dvs[c].path == first != second
    assert (dvs[a].cardinality, dvs[b].cardinality, dvs[c].cardinality) == (300, 301, 300)
    assert t.history()[-1].metrics["deleted_rows"] == 900
    process_cache().clear()
    assert t.scan().count() == 3005 - 901
    # DV files: our two, and the concurrent delete's (which ours supersedes); nothing else
    theirs = t.snapshot(result.version - 1).dvs[b].path
    assert {f"_mvtable/dv/{i.name}" for i in t.io.list("_mvtable/dv")} == {first, second, theirs}
