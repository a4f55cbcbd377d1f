"""A native Spark read holds its pin while a query reads it, and only ``pinIdleTtl`` after the
last one ended: Spark's SQL execution events tell the JVM when a query ends, so two short
Spark jobs no longer hold back vacuum and GC for ``pinTtl``."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from mvtable.connector import Table
from mvtable.connector.options import read_options
from mvtable.errors import FilesMissingError, from_spark
from mvtable.visibility import pins
from tests.support.spark_session import spark_conf

from .conftest import orders

pytestmark = pytest.mark.spark

IDLE_S = 3


@pytest.fixture
def replaced(tmp_path) -> Table:
    """Version 2 (two appends) is replaced by an overwrite at version 3: vacuum wants its files."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema)
    t.append(orders(0, 100))
    t.append(orders(100, 100))
    t.overwrite(orders(1000, 10))
    return t


def lifetime(spark):
    return spark._jvm.io.mvtable.spark.PinLifetime


def settled(spark, ended_before: int, *, at_least: int = 1) -> None:
    """Wait until the JVM handled ``at_least`` more query ends and made the pin calls they asked for."""
    deadline = time.time() + 30
    while lifetime(spark).executionsEnded() < ended_before + at_least:
        assert time.time() < deadline, "Spark's listener never saw the query end"
        time.sleep(0.05)
    assert lifetime(spark).settle(30_000)


def sleep_past(ms: int) -> None:
    time.sleep(max(0.0, ms / 1000 - time.time()) + 0.1)


def spark_pins(t: Table) -> list[pins.Pin]:
    return [p for p in pins.live_pins(t.io) if p.owner.startswith("Spark read")]


def load(spark, t: Table, **options: str):
    return spark.read.format("mvtable").options(pinIdleTtl=f"{IDLE_S}s", **options).load(t.uri)


def gated_udf(tmp_path: Path) -> tuple[Any, Path, Path]:
    """A UDF that creates ``entered`` when a task reaches it and then holds the task until ``gate``
    exists (at most 60 s): a query that runs for as long as the test wants."""
    from pyspark.sql.functions import udf

    gate = tmp_path / f"release-{uuid.uuid4().hex}"
    entered = tmp_path / f"entered-{uuid.uuid4().hex}"
    gate_path, entered_path = str(gate), str(entered)

    @udf("long")
    def wait_for_gate(x):
        import os
        import time as _time

        open(entered_path, "a").close()
        deadline = _time.time() + 60
        while not os.path.exists(gate_path) and _time.time() < deadline:
            _time.sleep(0.05)
        return x

    return wait_for_gate, gate, entered


def test_a_finished_query_leaves_its_pin_for_the_idle_lifetime_only(spark, replaced):
    """The test that fails without the listener: after ``count()`` the pin would last ``pinTtl``."""
    t = replaced
    ended = lifetime(spark).executionsEnded()
    df = load(spark, t, versionAsOf="2")
    assert df.count() == 200
    settled(spark, ended)
    [pin] = spark_pins(t)
    assert pin.version == 2
    assert pin.expires_ms <= time.time() * 1000 + IDLE_S * 1000 + 50  # pinIdleTtl, not pinTtl (1h)

    held = t.vacuum(retention="0s", force=True, dry_run=True)
    assert [h.pin_id for h in held.held_back if h.kind == "pin"] == [pin.id]  # still held, briefly
    sleep_past(pin.expires_ms)
    freed = t.vacuum(retention="0s", force=True)
    assert not [h for h in freed.held_back if h.kind == "pin"]
    assert [f for f in freed.files if f.startswith("data/")]  # version 2's segments went

    with pytest.raises(Exception) as info:  # the next query re-pins, and finds its files collected
        df.count()
    error = from_spark(info.value)
    assert isinstance(error, FilesMissingError), info.value
    assert "of version 2 of" in error.message and "vacuum removed it" in error.message
    assert not spark_pins(t)  # the failed re-pin left no pin behind


