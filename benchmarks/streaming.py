"""Streaming benchmarks: ``python -m benchmarks.streaming [--sf 0.1] [--repeat 3] [--smoke]``.

1. **Sink throughput** (rows/s) of ``writeStream.format("mvtable")`` in micro-batches of
   ``--batch-rows`` (default 10,000 and 1,000,000 rows), against the same batches written by
   ``foreachBatch`` + a plain Parquet append. Both read the same input stream (an mvtable
   source whose segments hold one batch each, ``maxRowsPerTrigger`` = the batch size), so the
   ratio compares the sinks: mvtable's adds one commit per batch with its ``SetTransaction``.
2. **Source latency**: a running query (``processingTime`` 0) follows a table; the time from
   each ``Table.append`` returning to ``foreachBatch`` seeing its rows, against Spark's own
   Parquet file source following a folder the same files are dropped into.
3. **Change feed of a 1% delete** vs reading the whole table (``Table.changes(v, v)`` vs
   ``Table.to_arrow()``, TPC-H lineitem at ``--sf``): the delete clustered in file order
   (the first 1% of ``l_shipdate``, how time-ranged deletes fall) and scattered
   (``l_suppkey``, the harness's 1% delete, which lands in every row group).

Results are printed and written to ``benchmarks/results/streaming-<timestamp>.json``. Exits
non-zero only when a case fails or answers wrongly, never for a missed target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import data
from .common import log

HERE = Path(__file__).resolve().parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.streaming", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor of the change-feed table (default 0.1; 0.01 smoke)")
    p.add_argument("--repeat", type=int, default=None, help="timed runs per case (default 3; 1 with --smoke)")
    p.add_argument("--smoke", action="store_true", help="tiny scale, no warm-up run: every case runs and answers correctly")
    p.add_argument("--batch-rows", default=None, help="sink micro-batch sizes (default 10000,1000000; 2000,20000 smoke)")
    p.add_argument("--batches", type=int, default=None, help="micro-batches per sink run (default 4; 2 with --smoke)")
    p.add_argument("--latency-commits", type=int, default=None, help="commits timed by the latency case (default 8; 3 smoke)")
    p.add_argument("--cases", default="change_feed,sink,latency", help="comma-separated: change_feed, sink, latency")
    p.add_argument("--data-dir", type=Path, default=HERE / "data", help="where data and tables go")
    p.add_argument("--out", type=Path, default=None, help="JSON results file")
    a = p.parse_args(argv)
    a.sf = a.sf if a.sf is not None else (0.01 if a.smoke else 0.1)
    a.repeat = a.repeat if a.repeat is not None else (1 if a.smoke else 3)
    a.warmup = 0 if a.smoke else 1  # untimed first round (Spark's planning, the Python workers)
    a.sizes = [int(s) for s in (a.batch_rows or ("2000,20000" if a.smoke else "10000,1000000")).split(",")]
    a.batches = a.batches if a.batches is not None else (2 if a.smoke else 4)
    a.cases = {c.strip() for c in a.cases.split(",") if c.strip()}
    a.latency_commits = a.latency_commits if a.latency_commits is not None else (3 if a.smoke else 8)
    return a


def rows_like_lineitem(start: int, n: int) -> pa.Table:
    """``n`` rows of lineitem-like columns (keys, quantities, prices, flags, a comment)."""
    import numpy as np

    i = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "l_orderkey": i,
            "l_partkey": (i * 7919) % 200_000,
            "l_quantity": (i % 50).astype(np.float64) + 1,
            "l_extendedprice": (i % 100_000).astype(np.float64) * 1.01,
            "l_returnflag": pa.array(np.array(["A", "N", "R"])[i % 3]),
            "l_shipdate": pa.array((i % 2500).astype("datetime64[D]").astype("datetime64[ms]")).cast(pa.date32()),
            "l_comment": pa.array(np.char.add("comment ", (i % 9973).astype(str))),
        }
    )


def best(times: list[float]) -> float:
    return statistics.median(times)


# -- 1. sink throughput -------------------------------------------------------------------
def sink_case(spark: Any, root: Path, *, batch_rows: int, batches: int, repeat: int, warmup: int) -> dict[str, Any]:
    from mvtable import Table

    src = root / f"sink-src-{batch_rows}"
    if not src.exists():
        t = Table.create(str(src), schema=rows_like_lineitem(0, 1).schema, properties={"rowGroupRows": "131072"})
        for b in range(batches):
            t.append(rows_like_lineitem(b * batch_rows, batch_rows))
    total = batch_rows * batches

    def stream() -> Any:
        return spark.readStream.format("mvtable").option("maxRowsPerTrigger", str(batch_rows)).load(str(src))

    def run(kind: str, k: int) -> float:
        out, ck = root / f"sink-{kind}-{batch_rows}-{k}", root / f"ck-{kind}-{batch_rows}-{k}"
        w = stream().writeStream.option("checkpointLocation", str(ck)).trigger(availableNow=True)
        if kind == "mvtable":
            w = w.format("mvtable")
        else:
            path = str(out)
            w = w.foreachBatch(lambda df, _id: df.write.mode("append").parquet(path))
        start = time.perf_counter()
        q = w.start(str(out)) if kind == "mvtable" else w.start()
        q.awaitTermination()
        elapsed = time.perf_counter() - start
        if q.exception() is not None:
            raise RuntimeError(f"{kind} sink failed: {q.exception()}")
        got = Table.open(str(out)).scan(columns=["l_orderkey"]).count() if kind == "mvtable" else pq.read_table(out).num_rows
        if got != total:
            raise AssertionError(f"{kind} sink wrote {got} rows, expected {total}")
        if kind == "mvtable" and len(Table.open(str(out)).history()) != batches:
            raise AssertionError("the mvtable sink did not commit one version per micro-batch")
        return elapsed

    times: dict[str, list[float]] = {"mvtable": [], "foreachBatch_parquet": []}
    for k in range(warmup + repeat):
        for kind in times:
            t = run(kind, k)
            if k >= warmup:
                times[kind].append(t)
    mv, pqt = best(times["mvtable"]), best(times["foreachBatch_parquet"])
    return {
        "case": f"sink_{batch_rows}_rows",
        "rows": total,
        "batches": batches,
        "mvtable_rows_per_s": total / mv,
        "foreachBatch_parquet_rows_per_s": total / pqt,
        "ratio_time": mv / pqt,
        "times_s": times,
    }


# -- 2. source latency --------------------------------------------------------------------
def latency_case(spark: Any, root: Path, *, commits: int) -> dict[str, Any]:
    from mvtable import Table

    schema = rows_like_lineitem(0, 1).schema
    mv_path, pq_dir = root / "latency-mv", root / "latency-parquet"
    Table.create(str(mv_path), schema=schema)
    pq_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"case": "source_latency", "commits": commits}
    for kind in ("mvtable", "parquet_file_source"):
        seen: dict[int, float] = {}
        cond = threading.Condition()

        def on_batch(df: Any, _id: int, seen: dict[int, float] = seen, cond: threading.Condition = cond) -> None:
            keys = [r[0] for r in df.select("l_orderkey").distinct().collect()]
            now = time.perf_counter()
            with cond:
                for key in keys:
                    seen.setdefault(key, now)
                cond.notify_all()

        if kind == "mvtable":
            reader = spark.readStream.format("mvtable").option("startingVersion", "latest").load(str(mv_path))
        else:
            reader = spark.readStream.schema(spark.createDataFrame(rows_like_lineitem(0, 1).to_pandas()).schema).parquet(
                str(pq_dir)
            )
        q = (
            reader.writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", str(root / f"ck-latency-{kind}"))
            .trigger(processingTime="0 seconds")
            .start()
        )
        lat = []
        try:
            deadline = time.monotonic() + 180
            while q.lastProgress is None and time.monotonic() < deadline:  # its start offset is fixed
                time.sleep(0.1)
            time.sleep(1)  # idle
            for c in range(commits):
                key = 10**9 + c
                rows = rows_like_lineitem(key, 1)
                if kind == "mvtable":
                    Table.open(str(mv_path)).append(rows)
                else:  # written aside, renamed in: the file source must never see half a file
                    tmp = pq_dir.parent / f".{c}.parquet"
                    pq.write_table(rows, tmp)
                    os.replace(tmp, pq_dir / f"part-{c}.parquet")
                committed = time.perf_counter()
                with cond:
                    if not cond.wait_for(lambda k=key, s=seen: k in s, timeout=120):
                        raise AssertionError(f"{kind}: commit {c} never reached the stream")
                lat.append(seen[key] - committed)
        finally:
            q.stop()
        out[f"{kind}_median_s"] = statistics.median(lat)
        out[f"{kind}_all_s"] = lat
    out["ratio"] = out["mvtable_median_s"] / out["parquet_file_source_median_s"]
    return out


# -- 3. change feed of a 1% delete ---------------------------------------------------------
def change_feed_case(root: Path, sf: float, *, repeat: int, warmup: int) -> list[dict[str, Any]]:
    from mvtable import Table

    lineitem = data.load_lineitem(data.generate(sf, root / f"tpch-{data.sf_label(sf)}"))
    cut = lineitem.column("l_shipdate")[max(0, lineitem.num_rows // 100 - 1)]  # sorted by l_shipdate
    deletes = {"clustered": pc.field("l_shipdate") <= cut.as_py(), "scattered": data.del1_expr(sf)}
    out = []
    for name, expr in deletes.items():
        path = root / f"cdf-{name}-{data.sf_label(sf)}"
        shutil.rmtree(path, ignore_errors=True)
        t = Table.create(str(path), schema=lineitem.schema, properties={"rowGroupRows": "131072"})
        step = max(1, lineitem.num_rows // 4)
        for s in range(0, lineitem.num_rows, step):  # a few segments
            t.append(lineitem.slice(s, step))
        deleted = t.delete(expr).deleted_rows
        v = t.version
        full, feed = [], []
        for _ in range(warmup + repeat):
            start = time.perf_counter()
            n_full = t.to_arrow().num_rows
            full.append(time.perf_counter() - start)
            start = time.perf_counter()
            changes = t.changes(v, v)
            feed.append(time.perf_counter() - start)
        if changes.num_rows != deleted or set(changes.column("_change_type").to_pylist()) != {"delete"}:
            raise AssertionError(f"change feed of the {name} delete has {changes.num_rows} rows, expected {deleted} deletes")
        if n_full != lineitem.num_rows - deleted:
            raise AssertionError("the full read does not see the delete")
        f, c = best(full[warmup:]), best(feed[warmup:])
        out.append(
            {
                "case": f"change_feed_1pct_{name}",
                "rows": lineitem.num_rows,
                "deleted": deleted,
                "full_read_s": f,
                "change_feed_s": c,
                "ratio": c / f,
                "target": "<= 0.1",
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    root = a.data_dir / "streaming"
    shutil.rmtree(root / "run", ignore_errors=True)
    work = root / "run"
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    errors: list[str] = []
    load = os.getloadavg()
    log(f"streaming benchmarks: sf {a.sf}, batches {a.sizes} x {a.batches}, load {load[0]:.1f}")
    try:
        if "change_feed" in a.cases:
            results.extend(change_feed_case(root, a.sf, repeat=a.repeat, warmup=a.warmup))
    except Exception as exc:
        errors.append(f"change feed: {type(exc).__name__}: {exc}")
    spark = None
    try:
        if not a.cases & {"sink", "latency"}:
            return _finish(a, results, errors, load)
        from tests.support.spark_session import start_local_spark

        spark = start_local_spark(work / "spark", app_name="mvtable-streaming-benchmarks", quick_jit=a.smoke)
        import mvtable

        mvtable.register(spark)
        for size in a.sizes if "sink" in a.cases else ():
            results.append(sink_case(spark, work, batch_rows=size, batches=a.batches, repeat=a.repeat, warmup=a.warmup))
        if "latency" in a.cases:
            results.append(latency_case(spark, work, commits=a.latency_commits))
    except Exception as exc:
        errors.append(f"spark: {type(exc).__name__}: {exc}")
    finally:
        if spark is not None:
            from tests.support.spark_session import stop_spark

            stop_spark(spark)
    return _finish(a, results, errors, load)


def _finish(a: argparse.Namespace, results: list[dict[str, Any]], errors: list[str], load: tuple[float, ...]) -> int:
    for r in results:
        shown = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items() if not isinstance(v, (dict, list))}
        print(json.dumps(shown))
    out = a.out or HERE / "results" / f"streaming-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"load": load, "smoke": a.smoke, "sf": a.sf, "results": results, "errors": errors}, indent=1))
    for e in errors:
        print("ERROR", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
