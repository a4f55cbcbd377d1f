"""Spark cases: ``format("mvtable")`` against Spark's native Parquet reader on the very same
files (``spark.read.parquet`` on the segments of ``mv_base``).

``format("mvtable")`` is read the way the README's first Spark example reads it: after
``mvtable.register(spark)``, through the native route (``mvtable.DefaultSource`` plans in
Python once, then Spark's own Parquet scan reads the planned files), with column pruning
left to Spark. ``mvtable_python`` is the same read pinned to the Python data source
(``spark.mvtable.nativeScan=false``), for comparison."""

from __future__ import annotations

import datetime as dt
from typing import Any

from .common import CaseResult, System, hardlink_copy, log, measure
from .data import Built, del1_bound, del1_sql, del10_bound

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
NATIVE_SCAN = "spark.mvtable.nativeScan"
MONTH = (dt.date(1995, 3, 1), dt.date(1995, 4, 1))
NO_PEERS = "n/a: the deltalake/iceberg/lance Spark connectors are JVM jars from Maven, which this offline machine cannot fetch"


def _set(spark: Any, key: str, value: str | None) -> None:
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)


def run(spark: Any, built: Built, *, repeat: int, groups: set[str]) -> list[CaseResult]:
    from pyspark.sql import functions as F

    out: list[CaseResult] = []
    files = built.native_files
    base, del10 = str(built.mv_base), str(built.mv_del10)
    not_deleted = ~(F.col("l_partkey") <= del10_bound(built.sf))

    def native():
        return spark.read.parquet(*files)

    def floor(columns: list[str] | None = None):
        reader = spark.read.format("mvbench_floor")
        if columns:
            reader = reader.option("columns", ",".join(columns))
        return reader.load(str(built.ipc_path))

    def mv(path: str, columns: list[str] | None = None):
        reader = spark.read.format("mvtable")
        if columns:
            reader = reader.option("columns", ",".join(columns))
        return reader.load(path)

    def mv_python(path: str, columns: list[str] | None = None):
        old = spark.conf.get(NATIVE_SCAN, None)
        spark.conf.set(NATIVE_SCAN, "false")  # DataFrames made now read on the Python data source
        try:
            return mv(path, columns)
        finally:
            _set(spark, NATIVE_SCAN, old)

    def mv_native(path: str, columns: list[str] | None = None):
        from mvtable.connector.spark import read_native

        return read_native(spark, path, columns=columns)

    def one_col(df):
        return df.agg(F.sum("l_quantity")).collect()[0][0]

    def full_row(df):
        return df.select(F.sum(F.hash(*[F.col(c) for c in df.columns]))).collect()[0][0]

    lo, hi = MONTH

    def month(df):
        row = (
            df.where((F.col("l_shipdate") >= F.lit(lo)) & (F.col("l_shipdate") < F.lit(hi)))
            .agg(F.count(F.lit(1)), F.sum("l_extendedprice"))
            .collect()[0]
        )
        return (row[0], row[1])

    def with_pushdown(on: bool, fn):
        def run_it():
            old = spark.conf.get(PUSHDOWN, None)
            _set(spark, PUSHDOWN, "true" if on else "false")
            try:
                return fn()
            finally:
                _set(spark, PUSHDOWN, old)

        return run_it

    scans = [
        ("one_column", "sum(l_quantity)", one_col, ["l_quantity"], 1.5, "≤ 1.5×"),
        ("full_row", "sum(hash(*))", full_row, None, 1.3, "≤ 1.3×"),
    ]
    if "spark_scans" in groups:
        from pyspark import cloudpickle

        from . import floor as floor_module

        cloudpickle.register_pickle_by_value(floor_module)  # workers need not import benchmarks
        spark.dataSource.register(floor_module.FloorSource)
        for key, what, query, columns, target, ttext in scans:
            log(f"  spark_{key}: {what}")
            expected_del = query(native().where(not_deleted))
            t = measure(
                {
                    "native_parquet": System(lambda q=query: q(native())),
                    # as a user writes it: no columns option, Spark prunes (the native route)
                    "mvtable": System(lambda q=query: q(mv(base))),
                    "mvtable_del10": System(lambda q=query: q(mv(del10))),
                    "mvtable_python_del10": System(lambda q=query, c=columns: q(mv_python(del10, c))),
                    "mvtable_native_del10": System(lambda q=query, c=columns: q(mv_native(del10, c))),
                    "python_source_floor": System(lambda q=query, c=columns: q(floor(c))),
                },
                repeat=repeat,
                log=log,
            )
            systems = {k: v.to_json() for k, v in t.items()}
            check_nodel = (
                "ok"
                if t["mvtable"].result == t["native_parquet"].result
                else f"mvtable {t['mvtable'].result} != native {t['native_parquet'].result}"
            )
            check_del = (
                "ok"
                if t["mvtable_del10"].result == expected_del
                else f"mvtable {t['mvtable_del10'].result} != native-with-filter {expected_del}"
            )
            check_native = (
                "ok"
                if t["mvtable_native_del10"].result == expected_del
                else f"read_native {t['mvtable_native_del10'].result} != native-with-filter {expected_del}"
            )
            opt = f" (option columns={','.join(columns)})" if columns else ""
            check_python = (
                "ok"
                if t["mvtable_python_del10"].result == expected_del
                else f"Python source {t['mvtable_python_del10'].result} != native-with-filter {expected_del}"
            )
            out += [
                CaseResult(
                    f"spark_{key}",
                    "spark",
                    f'Spark {what} through format("mvtable") (native route), no deletes, on the same files',
                    t["mvtable"].median,
                    "Spark native Parquet",
                    t["native_parquet"].median,
                    target=1.1,
                    target_text="≤ 1.1×",
                    systems=systems,
                    check=check_nodel,
                    details={"peers": NO_PEERS},
                ),
                CaseResult(
                    f"spark_{key}_python_del10",
                    "spark",
                    f"Spark {what}{opt}, 10% deleted, on the Python data source (spark.mvtable.nativeScan=false)",
                    t["mvtable_python_del10"].median,
                    "Spark native Parquet (no deletes)",
                    t["native_parquet"].median,
                    systems=systems,
                    check=check_python,
                ),
                CaseResult(
                    f"spark_{key}_del10",
                    "spark",
                    f'Spark {what} through format("mvtable") (native route), 10% deleted',
                    t["mvtable_del10"].median,
                    "Spark native Parquet (no deletes)",
                    t["native_parquet"].median,
                    target=target,
                    target_text=ttext,
                    systems=systems,
                    check=check_del,
                ),
                CaseResult(
                    f"spark_{key}_native_del10",
                    "spark",
                    f"Spark {what}, 10% deleted, read_native (Spark's Parquet reader + deletion vectors as a "
                    "broadcast bitmap join)",
                    t["mvtable_native_del10"].median,
                    "Spark native Parquet (no deletes)",
                    t["native_parquet"].median,
                    target=target,
                    target_text=ttext,
                    systems=systems,
                    check=check_native,
                ),
                CaseResult(
                    f"spark_{key}_ingest_floor",
                    "spark",
                    f"Spark {what} from a trivial Python source (memory-mapped Arrow, no decode, no deletes): "
                    "Spark's own floor for any Python data source",
                    t["python_source_floor"].median,
                    "Spark native Parquet",
                    t["native_parquet"].median,
                    systems=systems,
                    check="ok"
                    if t["python_source_floor"].result == t["native_parquet"].result
                    else f"floor {t['python_source_floor'].result} != native {t['native_parquet'].result}",
                ),
                CaseResult(
                    f"spark_{key}_del10_vs_nodel",
                    "spark",
                    f"Spark {what}, 10% deleted vs the same scan with none",
                    t["mvtable_del10"].median,
                    "mvtable, no deletes",
                    t["mvtable"].median,
                    target=1.1,
                    target_text="≤ 1.1×",
                    systems=systems,
                    check=check_del,
                ),
            ]

        log("  spark_filter: l_shipdate in one month, count + sum(l_extendedprice)")
        cols = ["l_shipdate", "l_extendedprice"]
        expected_del = month(native().where(not_deleted))
        t = measure(
            {
                "native_parquet": System(lambda: month(native())),
                "mvtable": System(with_pushdown(True, lambda: month(mv(base, cols)))),
                "mvtable_del10": System(with_pushdown(True, lambda: month(mv(del10, cols)))),
                "mvtable_no_pushdown": System(with_pushdown(False, lambda: month(mv(base, cols)))),
                "mvtable_native_del10": System(lambda: month(mv_native(del10, cols))),
            },
            repeat=repeat,
            log=log,
        )
        systems = {k: v.to_json() for k, v in t.items()}
        ref = t["native_parquet"].result

        def chk(name: str, want: Any) -> str:
            got = t[name].result
            return "ok" if got == want else f"{name} {got} != {want}"

        opt = "option columns=l_shipdate,l_extendedprice"
        out += [
            CaseResult(
                "spark_filter",
                "spark",
                f"Spark one-month l_shipdate filter, pushdown on ({opt}), no deletes",
                t["mvtable"].median,
                "Spark native Parquet",
                t["native_parquet"].median,
                target=1.0,
                target_text="≤ 1.0×",
                systems=systems,
                check=chk("mvtable", ref),
            ),
            CaseResult(
                "spark_filter_del10",
                "spark",
                "Spark one-month filter, pushdown on, 10% deleted",
                t["mvtable_del10"].median,
                "Spark native Parquet (no deletes)",
                t["native_parquet"].median,
                target=1.0,
                target_text="≤ 1.0×",
                systems=systems,
                check=chk("mvtable_del10", expected_del),
            ),
            CaseResult(
                "spark_filter_native_del10",
                "spark",
                "Spark one-month filter, 10% deleted, read_native",
                t["mvtable_native_del10"].median,
                "Spark native Parquet (no deletes)",
                t["native_parquet"].median,
                target=1.0,
                target_text="≤ 1.0×",
                systems=systems,
                check=chk("mvtable_native_del10", expected_del),
            ),
            CaseResult(
                "spark_filter_no_pushdown",
                "spark",
                "Spark one-month filter with Spark's default (pushdown off)",
                t["mvtable_no_pushdown"].median,
                "Spark native Parquet",
                t["native_parquet"].median,
                systems=systems,
                check=chk("mvtable_no_pushdown", ref),
            ),
        ]

    if "spark_delete" in groups:
        from mvtable.connector import delete

        log(f"  spark_delete_1pct: delete(spark, path, '{del1_sql(built.sf)}')")
        counter = {"n": 0}

        def fresh() -> str:
            counter["n"] += 1
            return str(hardlink_copy(built.mv_base, built.scratch / f"spark_delete_{counter['n']}"))

        t = measure(
            {
                "native_scan_pred_column": System(
                    lambda: native().select("l_suppkey").where(F.col("l_suppkey") <= del1_bound(built.sf)).count()
                ),
                "mvtable_spark_delete": System(lambda path: delete(spark, path, del1_sql(built.sf)), setup=fresh),
            },
            repeat=repeat,
            log=log,
        )
        got, want = t["mvtable_spark_delete"].result, t["native_scan_pred_column"].result
        out.append(
            CaseResult(
                "spark_delete_1pct",
                "spark",
                f"delete(spark, path, '{del1_sql(built.sf)}') (1%)",
                t["mvtable_spark_delete"].median,
                "Spark native scan of the predicate column",
                t["native_scan_pred_column"].median,
                systems={k: v.to_json() for k, v in t.items()},
                check="ok" if got == want else f"deleted {got}, expected {want}",
                details={"deleted_rows": got},
            )
        )
    return out
