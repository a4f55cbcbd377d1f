"""The benchmark timer records CPU time beside wall time (a shared machine's load shows in
wall time; CPU time is what a change can be judged by)."""

from __future__ import annotations

import time

from benchmarks.common import System, measure


def _spin(seconds: float) -> int:
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += 1
    return n


def test_measure_records_cpu_beside_wall_time() -> None:
    t = measure(
        {"busy": System(lambda: _spin(0.02)), "idle": System(lambda: time.sleep(0.02))},
        repeat=3,
        warmup=1,
        log=lambda _: None,
    )
    busy, idle = t["busy"], t["idle"]
    assert len(busy.cpu) == len(busy.runs) == 3  # timed runs only, not the warm-up
    assert busy.cpu_median is not None and busy.cpu_median >= 0.015
    assert idle.cpu_median is not None and idle.cpu_median < 0.01 <= idle.median
    assert busy.to_json()["cpu_median_s"] == busy.cpu_median


def test_an_optional_system_that_always_fails_is_recorded_not_raised() -> None:
    def broken() -> None:
        raise RuntimeError("no such API")

    lines: list[str] = []
    t = measure({"ok": System(lambda: 1), "peer": System(broken, optional=True)}, repeat=2, warmup=0, log=lines.append)
    assert t["peer"].error == "RuntimeError: no such API" and t["peer"].median is None and not t["peer"].runs
    assert t["ok"].result == 1 and len(t["ok"].runs) == 2
    assert any("peer" in line and "n/a: RuntimeError: no such API" in line for line in lines)


def test_spark_cpu_clock_counts_the_jvms_work(spark) -> None:
    """A Spark query's work is done in the JVM, which this process's CPU time does not see."""
    from benchmarks.common import spark_cpu_clock

    t = measure(
        {"query": System(lambda: spark.range(6_000_000).selectExpr("sum(id * 7 % 13)").collect())},
        repeat=2,
        warmup=1,
        log=lambda _: None,
        cpu_clock=spark_cpu_clock(spark),
    )
    query = t["query"]
    assert query.cpu_median is not None and query.cpu_median >= 0.5 * query.median  # busy executor threads
    python_only = measure(
        {"query": System(lambda: spark.range(6_000_000).selectExpr("sum(id * 7 % 13)").collect())},
        repeat=2,
        warmup=0,
        log=lambda _: None,
    )["query"]
    assert python_only.cpu_median is not None and python_only.cpu_median < 0.5 * python_only.median
