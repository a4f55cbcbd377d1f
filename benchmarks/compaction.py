"""Compaction benchmarks, ratios measured in one run (``python -m benchmarks.compaction``):

1. **Small appends**: ``--appends`` appends of ``--rows`` rows of lineitem (default 1000 x
   1000). ``Table.scan().to_arrow()`` and a Spark scan (``format("noop")`` write) before and
   after compaction, against ``pq.read_table`` of one Parquet file of the same rows
   (target: after / one file <= 1.2).
2. **Worn segments**: lineitem at ``--sf`` in segments of ``--segment-rows``, 30% of rows
   deleted (``l_partkey <= 60000 x sf``). Scan before vs after; compaction time against a plain
   pyarrow read-filter-write of the same segments into the same bins (target <= 1.3x), and
   against Lance ``compact_files`` on the same rows with the same delete, and against
   ``deltalake``, whose delete rewrites files (no deletion vectors): its copy-on-write delete
   plus ``optimize.compact()`` (each on a fresh hard-linked copy).

``--smoke`` is the tiny run CI does: every case runs and the answers are checked (row
counts and checksums); missed targets never fail it. Prints the machine's load beside the
numbers: the machine is shared."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .common import System, hardlink_copy, log, measure
from .data import generate, load_lineitem, sf_label

HERE = Path(__file__).resolve().parent


def worn_bound(sf: float) -> int:
    """30% of lineitem: ``l_partkey`` is uniform on 1..200000 x sf."""
    return max(1, round(60000 * sf))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compaction", description=__doc__)
    p.add_argument("--smoke", action="store_true", help="tiny scale, answers checked (what CI runs)")
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor of case 2 (default 0.1; 0.01 smoke)")
    p.add_argument("--appends", type=int, default=None, help="appends of case 1 (default 1000; 40 smoke)")
    p.add_argument("--rows", type=int, default=None, help="rows per append of case 1 (default 1000; 200 smoke)")
    p.add_argument("--segment-rows", type=int, default=None, help="rows per segment of case 2 (default 1M x sf)")
    p.add_argument("--repeat", type=int, default=None, help="timed runs per system (default 3; 1 smoke)")
    p.add_argument("--no-spark", action="store_true", help="skip the Spark scans")
    p.add_argument("--peers", default="deltalake,lance", help="compaction peers of case 2 ('' for none)")
    p.add_argument("--data-dir", type=Path, default=HERE / "data")
    a = p.parse_args(argv)
    a.sf = a.sf if a.sf is not None else (0.01 if a.smoke else 0.1)
    a.appends = a.appends or (40 if a.smoke else 1000)
    a.rows = a.rows or (200 if a.smoke else 1000)
    a.segment_rows = a.segment_rows or max(1000, int(1_000_000 * a.sf))
    a.repeat = a.repeat or (1 if a.smoke else 3)
    a.peer_names = [x.strip() for x in a.peers.split(",") if x.strip()]
    return a


def checksum(table: pa.Table) -> tuple[int, int]:
    return table.num_rows, pc.sum(table["l_orderkey"]).as_py() * 7 + pc.sum(table["l_quantity"].cast(pa.float64())).as_py()


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "n/a"


def med(timings: dict[str, Any], name: str) -> float | None:
    return timings[name].median


# -- case 1 ------------------------------------------------------------------------------------
def small_appends(a: argparse.Namespace, data: pa.Table, work: Path, spark: Any) -> dict[str, Any]:
    from mvtable.connector import Table

    n = a.appends * a.rows
    rows = pa.concat_tables([data] * (n // data.num_rows + 1)).slice(0, n)
    root = work / "appends"
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    t = Table.create(str(root / "mv"), schema=rows.schema, properties={"rowGroupRows": "131072"})
    for i in range(a.appends):
        t.append(rows.slice(i * a.rows, a.rows))
    log(f"  {a.appends} appends of {a.rows} rows in {time.perf_counter() - start:.1f} s")
    one_file = root / "one.parquet"
    pq.write_table(rows, one_file, compression="zstd", row_group_size=131072)
    expected = checksum(rows)

    def scan() -> tuple[int, int]:
        return checksum(t.scan().to_arrow())

    def spark_scan() -> None:
        spark.read.format("mvtable").load(t.uri).write.format("noop").mode("overwrite").save()

    systems = {"mvtable_before": System(scan), "one_parquet_file": System(lambda: checksum(pq.read_table(one_file)))}
    if spark is not None:
        systems["spark_before"] = System(spark_scan)
    before = measure(systems, repeat=a.repeat)
    start = time.perf_counter()
    report = t.compact()
    compact_s = time.perf_counter() - start
    log(f"  compaction: {report.summary()} in {compact_s:.1f} s")
    after = measure({"mvtable_after": System(scan), **({"spark_after": System(spark_scan)} if spark else {})}, repeat=a.repeat)
    for name, timing in {**before, **after}.items():
        if name != "spark_before" and name != "spark_after" and timing.result != expected:
            raise AssertionError(f"{name} read {timing.result}, expected {expected}")
    one = med(before, "one_parquet_file")
    out = {
        "segments_before": report.input_segments,
        "segments_after": len(t.snapshot().visible_segment_ids()),
        "compact_s": compact_s,
        "scan_before_after": ratio(med(before, "mvtable_before"), med(after, "mvtable_after")),
        "scan_after_vs_one_file (target <= 1.2)": ratio(med(after, "mvtable_after"), one),
    }
    if spark is not None:
        out["spark_scan_before_after"] = ratio(med(before, "spark_before"), med(after, "spark_after"))
    return out


# -- case 2 ------------------------------------------------------------------------------------
def worn_segments(a: argparse.Namespace, data: pa.Table, work: Path) -> dict[str, Any]:
    from mvtable.conf import TableProperties
    from mvtable.connector import Table
    from mvtable.connector.compaction import compaction_options, plan_bins
    from mvtable.connector.deletes import load_deleted
    from mvtable.connector.segment_encoding import parquet_writer_options
    from mvtable.visibility import positions_array

    root = work / "worn"
    shutil.rmtree(root, ignore_errors=True)
    base = root / "mv_base"
    t = Table.create(str(base), schema=data.schema, properties={"rowGroupRows": "131072"})
    for off in range(0, data.num_rows, a.segment_rows):
        t.append(data.slice(off, a.segment_rows))
    worn = pc.field("l_partkey") <= worn_bound(a.sf)
    deleted = t.delete(worn).deleted_rows
    log(
        f"  {data.num_rows} rows in {len(t.snapshot().visible_segment_ids())} segments, {deleted} deleted ({deleted / data.num_rows:.1%})"
    )
    expected = checksum(data.filter(~worn))
    snap = t.snapshot()
    bins = plan_bins(snap, compaction_options(TableProperties.of(snap.properties)))
    masks = {seg.id: positions_array(load_deleted(t.io, snap, seg.id)) for b in bins for seg in (i.segment for i in b.inputs)}

    def fresh(name: str) -> Path:
        return hardlink_copy(base, root / "copies" / name)

    def mvtable_compact(path: Path) -> int:
        return Table(str(path)).compact().committed_bins

    def pyarrow_rewrite(path: Path) -> int:
        """What compaction must do at least: read each bin's segments, drop deleted rows, write one file."""
        for k, b in enumerate(bins):
            parts = []
            for inp in b.inputs:
                table = pq.read_table(path / inp.segment.path)
                keep = pa.array(~np.isin(np.arange(table.num_rows), masks[inp.segment.id]))
                parts.append(table.filter(keep))
            pq.write_table(pa.concat_tables(parts), path / f"bin-{k}.parquet", row_group_size=131072, **parquet_writer_options())
        return len(bins)

    systems: dict[str, System] = {
        "mvtable_compact": System(mvtable_compact, setup=lambda: fresh("mv")),
        "pyarrow_read_filter_write": System(pyarrow_rewrite, setup=lambda: fresh("pa")),
    }
    peers = build_peers(a, data, root)
    systems.update({name: System(fn, setup=setup, optional=True) for name, (setup, fn) in peers.items()})
    scan_before = measure({"scan_before": System(lambda: checksum(Table(str(base)).scan().to_arrow()))}, repeat=a.repeat)
    timings = measure(systems, repeat=a.repeat)
    after = fresh("after")
    Table(str(after)).compact()
    scan_after = measure({"scan_after": System(lambda: checksum(Table(str(after)).scan().to_arrow()))}, repeat=a.repeat)
    for timing in (*scan_before.values(), *scan_after.values()):
        if timing.result != expected:
            raise AssertionError(f"a worn-segment scan read {timing.result}, expected {expected}")
    mv = med(timings, "mvtable_compact")
    out = {
        "bins": len(bins),
        "scan_before_after": ratio(med(scan_before, "scan_before"), med(scan_after, "scan_after")),
        "compact_vs_pyarrow (target <= 1.3)": ratio(mv, med(timings, "pyarrow_read_filter_write")),
    }
    for name in peers:
        out[f"compact_vs_{name}"] = ratio(mv, med(timings, name)) if not timings[name].error else f"n/a: {timings[name].error}"
    return out


