"""What checking every byte costs: ``python -m benchmarks.checksums [--sf 1] [--repeat 5]
[--no-spark] [--smoke]``.

Segments carry a CRC-32 in every Parquet page header and the log a CRC-32 of each
segment's footer (``connector/segment_checks.py``); every read verifies them. Two
measurements, each with the checks on and off in the same process, runs interleaved in a
rotating order (``common.measure``), on lineitem with 10% deleted (``data.build_mvtable``):

1. ``Table.scan(...).to_arrow()`` of the whole table, checks on vs off
   (``segment_checks.VERIFY``: page CRCs, footer CRC, the dictionary-index check stays on
   since it guards memory safety).
2. TPC-H Q1, Q3, Q6 and Q14 (``cases_tpch.QUERIES``) through ``mvtable.create_view`` with
   Spark's Parquet reader verifying page checksums (``parquet.page.verify-checksum.enabled``,
   what ``create_view`` sets) vs not.

Target: the checks cost ≤ 3%. Each case is measured two ways, and both are printed:

* **by difference** (A/B): CPU time with the checks on over off (median per variant: this
  process's, plus the Spark JVM's for the TPC-H queries, ``common.spark_cpu_clock``), and the
  wall time as the median of the per-round ratios with its quartiles. This is the whole cost,
  but a short read's time moves by a few percent from run to run on a shared machine, as
  much as the checks cost;
* **from inside** (``check_profile``): the CPU time inside the Python page check over
  ``--profile-rounds`` more scans with the checks on (``Table.scan``), or, for Spark, the
  JVM's own ``CRC32`` time per byte times the bytes of the column chunks each query reads,
  against the checked query's CPU time. Its error is a fraction of a percent, so this is
  what a case is judged on; the A/B must agree with it within its own spread.

Both variants read the same files (written with checksums): the difference is the check,
not the bytes. Results are printed and written to ``benchmarks/results/checksums-<timestamp>.json``.
Exits non-zero only when a variant answers differently, never for a missed target.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from . import data
from .check_profile import CheckShare, chunk_bytes, jvm_check_share, jvm_crc_seconds_per_byte, python_check_share
from .common import System, log, machine_info, measure, process_cpu, spark_cpu_clock, start_spark, stop_spark

HERE = Path(__file__).resolve().parent
TARGET = 1.03


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.checksums", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 1; 0.01 with --smoke)")
    p.add_argument("--repeat", type=int, default=None, help="timed runs per variant (default 5; 1 with --smoke)")
    p.add_argument("--smoke", action="store_true", help="tiny scale: every case runs and both variants agree")
    p.add_argument("--no-spark", action="store_true", help="only the Table.scan case")
    p.add_argument(
        "--profile-rounds",
        type=int,
        default=None,
        help="checked scans measured from inside (default: --repeat; 0 for none)",
    )
    p.add_argument("--data-dir", type=Path, default=HERE / "data", help="where data and tables go")
    p.add_argument("--out", type=Path, default=None, help="JSON results file")
    a = p.parse_args(argv)
    a.sf = a.sf if a.sf is not None else (0.01 if a.smoke else 1.0)
    a.repeat = a.repeat if a.repeat is not None else (1 if a.smoke else 5)
    a.profile_rounds = a.repeat if a.profile_rounds is None else a.profile_rounds
    if a.out is None:
        a.out = HERE / "results" / f"checksums-{dt.datetime.now():%Y%m%dT%H%M%S}{'-smoke' if a.smoke else ''}.json"
    return a


def scan_case(built: data.Built, *, repeat: int, profile_rounds: int) -> dict[str, Any]:
    from mvtable.connector import Table, segment_checks

    path = str(built.mv_del10)

    def scan(verify: bool) -> Any:
        segment_checks.VERIFY = verify
        try:
            table = Table.open(path).to_arrow()
        finally:
            segment_checks.VERIFY = True
        return (table.num_rows, pc.sum(table.column(0)).as_py())

    timings = measure({"checked": System(lambda: scan(True)), "unchecked": System(lambda: scan(False))}, repeat=repeat, log=log)
    share = python_check_share(lambda: scan(True), rounds=profile_rounds, cpu_clock=process_cpu) if profile_rounds else None
    return _pair("table_scan", "Table.scan().to_arrow() of lineitem, 10% deleted", timings, share)


def tpch_case(spark: Any, built: data.Built, tpch_dir: Path, *, repeat: int) -> list[dict[str, Any]]:
    import mvtable
    from mvtable.connector.spark import native_jvm

    from .cases_tpch import QUERIES, prepare_dimensions

    prepare_dimensions(spark, built, tpch_dir)
    key = next(iter(native_jvm.VERIFY_PAGE_CHECKSUMS))
    saved = dict(native_jvm.VERIFY_PAGE_CHECKSUMS)
    try:
        mvtable.create_view(spark, "lineitem_checked", str(built.mv_del10))
        native_jvm.VERIFY_PAGE_CHECKSUMS[key] = "false"  # the same view without the check
        mvtable.create_view(spark, "lineitem_unchecked", str(built.mv_del10))
    finally:
        native_jvm.VERIFY_PAGE_CHECKSUMS.clear()
        native_jvm.VERIFY_PAGE_CHECKSUMS.update(saved)
    cpu_clock = spark_cpu_clock(spark)  # the queries' work is the JVM's
    crc_cost = jvm_crc_seconds_per_byte(spark)
    log(f"  the Spark JVM's CRC32: {1 / crc_cost / 1e9:.1f} GB/s")
    columns = spark.table("lineitem_checked").columns
    out = []
    try:
        for q, text in QUERIES.items():
            log(f"  tpch {q}")

            def query(view: str, text: str = text) -> list[tuple]:
                return [tuple(r) for r in spark.sql(text.format(lineitem=view)).collect()]

            timings = measure(
                {"checked": System(lambda: query("lineitem_checked")), "unchecked": System(lambda: query("lineitem_unchecked"))},
                repeat=repeat,
                log=log,
                cpu_clock=cpu_clock,
            )
            checked_cpu = timings["checked"].cpu_median
            share = None
            if checked_cpu:
                share = jvm_check_share(
                    checked_bytes=chunk_bytes(str(built.mv_del10), [c for c in columns if re.search(rf"\b{c}\b", text)]),
                    seconds_per_byte=crc_cost,
                    checked_cpu=checked_cpu,
                    rounds=repeat,
                )
            out.append(_pair(f"tpch_{q}_create_view", f"TPC-H {q.upper()} through create_view, 10% deleted", timings, share))
    finally:
        mvtable.drop_view(spark, "lineitem_checked")
        mvtable.drop_view(spark, "lineitem_unchecked")
    return out


def _judged(share: CheckShare | None, on_cpu: float | None, off_cpu: float | None, paired_ratio: float | None) -> float | None:
    """The ratio a case is judged on: the checks' cost measured from inside where it was, else
    the A/B's CPU time, else its wall time paired by round."""
    if share is not None:
        return 1 + share.cost
    return on_cpu / off_cpu if on_cpu and off_cpu else paired_ratio


