"""The one in-process ``local[2]`` SparkSession: started once per pytest run (the ``spark``
fixture) or once per benchmark run, stopped with its py4j gateway JVM.

Only one SparkContext can live in a Python process, and this one stays up, so anything
that needs another driver (a cluster, another static conf, a fresh Python path) runs a
script in a subprocess (``spark_scripts``).  Tests share the session: a test that changes
a runtime conf uses :func:`spark_conf`, which restores it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from .spark_jvm import cds_archive, shadow_spark_home, spark_conf_for_tests, spark_env

# (temporary archive the running session's JVM writes at exit, final archive path)
_CDS_PENDING: tuple[Path, Path] | None = None


def _claim_cds_dump() -> Path | None:
    """Where this process's JVM should write the class-data archive at exit, if nobody has
    written it yet; stale temporary archives of killed runs are removed on the way."""
    global _CDS_PENDING
    archive = cds_archive()
    if archive is None or archive.is_file() or _CDS_PENDING is not None:
        return None
    for stale in archive.parent.glob(f"{archive.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > 3600:
                stale.unlink()
    dump_to = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    _CDS_PENDING = (dump_to, archive)
    return dump_to


def _publish_cds_archive(jvm_exit_code: int | None) -> None:
    global _CDS_PENDING
    if _CDS_PENDING is None:
        return
    tmp, archive = _CDS_PENDING
    _CDS_PENDING = None
    if jvm_exit_code == 0 and tmp.is_file() and tmp.stat().st_size > 0:
        os.replace(tmp, archive)  # atomic: a concurrent JVM maps either no file or a whole one
    else:
        with contextlib.suppress(OSError):
            tmp.unlink()


def start_local_spark(
    base_dir: Path,
    *,
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
    app_name: str = "mvtable-tests",
    quick_jit: bool = True,
) -> Any:
    """Start (or get) this process's SparkSession (nothing registered).  Sets the
    Spark environment variables in ``os.environ`` because the JVM inherits them.
    ``quick_jit=False`` keeps the JVM's default tiered JIT (for measurements)."""
    from pyspark.sql import SparkSession

    base_dir = Path(base_dir)
    base_dir.mkdir(parents=True, exist_ok=True)
    env = spark_env(shadow_spark_home())
    for key in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP", "SPARK_LOCAL_HOSTNAME", "SPARK_HOME"):
        os.environ[key] = env[key]
    for key in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR"):
        os.environ.pop(key, None)
    full = {**spark_conf_for_tests(base_dir, cds_dump_to=_claim_cds_dump(), quick_jit=quick_jit), **(conf or {})}
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in full.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def register_data_source(spark: Any) -> None:
    """Register the ``mvtable`` data source and add mvtable's jar, as ``mvtable.register``
    does (so batch reads take Spark's Parquet scan), but no SQL procedures, and Spark's filter
    pushdown left at its default (tests that want them call ``mvtable.register``)."""
    from mvtable.connector.spark import attach_native_scan
    from mvtable.connector.spark.source import MvTableDataSource

    spark.dataSource.register(MvTableDataSource)
    attach_native_scan(spark)


def stop_spark(spark: Any) -> None:
    """Stop the session and its py4j gateway JVM (``SparkSession.stop`` keeps the JVM),
    then publish the class-data archive if this JVM was the one writing it."""
    from pyspark import SparkContext

    try:
        spark.stop()
    finally:
        gateway = SparkContext._gateway
        if gateway is not None:
            with contextlib.suppress(Exception):
                gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
                # Writing the class-data archive at exit takes a while (once per machine).
                with contextlib.suppress(Exception):
                    proc.wait(timeout=180 if _CDS_PENDING is not None else 30)
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                _publish_cds_archive(proc.returncode)
            SparkContext._gateway = None
            SparkContext._jvm = None


PYTHON_ROUTE = {"spark.mvtable.nativeScan": "false"}
"""``spark_conf(spark, PYTHON_ROUTE)``: DataFrames made in the block read through the Python
source, not Spark's Parquet scan (tests of the Python reader's own planning and pushdown)."""


def plan_of(df: Any) -> str:
    """The executed physical plan of a classic DataFrame, as Spark prints it."""
    return str(df._jdf.queryExecution().executedPlan().toString())


def assert_route(df: Any, route: str) -> None:
    """``df`` reads on the route named (``"native"``: Spark's Parquet file scan; ``"python"``:
    the Python source's batch scan), as the ``read_route`` fixture set it."""
    plan = plan_of(df)
    if route == "native":
        assert "FileScan" in plan and "(Python)" not in plan, plan
    else:
        assert "BatchScan mvtable" in plan and "(Python)" in plan and "FileScan" not in plan, plan


@contextlib.contextmanager
def spark_conf(spark: Any, conf: Mapping[str, Any]) -> Iterator[None]:
    """Set runtime SQL confs for the duration of a ``with`` block, then restore them
    (unset the ones that were unset).  The session is shared: tests that change a conf
    must use this."""
    saved: dict[str, str | None] = {}
    for key, value in conf.items():
        saved[key] = spark.conf.get(key, None)
        spark.conf.set(key, value if isinstance(value, str) else json.dumps(value))
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def pickle_by_value(module_name: str) -> None:
    """Make classes defined in ``module_name`` (a test module) travel to Python workers by
    value: workers cannot import pytest's test modules, so a DataSource defined in one
    fails with ``ModuleNotFoundError`` unless its module is registered here."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])
