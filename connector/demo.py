"""The whole story in under a minute, on a local table.

Create and append, delete with deletion vectors (no data file rewritten), a consistent push, time
travel, a bad push rolled back in one call, a pushing process killed mid-write and cleaned up by the
next push, two tables refreshed as one transaction and rolled back as one, one day of a
day-partitioned table refreshed and rolled back, the lineage timeline, and vacuum.

Run: ``python -m mvtable.connector.demo [TABLE_DIR]`` (a temporary folder by default)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

# A writer that starts a consistent push and is killed (SIGKILL) once its files are written.
_DOOMED_PUSH = textwrap.dedent(
    """
    import sys, pyarrow as pa
    from mvtable.connector import Table
    Table.open(sys.argv[1]).overwrite(pa.table({"id": pa.array([1], pa.int64()), "store": pa.array([0], pa.int64()),
                                               "price": pa.array([0.0])}), consistent_push=True)
    """
)


def _spark() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("mvtable-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    path = args[0] if args else os.path.join(tempfile.mkdtemp(prefix="mvtable-demo-"), "orders")
    console = Console()
    started = time.monotonic()
    console.print("[bold]Starting Spark[/bold] (local[2])…")
    spark = _spark()
    console.print(f"Spark ready after {time.monotonic() - started:.0f} s")
    try:
        _story(spark, path, console)
    finally:
        spark.stop()
    console.print(f"[bold]done in {time.monotonic() - started:.0f} s[/bold]; the table is left at {path}")
    return 0


def _story(spark: Any, path: str, console: Console) -> None:
    from mvtable.connector import Table, delete, register

    register(spark)  # the data source and the SQL procedures (mvtable_lineage, mvtable_rollback, …)

    def orders(lo: int, hi: int, price: str = "round((id + 1) * 1.25, 2)") -> Any:
        return spark.range(lo, hi).selectExpr("id", "id % 7 AS store", f"CAST({price} AS DOUBLE) AS price")

    def count(**options: Any) -> int:
        reader = spark.read.format("mvtable")
        for k, v in options.items():
            reader = reader.option(k, v)
        return int(reader.load(path).count())

    def step(text: str) -> None:
        console.print(f"\n[bold cyan]▶ {text}[/bold cyan]")

    step("create and append")
    # a demo keeps no history: replaced and reverted segments may go as soon as vacuum runs
    retention = {"property.replacedSegmentsRetentionPeriod": "0s", "property.lineageEntryCleanupRetentionPeriod": "0s"}
    orders(0, 1000).write.format("mvtable").mode("append").options(**retention).save(path)
    orders(1000, 1500).write.format("mvtable").mode("append").save(path)
    table = Table.open(path)
    console.print(f"two appends: {count()} rows in {len(table.snapshot().visible_segment_ids())} segments at {path}")

    step("delete: deletion vectors, no data file rewritten")
    data_dir = os.path.join(path, "data")
    files_before = sorted(os.listdir(data_dir))
    deleted = delete(spark, path, "store = 3")
    snap = table.snapshot()
    dvs = ", ".join(f"{sid[:8]}… {ref.cardinality} rows" for sid, ref in snap.dvs.items())
    same = sorted(os.listdir(data_dir)) == files_before
    console.print(f"deleted {deleted} rows (store = 3); deletion vectors: {dvs}; data files untouched: {same}")

    step("consistent push: a rebuilt snapshot, visible all at once")
    orders(0, 1200, "round((id + 1) * 1.30, 2)").write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(
        path
    )
    good_version = table.version
    console.print(f"readers now see {count()} rows (version {good_version})")

    step("time travel")
    grid = RichTable("version", "operation", "rows")
    for h in table.history():  # Table.scan(version=…) is the same read without Spark
        grid.add_row(str(h.version), str(h.operation), str(table.scan(version=h.version).count()))
    console.print(grid)
    console.print(f'spark.read.format("mvtable").option("versionAsOf", 1): {count(versionAsOf=1)} rows')

    step("a bad push, rolled back in one call")
    orders(0, 1200, "0.0").write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(path)
    bad = table.lineage()[-1].id
    zero = spark.read.format("mvtable").load(path).where("price = 0").count()
    console.print(f"push {bad} made every price 0 ({zero} rows)…")
    [row] = spark.sql(f"SELECT * FROM mvtable_rollback(table => '{path}', entry => '{bad}')").collect()
    console.print(
        f"…mvtable_rollback: {row.message}; rows with price 0 now: "
        f"{spark.read.format('mvtable').load(path).where('price = 0').count()}"
    )

    step("a pushing process killed mid-write never blocks the table")
    child = subprocess.run(
        [sys.executable, "-c", _DOOMED_PUSH, path],
        env={**os.environ, "MVTABLE_FAULT": "write.after_files"},  # SIGKILL once its files are written
        capture_output=True,
    )
    console.print(
        f"writer process died with {signal.Signals(-child.returncode).name if child.returncode < 0 else child.returncode}, "
        f"its push left IN_PROGRESS"
    )
    t0 = time.perf_counter()
    orders(0, 1300, "round((id + 1) * 1.30, 2)").write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(
        path
    )
    console.print(
        f"the next push went through in {time.perf_counter() - t0:.1f} s (no lease to wait for: "
        f"the dead writer's push was reverted in the same commit); {count()} rows"
    )

    step("two tables refreshed as one transaction, and rolled back as one")
    import mvtable

    stores = path.rstrip("/") + "_stores"
    spark.range(7).selectExpr("id AS store", "concat('store ', id) AS name").write.format("mvtable").mode("append").save(stores)
    with mvtable.transaction(spark=spark) as tx:  # each DataFrame's tasks write on the cluster; one commit decides
        tx.write(orders(0, 1300, "round((id + 1) * 1.40, 2)"), path, mode="overwrite")
        tx.write(spark.range(7).selectExpr("id AS store", "concat('renamed ', id) AS name"), stores, mode="overwrite")
    versions = mvtable.consistent_versions([path, stores])
    console.print(f"transaction {tx.id} changed both tables together (consistent versions: {versions})")
    rows = spark.sql(f"SELECT * FROM mvtable_rollback(table => '{stores}', transaction => '{tx.id}')").collect()
    names = sorted(r.name for r in spark.read.format("mvtable").load(stores).collect())[:2]
    console.print(
        f"mvtable_rollback(transaction => …) reverted {sum(r.changed for r in rows)} tables in one call: "
        f"{count()} orders again, stores named {names}…"
    )

    step("events partitioned by day: one day refreshed while the others stay, then rolled back")
    events = path.rstrip("/") + "_events"

    def day_events(days: int, value: str) -> Any:
        rows = spark.range(days * 24).selectExpr(
            "CAST(id AS BIGINT) AS id",
            "timestamp_seconds(1704067200 + id * 3600) AS ts",  # one row an hour from 2024-01-01
            f"CAST({value} AS DOUBLE) AS amount",
        )
        return rows

    day_events(30, "id % 100").write.format("mvtable").mode("append").option("partitionBy", "day(ts)").save(events)
    ev = Table.open(events)
    console.print(f"30 days of events in {ev.partitions().num_rows} day partitions")
    day = "ts >= '2024-01-05' AND ts < '2024-01-06'"
    bad_day = day_events(30, "-1").where(day)
    bad_day.write.format("mvtable").mode("overwrite").option("consistentPush", "true").option("replaceWhere", day).save(events)
    pushed = ev.lineage()[-1]
    snap = ev.snapshot()
    console.print(
        f"push {pushed.id} replaced only {pushed.partitions[0] if pushed.partitions else 'its day'}: "
        f"{len(pushed.segments_from)} segment(s) out, no other day's file read or rewritten; "
        f"negative amounts now: {spark.read.format('mvtable').load(events).where('amount < 0').count()} "
        f"(of {len(snap.visible_segment_ids())} visible segments)"
    )
    [row] = spark.sql(f"SELECT * FROM mvtable_rollback(table => '{events}', entry => '{pushed.id}')").collect()
    console.print(
        f"mvtable_rollback: {row.message}; negative amounts now: "
        f"{spark.read.format('mvtable').load(events).where('amount < 0').count()}; "
        f"draw it: mvtable timeline {events} --html timeline.html"
    )

    step("lineage timeline")
    grid = RichTable("entry", "state", "from → to", "note")
    for e in table.lineage():
        grid.add_row(e.id, str(e.state), f"{len(e.segments_from)} → {len(e.segments_to)}", e.revert_reason or e.status or "")
    console.print(grid)

    step("vacuum, two hours later (a Spark reader's pin keeps its version readable for pinTtl, 1h)")
    later = int(time.time() * 1000) + 2 * 3600 * 1000
    dry = table.vacuum(retention="0s", force=True, dry_run=True, now_ms=later)
    report = table.vacuum(retention="0s", force=True, now_ms=later)
    console.print(
        f"dry run listed {len(dry.files)} files, vacuum deleted {len(report.files)} (the same ones: "
        f"{sorted(dry.files) == sorted(report.files)}): replaced and reverted segments, superseded log files; "
        f"{report.entries_purged} lineage entries cleaned up; the table still reads {count()} rows"
    )
    snap = table.snapshot()
    console.print(
        f"the newest snapshot now holds {len(snap.segments)} segments (all live), "
        f"{len(snap.lineage)} lineage entries and {len(snap.history)} history items"
    )


if __name__ == "__main__":
    raise SystemExit(main())