def build_peers(a: argparse.Namespace, data: pa.Table, root: Path) -> dict[str, tuple[Any, Any]]:
    """name -> (setup giving a fresh copy with the 30% deleted, timed compaction)."""
    out: dict[str, tuple[Any, Any]] = {}
    if "deltalake" in a.peer_names:
        try:
            import deltalake

            delta = root / "delta"
            for off in range(0, data.num_rows, a.segment_rows):
                deltalake.write_deltalake(str(delta), data.slice(off, a.segment_rows), mode="append")

            def delta_compact(p: Path) -> Any:
                # delta-rs writes no deletion vectors: its delete already rewrites the files
                # (copy-on-write), so the same end state costs the delete plus optimize
                dt = deltalake.DeltaTable(str(p))
                dt.delete(f"l_partkey <= {worn_bound(a.sf)}")
                return dt.optimize.compact()

            out["deltalake_cow_delete_and_optimize"] = (lambda: hardlink_copy(delta, root / "copies" / "delta"), delta_compact)
        except ImportError as exc:
            log(f"  deltalake unavailable: {exc}")
    if "lance" in a.peer_names:
        try:
            import lance

            lance_path = root / "lance"
            for off in range(0, data.num_rows, a.segment_rows):
                lance.write_dataset(data.slice(off, a.segment_rows), str(lance_path), mode="append" if off else "create")
            lance.dataset(str(lance_path)).delete(f"l_partkey <= {worn_bound(a.sf)}")  # deletion files, as mvtable's DVs
            out["lance"] = (
                lambda: hardlink_copy(lance_path, root / "copies" / "lance"),
                lambda p: lance.dataset(str(p)).optimize.compact_files(),
            )
        except ImportError as exc:
            log(f"  lance unavailable: {exc}")
    return out


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    root = a.data_dir / f"sf{sf_label(a.sf)}"
    work = root / "compaction"
    work.mkdir(parents=True, exist_ok=True)
    data = load_lineitem(generate(a.sf, root / "tpch"))  # the same cache as benchmarks.run
    spark = None
    if not a.no_spark:
        from .common import start_spark

        spark = start_spark(work / "spark", smoke=a.smoke)
    log(f"compaction benchmarks (load {os.getloadavg()[0]:.2f}), {' '.join(sys.argv)}")
    try:
        log("case 1: small appends")
        one = small_appends(a, data, work, spark)
        log("case 2: worn segments")
        two = worn_segments(a, data, work)
    finally:
        if spark is not None:
            from .common import stop_spark

            stop_spark(spark)
        if not a.smoke:
            shutil.rmtree(work / "worn" / "copies", ignore_errors=True)
    log(f"results (load {os.getloadavg()[0]:.2f}):")
    for case, results in (("small appends", one), ("worn segments", two)):
        for key, value in results.items():
            print(f"  {case:<14} {key:<42} {value if not isinstance(value, float) else f'{value:.2f}'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