def test_the_next_query_renews_a_lapsed_pin_while_the_version_is_whole(spark, replaced):
    t = replaced
    ended = lifetime(spark).executionsEnded()
    df = load(spark, t)
    assert df.count() == 10
    settled(spark, ended)
    [first] = spark_pins(t)
    sleep_past(first.expires_ms)
    assert not spark_pins(t)  # lapsed; nothing collected meanwhile

    ended = lifetime(spark).executionsEnded()
    renewals = spark._jvm.io.mvtable.spark.NativeScanRule.pinRenewals()
    assert sorted(r.id for r in df.collect()) == list(range(1000, 1010))
    assert spark._jvm.io.mvtable.spark.NativeScanRule.pinRenewals() == renewals + 1
    settled(spark, ended)
    [again] = spark_pins(t)  # pinned again, and cut again once the query ended
    assert again.id != first.id and again.version == 3
    assert again.expires_ms <= time.time() * 1000 + IDLE_S * 1000 + 50


def test_a_query_on_a_freshly_cut_pin_runs_under_it_with_no_python_call(spark, replaced):
    """A cut pin with most of pinIdleTtl left still holds the version: a short query runs under
    it, and neither waits for a renewal nor has one made beside it (a longer one is renewed by
    the JVM's timer: the next test)."""
    t = replaced
    ended = lifetime(spark).executionsEnded()
    df = spark.read.format("mvtable").options(pinIdleTtl="120s").load(t.uri)
    assert df.count() == 10
    settled(spark, ended)
    [cut] = spark_pins(t)
    assert cut.expires_ms <= time.time() * 1000 + 120_000 + 50

    ended = lifetime(spark).executionsEnded()
    renewals = spark._jvm.io.mvtable.spark.NativeScanRule.pinRenewals()
    assert sorted(r.id for r in df.collect()) == list(range(1000, 1010))
    settled(spark, ended)
    # the cut pin, still good, stays cut: no renewal, and no cut after the query
    assert spark._jvm.io.mvtable.spark.NativeScanRule.pinRenewals() == renewals
    [still] = spark_pins(t)
    assert still.id == cut.id and still.expires_ms == cut.expires_ms


def test_a_running_query_keeps_the_full_pin_while_another_of_the_same_dataframe_ends(spark, replaced, tmp_path):
    """Two queries of one DataFrame: the short one ending does not cut the pin the long one reads under."""
    from pyspark.sql.functions import col

    t = replaced
    wait_for_gate, gate, entered = gated_udf(tmp_path)
    df = load(spark, t)
    long_result: list = []
    long_query = threading.Thread(
        target=lambda: long_result.append(df.coalesce(1).select(wait_for_gate(col("id"))).collect()), daemon=True
    )
    long_query.start()
    deadline = time.time() + 60
    while not entered.exists():
        assert time.time() < deadline and long_query.is_alive(), "the long query never started reading"
        time.sleep(0.05)
    [held] = spark_pins(t)
    assert held.expires_ms > time.time() * 1000 + 600_000  # renewed to pinTtl for the running query

    ended = lifetime(spark).executionsEnded()
    short_result: list = []
    short_query = threading.Thread(target=lambda: short_result.append(df.count()), daemon=True)
    short_query.start()
    short_query.join(60)
    assert short_result == [10]
    settled(spark, ended)
    [still] = spark_pins(t)
    assert still.id == held.id and still.expires_ms >= held.expires_ms  # not cut under the running query
    assert not long_result

    rule = spark._jvm.io.mvtable.spark.NativeScanRule
    renewals = rule.pinRenewals()
    with spark_conf(spark, {"spark.mvtable.pinRenewIntervalMs": "300"}):  # default: half of pinTtl
        deadline = time.time() + 30
        while rule.pinRenewals() < renewals + 2:  # renewed while it runs, by the JVM's timer
            assert time.time() < deadline and not long_result, "the running query's pin was not renewed"
            time.sleep(0.1)
    [renewed] = spark_pins(t)
    assert renewed.id == held.id and renewed.expires_ms > still.expires_ms

    ended = lifetime(spark).executionsEnded()
    gate.touch()
    long_query.join(60)
    assert [r[0] for r in long_result[0]] and len(long_result[0]) == 10
    settled(spark, ended)
    [cut] = spark_pins(t)  # the last one ended: cut
    assert cut.id == held.id and cut.expires_ms <= time.time() * 1000 + IDLE_S * 1000 + 50


