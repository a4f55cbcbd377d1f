"""``register(spark)`` registers only what the session is missing: over a data source that
Spark discovered (``pyspark_mvtable``), it registers nothing and Spark logs no warning about
replacing one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.spark_scripts import run_spark_script

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]  # holds pyspark_mvtable.py, which Spark's discovery imports


def test_register_after_discovery_is_quiet(tmp_path):
    path = str(tmp_path / "t")
    done = run_spark_script(
        f"""
        from mvtable.connector import delete, register
        from mvtable.connector.spark import source_known
        emit(source_known(spark))  # discovered: the repository is on the workers' path
        register(spark)
        register(spark)
        spark.range(10).write.format("mvtable").mode("append").save({path!r})
        delete(spark, {path!r}, "id < 3")  # registers what it needs, again only if missing
        rows = spark.sql("SELECT * FROM mvtable_history('{path}')").collect()
        emit([r.operation for r in rows])
        """,
        pythonpath=[REPO],
    )
    assert done.result == [True, ["CREATE", "DELETE"]]
    assert "replaced a statically registered data source" not in done.stderr
    assert "replaced a previously registered" not in done.stderr
