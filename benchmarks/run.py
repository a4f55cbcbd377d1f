"""One command for every benchmark: ``python -m benchmarks.run [--sf 1] [--repeat 3]
[--smoke] [--out FILE] [--cases GROUP,…]``. See ``benchmarks/README.md``.

Exits non-zero only when something fails or answers wrongly, never for a missed target."""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import sys
import time
import traceback
from pathlib import Path

from mvtable.conf import defaults

from . import cases_interop, cases_local, cases_meta, cases_schema, cases_spark, cases_tpch, data, report
from .common import DEFAULTS, CaseResult, log, machine_info, start_spark, stop_spark

HERE = Path(__file__).resolve().parent
GROUPS = [
    "table_scan",
    "delete",
    "consistent_push",
    "append",
    "dv_bytes",
    "planning",
    "gc",
    "interop",
    "schema",
    "spark_scans",
    "spark_delete",
    "tpch",
]
PEER_GROUPS = {"table_scan", "delete", "consistent_push", "append"}
PEERS = ["deltalake", "pyiceberg", "lance"]
# The benchmark's row groups: 131,072 rows, as in every recorded run, so that runs compare
# across sessions. The shipped table default (``TABLE_ROW_GROUP_ROWS``, 262,144) makes SF 1
# seven equal files instead of 13, and Spark's size-based packing then puts the files a
# selective TPC-H query reads on one core (``benchmarks/README.md``, "Row groups").
BENCH_ROW_GROUP_ROWS = 131_072
TABLE_ROW_GROUP_ROWS = int(defaults()["table"]["rowGroupRows"])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 1; 0.01 with --smoke)")
    p.add_argument("--repeat", type=int, default=None, help="timed runs per case after one warm-up (default 3; 1 with --smoke)")
    p.add_argument("--smoke", action="store_true", help="tiny scale: checks that every case runs and answers correctly (< 3 min)")
    p.add_argument("--out", type=Path, default=None, help="JSON results file (default benchmarks/results/<timestamp>.json)")
    p.add_argument("--cases", default=",".join(GROUPS), help=f"comma-separated groups (default all): {','.join(GROUPS)}")
    p.add_argument(
        "--peers", default=",".join(PEERS), help="peers to compare with (default deltalake,pyiceberg,lance; '' for none)"
    )
    p.add_argument("--data-dir", type=Path, default=HERE / "data", help="where data and tables go (default benchmarks/data)")
    p.add_argument(
        "--row-group-rows",
        type=int,
        default=None,
        help=f"mvtable rowGroupRows (default {BENCH_ROW_GROUP_ROWS}; the table's own default is {TABLE_ROW_GROUP_ROWS}; 8192 with --smoke)",
    )
    p.add_argument(
        "--segment-rows", type=int, default=None, help="rows per append = per segment (default 1000000; 20000 with --smoke)"
    )
    p.add_argument(
        "--planning-segments",
        type=int,
        default=None,
        help="segments = commits of the planning table (default 10000; 200 with --smoke)",
    )
    p.add_argument("--gc-segments", type=int, default=None, help="segments of the GC table (default 100000; 1000 with --smoke)")
    p.add_argument("--keep", action="store_true", help="keep the built tables afterwards (the generated data is always kept)")
    a = p.parse_args(argv)
    smoke = a.smoke
    a.sf = a.sf if a.sf is not None else (0.01 if smoke else 1.0)
    a.repeat = a.repeat if a.repeat is not None else (1 if smoke else 3)
    a.row_group_rows = a.row_group_rows or (8192 if smoke else BENCH_ROW_GROUP_ROWS)
    a.segment_rows = a.segment_rows or (20000 if smoke else 1_000_000)
    a.planning_segments = a.planning_segments or (200 if smoke else 10_000)
    a.gc_segments = a.gc_segments or (1000 if smoke else 100_000)
    a.groups = {g.strip() for g in a.cases.split(",") if g.strip()}
    unknown = a.groups - set(GROUPS)
    if unknown:
        p.error(f"unknown case groups {sorted(unknown)}; choose from {GROUPS}")
    a.peer_names = [x.strip() for x in a.peers.split(",") if x.strip()]
    bad = set(a.peer_names) - set(PEERS)
    if bad:
        p.error(f"unknown peers {sorted(bad)}; choose from {PEERS}")
    if a.out is None:
        a.out = HERE / "results" / f"{dt.datetime.now():%Y%m%dT%H%M%S}{'-smoke' if smoke else ''}.json"
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    DEFAULTS["warmup"] = 0 if a.smoke else 1
    started = time.perf_counter()
    meta = {
        "command": "python -m benchmarks.run " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "sf": a.sf,
        "repeat": a.repeat,
        "smoke": a.smoke,
        "groups": sorted(a.groups),
        "peers": a.peer_names,
        "row_group_rows": a.row_group_rows,
        "segment_rows": a.segment_rows,
        "machine": machine_info(),
    }
    log(f"mvtable benchmarks: SF {a.sf:g}, repeat {a.repeat}, groups {sorted(a.groups)}")
    results: list[CaseResult] = []
    metrics: dict = {}
    errors: list[str] = []
    root = a.data_dir / f"sf{data.sf_label(a.sf)}"
    work = root / "tables"
    spark = None
    try:
        raw = data.generate(a.sf, root / "tpch")
        t0 = time.perf_counter()
        lineitem = data.load_lineitem(raw)
        log(f"  loaded {lineitem.num_rows} rows ({lineitem.nbytes / 2**20:.0f} MiB in Arrow) in {time.perf_counter() - t0:.1f} s")
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        built = data.build_mvtable(lineitem, work, sf=a.sf, row_group_rows=a.row_group_rows, segment_rows=a.segment_rows)
        built.scratch.mkdir(parents=True, exist_ok=True)
        built.ipc_path = data.ipc_cache(raw)
        if a.groups & PEER_GROUPS and a.peer_names:
            built.peers = data.build_peers(lineitem, built, a.peer_names)
        meta["build"] = {
            "rows": built.rows,
            "segments": len(built.native_files),
            "deleted10": built.deleted10,
            "del10_predicate": data.del10_sql(a.sf),
            "del1_predicate": data.del1_sql(a.sf),
            "times_s": built.build_s,
            "sizes_bytes": data.describe_sizes(built),
            "peers": {n: {"build_s": p.build_s, "error": p.error, "notes": p.notes} for n, p in built.peers.items()},
        }

        def section(name: str, fn) -> None:
            log(f"[{name}]")
            try:
                fn()
            except Exception as exc:
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
                log(traceback.format_exc())

        def local() -> None:
            res, m = cases_local.run(built, lineitem, repeat=a.repeat, smoke=a.smoke, groups=a.groups)
            results.extend(res)
            metrics.update(m)

        section("local", local)
        if "planning" in a.groups:
            section(
                "planning",
                lambda: results.append(
                    cases_meta.planning(built, segments=a.planning_segments, commits=a.planning_segments, repeat=max(a.repeat, 5))
                ),
            )
        if "gc" in a.groups:
            section(
                "gc",
                lambda: results.append(
                    cases_meta.gc_memory(
                        built,
                        segments=a.gc_segments,
                        commits=max(1, a.gc_segments // 100),
                        checkpoint_interval=10 if a.smoke else 100,
                        dv_rounds=3 if a.smoke else 20,
                        repeat=1,
                    )
                ),
            )
        if "interop" in a.groups:
            section("interop", lambda: results.extend(cases_interop.run(built, repeat=a.repeat)))
        if "schema" in a.groups:
            section("schema", lambda: results.extend(cases_schema.run(built, lineitem, repeat=a.repeat)))
        if a.groups & {"spark_scans", "spark_delete", "tpch"}:

            def spark_cases() -> None:
                nonlocal spark
                t = time.perf_counter()
                spark = start_spark(work / "spark", smoke=a.smoke)
                meta["spark_start_s"] = time.perf_counter() - t
                log(f"  Spark {spark.version} up in {meta['spark_start_s']:.1f} s")
                if a.groups & {"spark_scans", "spark_delete"}:
                    results.extend(cases_spark.run(spark, built, repeat=a.repeat, groups=a.groups))

            section("spark", spark_cases)
            if "tpch" in a.groups and spark is not None:
                section("tpch", lambda: results.extend(cases_tpch.run(spark, built, root / "tpch", repeat=a.repeat)))
    except Exception as exc:
        errors.append(f"setup: {type(exc).__name__}: {exc}")
        log(traceback.format_exc())
    finally:
        if spark is not None:
            stop_spark(spark)
    meta["total_s"] = time.perf_counter() - started
    meta["errors"] = errors
    report.write_json(a.out, results, metrics, meta)
    report.print_tables(results, metrics, meta)
    wrong = [r.name for r in results if r.check != "ok"]
    missed = [r.name for r in results if r.status == "MISSED"]
    print(f"\nJSON: {a.out}\ntotal {meta['total_s']:.0f} s; targets missed: {', '.join(missed) or 'none'}")
    if wrong:
        print(f"WRONG ANSWERS: {', '.join(wrong)}")
    if errors:
        print("ERRORS:\n  " + "\n  ".join(errors))
    if not a.keep and not errors:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if errors or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