def test_a_query_that_outlives_half_the_cut_pin_is_renewed_by_the_timer(spark, replaced, tmp_path):
    """A query that starts on a fresh cut pin runs under it; if it is still running when half of
    pinIdleTtl is used up, the JVM's timer renews the pin to pinTtl, and the query's end cuts it."""
    from pyspark.sql.functions import col

    t = replaced
    idle_s = 8
    wait_for_gate, gate, entered = gated_udf(tmp_path)
    df = spark.read.format("mvtable").options(pinIdleTtl=f"{idle_s}s").load(t.uri)
    [made] = spark_pins(t)
    rule = spark._jvm.io.mvtable.spark.NativeScanRule
    renewals, ended = rule.pinRenewals(), lifetime(spark).executionsEnded()
    result: list = []
    query = threading.Thread(target=lambda: result.append(df.coalesce(1).select(wait_for_gate(col("id"))).collect()), daemon=True)
    query.start()
    deadline = time.time() + 60
    while not entered.exists():
        assert time.time() < deadline and query.is_alive(), "the query never started reading"
        time.sleep(0.05)
    if time.time() * 1000 < made.expires_ms - idle_s * 500 - 500:  # still in the pin's first half
        assert rule.pinRenewals() == renewals  # the query started under the cut pin
    while rule.pinRenewals() == renewals:
        assert time.time() < deadline and not result, "the running query's pin was not renewed"
        time.sleep(0.1)
    [held] = spark_pins(t)
    assert held.id == made.id and held.expires_ms > time.time() * 1000 + 600_000  # pinTtl
    gate.touch()
    query.join(60)
    assert len(result[0]) == 10
    settled(spark, ended)
    [cut] = spark_pins(t)
    assert cut.id == made.id and cut.expires_ms <= time.time() * 1000 + idle_s * 1000 + 50


def test_an_action_run_from_a_plan_spark_made_before_is_renewed_from_its_start_event(spark, replaced):
    """A second ``collect()`` of one DataFrame reuses its optimized plan (no optimizer rule runs):
    the pin is renewed when Spark reports the query's start, and cut again after its end."""
    from pyspark.sql.functions import col, udf

    t = replaced

    @udf("long")
    def slow(x):
        import time as _time

        _time.sleep(0.2)
        return x

    df = load(spark, t).coalesce(1).select(slow(col("id")).alias("id"))
    ended = lifetime(spark).executionsEnded()
    assert len(df.collect()) == 10
    settled(spark, ended)
    [first] = spark_pins(t)
    sleep_past(first.expires_ms)
    assert not spark_pins(t)

    rule = spark._jvm.io.mvtable.spark.NativeScanRule
    renewals, woken, ended = rule.pinRenewals(), lifetime(spark).startRenewals(), lifetime(spark).executionsEnded()
    assert sorted(r.id for r in df.collect()) == list(range(1000, 1010))
    settled(spark, ended)
    assert rule.pinRenewals() == renewals + 1 and lifetime(spark).startRenewals() == woken + 1
    [again] = spark_pins(t)
    assert again.id != first.id and again.version == 3
    assert again.expires_ms <= time.time() * 1000 + IDLE_S * 1000 + 50


def test_a_using_view_stays_on_its_version_between_queries(spark, replaced):
    """A ``USING mvtable`` view holds its version as a DataFrame does: full pin while queried,
    ``pinIdleTtl`` between queries, pinned again (same version) by its next query."""
    t = replaced
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW pin_lifetime_v USING mvtable OPTIONS (path '{t.uri}', pinIdleTtl '{IDLE_S}s')")
    try:
        [made] = spark_pins(t)
        assert made.expires_ms <= time.time() * 1000 + IDLE_S * 1000 + 50  # no query yet: idle from the start
        t.append(orders(5000, 5))  # version 4
        sleep_past(made.expires_ms)
        ended = lifetime(spark).executionsEnded()
        assert spark.sql("SELECT count(*) FROM pin_lifetime_v").first()[0] == 10  # still version 3
        settled(spark, ended)
        [pin] = spark_pins(t)
        assert pin.version == 3 and pin.expires_ms <= time.time() * 1000 + IDLE_S * 1000 + 50
    finally:
        spark.sql("DROP VIEW IF EXISTS pin_lifetime_v")


def test_pin_idle_ttl_is_a_checked_read_option():
    assert read_options({"path": "p"}).pin_idle_ttl_s == 300  # defaults.toml: 5m
    assert read_options({"path": "p", "pinidlettl": "2s"}).pin_idle_ttl_s == 2
    for bad in ("0s", "soon"):
        with pytest.raises(Exception, match="pinIdleTtl"):
            read_options({"path": "p", "pinIdleTtl": bad})