def _pair(name: str, description: str, timings: dict[str, Any], share: CheckShare | None) -> dict[str, Any]:
    on, off = timings["checked"], timings["unchecked"]
    ratio = on.median / off.median if on.median and off.median else None
    on_cpu, off_cpu = on.cpu_median, off.cpu_median
    # Each round runs both variants back to back (``measure`` rotates their order), so a
    # round's two runs share the machine's load: the median of the per-round ratios is far
    # steadier than a ratio of medians taken over minutes of changing load.
    paired = sorted(a / b for a, b in zip(on.runs, off.runs, strict=True) if b)
    paired_ratio = statistics.median(paired) if paired else None
    quartiles = statistics.quantiles(paired, n=4) if len(paired) >= 4 else None
    paired_cpu = sorted(a / b for a, b in zip(on.cpu, off.cpu, strict=True) if b)
    return {
        "name": name,
        "description": description,
        "checked_s": on.median,
        "unchecked_s": off.median,
        "checked_runs": on.runs,
        "unchecked_runs": off.runs,
        "ratio": ratio,
        "paired_ratio": paired_ratio,
        "paired_ratio_quartiles": [quartiles[0], quartiles[2]] if quartiles else None,
        # CPU seconds of this process, plus the Spark JVM's in the TPC-H cases: what the
        # checks cost in work, which other load on a shared machine moves far less than the
        # wall time of a 0.1 s query
        "checked_cpu_s": on_cpu,
        "unchecked_cpu_s": off_cpu,
        "cpu_ratio": on_cpu / off_cpu if on_cpu and off_cpu else None,
        "paired_cpu_ratio": statistics.median(paired_cpu) if paired_cpu else None,
        "min_cpu_ratio": min(on.cpu) / min(off.cpu) if on.cpu and off.cpu and min(off.cpu) else None,
        # the same cost measured from inside the checked reads (``check_profile``)
        "inside": share.to_json() if share else None,
        "judged_ratio": (judged := _judged(share, on_cpu, off_cpu, paired_ratio)),
        "target": TARGET,
        "status": "ok" if judged is not None and judged <= TARGET else "MISSED",
        "check": "ok" if on.result == off.result else "the two variants answer differently",
        "load": [*on.loads, *off.loads],
    }


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    root = a.data_dir / f"sf{data.sf_label(a.sf)}"
    work = root / "checksum-tables"
    raw = data.generate(a.sf, root / "tpch")
    lineitem = data.load_lineitem(raw)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    segment_rows = 20_000 if a.smoke else 1_000_000
    built = data.build_mvtable(lineitem, work, sf=a.sf, row_group_rows=8192 if a.smoke else 131_072, segment_rows=segment_rows)
    results = [scan_case(built, repeat=a.repeat, profile_rounds=a.profile_rounds)]
    spark = None
    try:
        if not a.no_spark:
            spark = start_spark(work / "spark", smoke=a.smoke)
            results += tpch_case(spark, built, root / "tpch", repeat=a.repeat)
    finally:
        if spark is not None:
            stop_spark(spark)
        shutil.rmtree(work, ignore_errors=True)
    meta = {
        "command": "python -m benchmarks.checksums " + " ".join(argv if argv is not None else sys.argv[1:]),
        "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "sf": a.sf,
        "repeat": a.repeat,
        "load_at_end": os.getloadavg(),
        "machine": machine_info(),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2, default=str))
    print(
        f"\n{'case':<26}{'checked s':>11}{'unchecked s':>13}{'ratio':>8}{'paired':>8}{'(IQR)':>15}"
        f"{'CPU ratio':>11}{'paired':>8}{'inside':>9}  target  status"
    )
    for r in results:
        ratio = f"{r['ratio']:.3f}" if r["ratio"] else "n/a"
        paired = f"{r['paired_ratio']:.3f}" if r["paired_ratio"] else "n/a"
        iqr = "({:.3f}-{:.3f})".format(*r["paired_ratio_quartiles"]) if r["paired_ratio_quartiles"] else ""
        cpu = f"{r['cpu_ratio']:.3f}" if r["cpu_ratio"] else "n/a"
        paired_cpu = f"{r['paired_cpu_ratio']:.3f}" if r["paired_cpu_ratio"] else "n/a"
        inside = f"{1 + r['inside']['cost']:.3f}" if r["inside"] else "n/a"
        print(
            f"{r['name']:<26}{r['checked_s']:>11.4f}{r['unchecked_s']:>13.4f}{ratio:>8}{paired:>8}{iqr:>15}{cpu:>11}"
            f"{paired_cpu:>8}{inside:>9}"
            f"  ≤ {TARGET}  {r['status']}  {r['check']}"
        )
    print(f"JSON: {a.out}")
    return 0 if all(r["check"] == "ok" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
