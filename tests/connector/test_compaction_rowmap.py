"""The row map: ``first_row + p - rank(dv, p)`` as pyroaring defines ``rank``, and checked
against where a real compaction put each row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from mvtable.connector import Table
from mvtable.connector.compaction.rowmap import map_positions
from mvtable.connector.deletes import load_deleted
from mvtable.lineage.actions import CompactSegments


@given(
    deleted=st.sets(st.integers(0, 5000), max_size=300),
    positions=st.sets(st.integers(0, 5000), max_size=300),
    first_row=st.integers(0, 10**12),
)
@settings(max_examples=200, deadline=None)
def test_map_positions_is_rank_over_the_deletion_vector(deleted, positions, first_row):
    dv = BitMap64(deleted)
    expected = [first_row + p - dv.rank(p) for p in sorted(positions) if p not in dv]
    got = map_positions(np.array(sorted(positions), dtype=np.uint64), np.array(sorted(deleted), dtype=np.uint64), first_row)
    assert got.dtype == np.uint64 and got.tolist() == expected


def test_a_real_compaction_puts_every_row_where_its_row_map_says(tmp_path):
    rng = np.random.default_rng(7)
    t = Table.create(
        str(tmp_path / "t"),
        schema=pa.schema([("seg", pa.int64()), ("pos", pa.int64())]),
        properties={"rowGroupRows": "64", "compactMinInputFiles": "2"},
    )
    sizes = [300, 1, 517, 90]
    for k, n in enumerate(sizes):
        t.append(pa.table({"seg": pa.array([k] * n, pa.int64()), "pos": pa.array(range(n), pa.int64())}))
    doomed = rng.choice(sum(sizes), size=250, replace=False)
    flat = t.scan(with_row_address=True).to_arrow()
    picked = flat.take(pa.array(doomed))
    addr: dict[str, list[int]] = {}
    for seg, pos in zip(picked["_mv_segment"].to_pylist(), picked["_mv_row"].to_pylist()):
        addr.setdefault(seg, []).append(pos)
    assert t.delete_rows(addr).deleted_rows == 250
    before = t.snapshot()
    t.compact()
    commit = t.commit_log.read_commit(t.version)
    (row_map,) = [a for a in commit.actions if isinstance(a, CompactSegments)]
    after = t.scan(with_row_address=True).to_arrow()
    where = {(k, p): (s, r) for k, p, s, r in zip(*(after[c].to_pylist() for c in ("seg", "pos", "_mv_segment", "_mv_row")))}
    order = [seg.id for seg in before.visible_segments()]
    checked = 0
    for inp in row_map.inputs:
        k = order.index(inp.segment_id)
        dv = load_deleted(t.io, before, inp.segment_id)
        live = [p for p in range(sizes[k]) if p not in dv]
        mapped = map_positions(np.array(live, dtype=np.uint64), np.array(sorted(dv), dtype=np.uint64), inp.first_row)
        for p, new in zip(live, mapped.tolist()):
            assert where[(k, p)] == (inp.output, new)
            checked += 1
    assert checked == sum(sizes) - 250 == after.num_rows
    assert pc.sum(after["pos"]).as_py() == sum(p for (k, p) in where)
