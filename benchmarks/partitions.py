"""Partitioned tables (issue 30): ``python -m benchmarks.partitions [--sf 1] [--repeat 5] [--smoke]``.

lineitem partitioned by ``day(l_shipdate)`` with 10% of its rows deleted, in every system
(``partition_tables``), and three cases measured in one run:

1. ``replace_day``: replacing one day's rows. mvtable's consistent push
   ``t.overwrite(day_rows, consistent_push=True, replace_where=<l_shipdate == day>)`` against
   delta-rs ``write_deltalake(mode="overwrite", predicate="l_shipdate = '…'")`` (partitioned by
   ``l_shipdate``), pyiceberg ``overwrite(df, overwrite_filter=EqualTo("l_shipdate", …))`` (spec
   ``day(l_shipdate)``) and Lance (delete the day, append it: Lance has no partitions). Each run
   works on a fresh hard-linked copy. Target: mvtable the fastest. Then each system replaces the
   day once more in a child process under ``strace -f``, and the data files it opened are matched
   against the files the table held (each file's ship days read from the file itself): target
   for mvtable, no data file of another day read (its replace is aligned to partitions, so none
   at all).
2. ``month_query``: a TPC-H Q1-like aggregate over one month of ``l_shipdate`` through
   ``mvtable.create_view(…, filters=<the month>)`` against Spark on a hive-partitioned Parquet copy
   of the visible rows (``l_shipdate=YYYY-MM-DD/`` folders, written by pyarrow with the
   segments' encodings), same query text, views made before the timer. Target ≤ 1.1×. Info: the
   same view made without ``filters=`` (the month only in the SQL ``WHERE``).
3. ``planning_3650``: planning a one-day scan of a table with 3,650 day partitions (one tiny
   segment each, built by one ``append`` through the Python API): ``Table.scan(filter=<one day of
   ts>)``, which pins the version, catches up the log and plans, nothing read. Target ≤ 20 ms.

Ratios are printed (``report``) and written to ``benchmarks/results/partitions-<timestamp>.json``.
Exits non-zero when a case fails or a system answers wrongly, never for a missed target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from . import data, report
from . import partition_tables as pt
from .common import CaseResult, System, log, machine_info, measure, start_spark, stop_spark

HERE = Path(__file__).resolve().parent
CASES = ("replace_day", "month_query", "planning")
MV_NA = "n/a: mvtable's partitioned table could not be built (see the errors)"
REPLACE_TARGET = 1.0  # mvtable / each peer
MONTH_TARGET = 1.1
PLANNING_BUDGET_S = 0.020
MONTH_QUERY = """
    SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty, sum(l_extendedprice) AS sum_base_price,
           sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
           sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
           avg(l_quantity) AS avg_qty, avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc,
           count(*) AS count_order
    FROM {lineitem}
    WHERE l_shipdate >= date '{first}' AND l_shipdate < date '{after}'
    GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.partitions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 1; 0.01 with --smoke)")
    p.add_argument("--repeat", type=int, default=None, help="timed runs per system after one warm-up (default 5; 1 with --smoke)")
    p.add_argument("--smoke", action="store_true", help="tiny scale, no warm-up: every case runs and answers right")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated cases (default all): {','.join(CASES)}")
    p.add_argument("--peers", default="deltalake,pyiceberg,lance", help="peers of replace_day ('' for none)")
    p.add_argument("--day", default="1995-06-17", help="the ship day replace_day replaces (default 1995-06-17)")
    p.add_argument("--month", default="1995-06", help="the month month_query reads (default 1995-06)")
    p.add_argument(
        "--planning-partitions",
        type=int,
        default=None,
        help="day partitions of the planning table (default 3650; 365 with --smoke)",
    )
    p.add_argument(
        "--ship-dates",
        default=None,
        help="FIRST,AFTER: keep only the line items shipped on FIRST up to AFTER, excluded (default all; "
        "1995-01-01,1996-01-01 with --smoke: a year of day partitions is what the checks need, and the "
        "peers' builds cost per partition)",
    )
    p.add_argument("--row-group-rows", type=int, default=131_072, help="mvtable rowGroupRows (default 131072)")
    p.add_argument("--no-trace", action="store_true", help="skip the strace run that counts the data files each replace opens")
    p.add_argument("--data-dir", type=Path, default=HERE / "data", help="where data and tables go (default benchmarks/data)")
    p.add_argument("--out", type=Path, default=None, help="JSON results file")
    p.add_argument("--keep", action="store_true", help="keep the built tables")
    a = p.parse_args(argv)
    a.sf = a.sf if a.sf is not None else (0.01 if a.smoke else 1.0)
    a.repeat = a.repeat if a.repeat is not None else (1 if a.smoke else 5)
    a.planning_partitions = a.planning_partitions or (365 if a.smoke else 3650)
    a.case_names = [c.strip() for c in a.cases.split(",") if c.strip()]
    unknown = set(a.case_names) - set(CASES)
    if unknown:
        p.error(f"unknown cases {sorted(unknown)}; choose from {', '.join(CASES)}")
    a.peer_names = [x.strip() for x in a.peers.split(",") if x.strip()]
    if set(a.peer_names) - set(pt.SYSTEMS[1:]):
        p.error(f"unknown peers {sorted(set(a.peer_names) - set(pt.SYSTEMS[1:]))}; choose from {', '.join(pt.SYSTEMS[1:])}")
    try:
        a.day = dt.date.fromisoformat(a.day)
        first = dt.date.fromisoformat(a.month + "-01")
    except ValueError as exc:
        p.error(f"--day is YYYY-MM-DD and --month YYYY-MM: {exc}")
    a.month_first = first
    a.month_after = (first.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    ship_dates = a.ship_dates if a.ship_dates is not None else ("1995-01-01,1996-01-01" if a.smoke else "")
    a.ship_window = None
    if ship_dates:
        try:
            ship_first, ship_after = (dt.date.fromisoformat(d.strip()) for d in ship_dates.split(","))
        except ValueError as exc:
            p.error(f"--ship-dates is FIRST,AFTER as YYYY-MM-DD,YYYY-MM-DD: {exc}")
        if not ship_first <= a.day < ship_after or not ship_first <= first < a.month_after <= ship_after:
            p.error(f"--ship-dates {ship_first},{ship_after} must hold --day {a.day} and --month {a.month}")
        a.ship_window = (ship_first, ship_after)
    if a.out is None:
        a.out = HERE / "results" / f"partitions-{dt.datetime.now():%Y%m%dT%H%M%S}{'-smoke' if a.smoke else ''}.json"
    return a


# --------------------------------------------------------------------------- (a) replace one day
def replace_day(
    systems: dict[str, pt.DaySystem], visible: pa.Table, work: Path, *, day: dt.date, repeat: int, smoke: bool, trace: bool
) -> tuple[list[CaseResult], list[str]]:
    """The timed replaces, the checks, the traces; returns the results and what failed for mvtable."""
    old = visible.filter(pt.day_filter(day))
    rows = pt.refreshed(old)
    if not rows.num_rows:
        raise ValueError(f"no visible row ships on {day}; pick another --day")
    rows_path = work / "day_rows.parquet"
    pq.write_table(rows, rows_path)
    copies = {"n": 0}

    def fresh(s: pt.DaySystem):
        def setup() -> str:
            copies["n"] += 1
            return s.copy(s.base, f"run{copies['n']}")

        return setup

    def replace(s: pt.DaySystem):
        def fn(handle: str) -> str:
            s.replace(handle, rows, day)
            return handle

        return fn

    timings = measure(
        # mvtable is optional here too, so that a failure of it still leaves the peers' numbers;
        # it is reported as an error of the run (``failures``)
        {n: System(replace(s), setup=fresh(s), optional=True) for n, s in systems.items()},
        repeat=repeat,
        warmup=0 if smoke else 1,
        log=log,
    )
    checks: dict[str, str] = {}
    for n, s in systems.items():
        handle = timings[n].result
        if handle is None:
            continue
        got, total = s.read_day(handle, day)
        comments = set(got.column("l_comment").to_pylist())
        if got.num_rows != rows.num_rows or comments != {"refreshed"} or total != visible.num_rows:
            checks[n] = (
                f"{n}: day holds {got.num_rows} rows (want {rows.num_rows}), comments {sorted(comments)[:3]}, "
                f"table {total} rows (want {visible.num_rows})"
            )
    traces: dict[str, Any] = {}
    if trace:
        for n, s in systems.items():
            if timings[n].error:
                traces[n] = {"na": timings[n].error}
                continue
            try:
                handle = s.copy(s.base, "traced")
                files = pt.data_files(s, handle)
                traces[n] = pt.traced_replace(s, handle, rows_path, day, files=files, trace_dir=work / "traces")
            except Exception as exc:
                traces[n] = {"na": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
            log(f"    {n:<10} files opened: {traces[n]}")
    js = {n: t.to_json() for n, t in timings.items()}
    mv = timings["mvtable"].median if "mvtable" in timings else None
    mv_error = timings["mvtable"].error if "mvtable" in timings else None
    mv_na = f"n/a: mvtable's replace failed: {mv_error}" if mv_error else MV_NA
    mv_trace = traces.get("mvtable", {})
    other_read = mv_trace.get("files_of_other_days_read")
    details = {
        "day": day.isoformat(),
        "rows_replaced": rows.num_rows,
        "table_rows": visible.num_rows,
        "files_opened": traces,
        "notes": {n: s.notes for n, s in systems.items() if s.notes},
    }
    check = "; ".join(checks.values()) or "ok"
    out = []
    for n in systems:
        if n == "mvtable":
            continue
        out.append(
            CaseResult(
                name=f"replace_day_vs_{n}",
                group="peers",
                description=f"replace the {rows.num_rows} rows of {day} (consistent push with replace_where) vs {n}",
                mvtable=mv,
                baseline_name=n,
                baseline=timings[n].median,
                target=REPLACE_TARGET,
                target_text=f"≤ {REPLACE_TARGET}×",
                systems=js,
                details={**details, **({"na": timings[n].error} if timings[n].error else {} if mv else {"na": mv_na})},
                check="ok" if n not in checks and "mvtable" not in checks else check,
            )
        )
    if trace and "mvtable" in systems:
        out.append(
            CaseResult(
                name="replace_day_other_days_read",
                group="partitions",
                description="data files of other days the mvtable replace opened (strace of every open)",
                mvtable=float(other_read) if other_read is not None else None,
                baseline_name="files of other days in the table",
                baseline=float(mv_trace["files_of_other_days"]) if "files_of_other_days" in mv_trace else None,
                unit="files",
                target=0.0,
                target_text="0 files",
                details=details,
                check="ok" if "mvtable" not in checks else check,
            )
        )
    failures = []
    if "mvtable" in timings and timings["mvtable"].error:
        failures.append(f"replace_day: mvtable's replace failed: {timings['mvtable'].error}")
    if "mvtable" in checks:  # also when no peer row shows it
        failures.append(f"replace_day: mvtable answered wrongly: {checks['mvtable']}")
    if trace and "na" in mv_trace:
        failures.append(f"replace_day: the traced mvtable replace failed: {mv_trace['na']}")
    return out, failures


def unbuilt_peer(name: str, error: str) -> CaseResult:
    return CaseResult(
        name=f"replace_day_vs_{name}",
        group="peers",
        description=f"replace one day vs {name}",
        mvtable=None,
        baseline_name=name,
        baseline=None,
        target=REPLACE_TARGET,
        target_text=f"≤ {REPLACE_TARGET}×",
        details={"na": f"n/a: {name} could not build its table: {error}"},
    )


# --------------------------------------------------------------------------- (b) one month through create_view
def write_hive_copy(visible: pa.Table, root: Path, *, row_group_rows: int) -> Path:
    """The visible rows as hive-partitioned Parquet (``l_shipdate=YYYY-MM-DD/``), encoded as mvtable's segments are."""
    from mvtable.connector.segment_encoding import dictionary_columns_for, parquet_writer_options

    path = root / "hive_visible"
    shutil.rmtree(path, ignore_errors=True)
    stored = visible.drop_columns(["l_shipdate"])
    options = parquet_writer_options(use_dictionary=dictionary_columns_for(stored), schema=stored.schema)
    fmt = pads.ParquetFileFormat()
    pads.write_dataset(
        visible,
        path,
        format=fmt,
        file_options=fmt.make_write_options(**options),
        partitioning=pads.partitioning(pa.schema([visible.schema.field("l_shipdate")]), flavor="hive"),
        max_partitions=1 << 16,
        max_rows_per_group=row_group_rows,
        existing_data_behavior="delete_matching",
    )
    return path


def month_query(
    spark: Any, mv_path: Path | None, hive: Path, *, first: dt.date, after: dt.date, repeat: int, smoke: bool
) -> list[CaseResult]:
    import mvtable

    spark.read.parquet(str(hive)).createOrReplaceTempView("lineitem_hive")
    views = {"hive_parquet": "lineitem_hive"}
    if mv_path is not None:
        month = [("l_shipdate", ">=", first), ("l_shipdate", "<", after)]
        mvtable.create_view(spark, "lineitem_month", str(mv_path), filters=month)
        mvtable.create_view(spark, "lineitem_where", str(mv_path))
        views |= {"create_view_filters": "lineitem_month", "create_view_where_only": "lineitem_where"}

    def query(view: str) -> list[tuple]:
        return [tuple(r) for r in spark.sql(MONTH_QUERY.format(lineitem=view, first=first, after=after)).collect()]

    try:
        timings = measure(
            {n: System(lambda v=v: query(v)) for n, v in views.items()}, repeat=repeat, warmup=0 if smoke else 1, log=log
        )
    finally:
        if mv_path is not None:
            mvtable.drop_view(spark, "lineitem_month")
            mvtable.drop_view(spark, "lineitem_where")
    expected = timings["hive_parquet"].result
    if not expected:
        raise ValueError(f"no row ships in {first:%Y-%m}: pick another --month")
    wrong = [n for n, t in timings.items() if t.result != expected]
    check = "ok" if not wrong else f"{', '.join(wrong)} differ from the hive-partitioned Parquet"
    js = {n: t.to_json() for n, t in timings.items()}
    out = []
    for n, target in (("create_view_filters", MONTH_TARGET), ("create_view_where_only", None)):
        out.append(
            CaseResult(
                name=f"month_query_{n}",
                group="partitions",
                description=f"Q1-like aggregate over {first:%Y-%m} through mvtable.create_view "
                + ("with filters=<the month>" if n.endswith("filters") else "(month only in the SQL WHERE)"),
                mvtable=timings[n].median if n in timings else None,
                baseline_name="Spark, hive-partitioned Parquet",
                baseline=timings["hive_parquet"].median,
                target=target,
                target_text=f"≤ {target}×" if target else "",
                systems=js,
                details={} if mv_path is not None else {"na": MV_NA},
                check=check,
            )
        )
    return out


# --------------------------------------------------------------------------- (c) planning on 3,650 days
def planning_table(root: Path, *, partitions: int) -> tuple[Any, dt.datetime]:
    """A table of ``partitions`` days (``day(ts)``), four rows a day, written by one append; and a day in it."""
    start = dt.datetime(2015, 1, 1)
    n = partitions * 4
    rows = pa.table(
        {
            "ts": pa.array([start + dt.timedelta(hours=6 * i) for i in range(n)], pa.timestamp("us")),
            "id": pa.array(range(n), pa.int64()),
            "v": pa.array([float(i % 97) for i in range(n)], pa.float64()),
        }
    )
    path = root / "planning_days"
    shutil.rmtree(path, ignore_errors=True)
    began = time.perf_counter()
    t = pt.mvtable_create(str(path), rows.schema, partition_by=["day(ts)"], properties={})
    t.append(rows)
    segments = len(t.snapshot().visible_segments())
    log(f"  planning table: {n} rows in {segments} segments ({partitions} days) in {time.perf_counter() - began:.1f} s")
    if segments != partitions:
        raise AssertionError(f"the planning table has {segments} segments, not one per day ({partitions})")
    return path, start + dt.timedelta(days=partitions // 2)


def planning(root: Path, *, partitions: int, repeat: int) -> CaseResult:
    from mvtable.connector import Table

    path, day = planning_table(root, partitions=partitions)
    t = Table(str(path))
    one_day = (pc.field("ts") >= pa.scalar(day, pa.timestamp("us"))) & (
        pc.field("ts") < pa.scalar(day + dt.timedelta(days=1), pa.timestamp("us"))
    )
    open_scans: list[Any] = []

    def release() -> None:
        while open_scans:
            open_scans.pop().release()

    def plan(_: None) -> tuple[int, int]:
        scan = t.scan(filter=one_day)
        open_scans.append(scan)
        return len(scan.plan.tasks), sum(task.rows for task in scan.plan.tasks)

    timings = measure({"Table.scan": System(plan, setup=release)}, repeat=max(repeat, 7), log=log)
    release()
    tasks, rows = timings["Table.scan"].result
    check = "ok" if (tasks, rows) == (1, 4) else f"the plan has {tasks} tasks of {rows} rows, not the day's one segment of 4"
    return CaseResult(
        name=f"planning_{partitions}_partitions",
        group="partitions",
        description=f"Table.scan(filter=<one day of ts>) on {partitions} day(ts) partitions, planning only",
        mvtable=timings["Table.scan"].median,
        baseline_name="budget",
        baseline=PLANNING_BUDGET_S,
        target=1.0,
        target_text=f"≤ {PLANNING_BUDGET_S * 1000:.0f} ms",
        systems={n: x.to_json() for n, x in timings.items()},
        details={"partitions": partitions, "tasks": tasks},
        check=check,
    )


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        pt.child(json.loads(argv[1]))
        return 0
    a = parse_args(argv)
    started = time.perf_counter()
    root = a.data_dir / f"sf{data.sf_label(a.sf)}"
    work = root / "partitions"
    meta: dict[str, Any] = {
        "command": "python -m benchmarks.partitions " + " ".join(argv),
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "sf": a.sf,
        "repeat": a.repeat,
        "smoke": a.smoke,
        "ship_dates": [d.isoformat() for d in a.ship_window] if a.ship_window else None,
        "cases": a.case_names,
        "peers": a.peer_names,
        "machine": machine_info(),
    }
    log(f"partition benchmarks: SF {a.sf:g}, repeat {a.repeat}, cases {a.case_names}, peers {a.peer_names}")
    results: list[CaseResult] = []
    errors: list[str] = []

    def section(name: str, fn: Any) -> None:
        log(f"[{name}]")
        try:
            fn()
        except pt.PartitionApiMissing as exc:  # expected until issue 30's API is there: no traceback
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            log(f"  {name}: {exc}")
        except Exception as exc:
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            log(traceback.format_exc())

    spark = None
    try:
        lineitem = data.load_lineitem(data.generate(a.sf, root / "tpch"))
        if a.ship_window is not None:
            ship_first, ship_after = a.ship_window
            lineitem = lineitem.filter((pc.field("l_shipdate") >= ship_first) & (pc.field("l_shipdate") < ship_after))
            log(f"  kept the {lineitem.num_rows} line items shipped from {ship_first} to {ship_after} (excluded)")
        visible = lineitem.filter(~data.del10_expr(a.sf))
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        systems: dict[str, pt.DaySystem] = {}
        build: dict[str, Any] = {"rows": lineitem.num_rows, "visible": visible.num_rows, "del10": data.del10_sql(a.sf)}
        needs_mv = bool({"replace_day", "month_query"} & set(a.case_names))
        for name in (["mvtable"] if needs_mv else []) + (a.peer_names if "replace_day" in a.case_names else []):
            began = time.perf_counter()
            try:
                systems[name] = pt.build_system(name, lineitem, work, sf=a.sf, row_group_rows=a.row_group_rows)
                build[name] = {"build_s": time.perf_counter() - began}
                log(f"  {name}: built in {build[name]['build_s']:.1f} s")
            except Exception as exc:
                build[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
                if name == "mvtable":  # a peer that cannot build is n/a in its row, as in benchmarks.run
                    errors.append(f"build {name}: {build[name]['error']}")
                log(f"  {name}: could not build: {build[name]['error']}")
        if "pyiceberg" in a.peer_names and "replace_day" in a.case_names:
            build["pyiceberg_writable_transforms"] = pt.iceberg_writable_transforms(work)
            log(f"  pyiceberg writes the transforms: {build['pyiceberg_writable_transforms']}")
        meta["build"] = build
        if "replace_day" in a.case_names and systems:

            def replace() -> None:
                res, failures = replace_day(
                    systems, visible, work, day=a.day, repeat=a.repeat, smoke=a.smoke, trace=not a.no_trace
                )
                results.extend(res)
                errors.extend(failures)
                for n in a.peer_names:  # peers that could not even be built
                    if n not in systems:
                        results.append(unbuilt_peer(n, build[n]["error"]))

            section("replace_day", replace)
        if "month_query" in a.case_names:

            def month() -> None:
                nonlocal spark
                hive = write_hive_copy(visible, work, row_group_rows=a.row_group_rows)
                spark = start_spark(work / "spark", smoke=a.smoke)
                mv = Path(systems["mvtable"].base) if "mvtable" in systems else None
                results.extend(
                    month_query(spark, mv, hive, first=a.month_first, after=a.month_after, repeat=a.repeat, smoke=a.smoke)
                )

            section("month_query", month)
        if "planning" in a.case_names:
            section("planning", lambda: results.append(planning(work, partitions=a.planning_partitions, repeat=a.repeat)))
    except Exception as exc:
        errors.append(f"setup: {type(exc).__name__}: {exc}")
        log(traceback.format_exc())
    finally:
        if spark is not None:
            stop_spark(spark)
    meta["total_s"] = time.perf_counter() - started
    meta["errors"] = errors
    meta["load_at_end"] = os.getloadavg()
    report.write_json(a.out, results, {}, meta)
    report.print_tables(results, {}, meta)
    opened = next((r.details["files_opened"] for r in results if r.details.get("files_opened")), {})
    if opened:
        print(f"data files each system's replace of {a.day} opened (strace):")
    for n, f in opened.items():
        if "na" in f:
            print(f"  {n:<10} n/a ({f['na']})")
        else:
            print(
                f"  {n:<10} data files of other days read: {f['files_of_other_days_read']} of {f['files_of_other_days']}; "
                f"of the day: {f['files_of_the_day_read']} of {f['files_of_the_day']}"
            )
    transforms = meta.get("build", {}).get("pyiceberg_writable_transforms")
    if transforms:
        print("pyiceberg writes: " + ", ".join(f"{k} {'yes' if v == 'ok' else 'no (' + v + ')'}" for k, v in transforms.items()))
    wrong = [r.name for r in results if r.check != "ok"]
    missed = [r.name for r in results if r.status == "MISSED"]
    print(f"\nJSON: {a.out}\ntotal {meta['total_s']:.0f} s; targets missed: {', '.join(missed) or 'none'}")
    if wrong:
        print(f"WRONG ANSWERS: {', '.join(wrong)}")
    if errors:
        print("ERRORS:\n  " + "\n  ".join(errors))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if errors or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
