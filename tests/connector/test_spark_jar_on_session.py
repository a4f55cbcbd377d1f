"""mvtable's jar on the session from the start (``spark.jars`` when the session is built, as
``spark-submit --jars "$(mvtable spark-jar)"`` does), in a classic driver and on a Spark
Connect server: Spark then refuses to register the Python source under the name the jar's
``mvtable.DefaultSource`` holds (DATA_SOURCE_ALREADY_EXISTS), ``mvtable.register(spark)``
registers it anyway, and ``format("mvtable")`` and ``USING mvtable`` read on Spark's Parquet
scan. A Connect server without the jar serves the same rows through the Python source."""

from __future__ import annotations

import pytest

from mvtable.connector.spark import native_jvm
from tests.support.spark_scripts import run_spark_script

pytestmark = pytest.mark.spark

# Two appends of 1000 rows, the cancelled rows (every tenth) of the first deleted: the scan
# applies a deletion vector. Then a read through format("mvtable") and a USING mvtable view.
READS = """
import mvtable
from mvtable.connector.spark.source import MvTableDataSource

path = {path!r}
try:
    spark.dataSource.register(MvTableDataSource)  # Spark's own call: the jar's class has the name
    refused = None
except Exception as exc:
    refused = str(exc)
mvtable.register(spark)
for start in (0, 1000):
    rows = spark.range(start, start + 1000, numPartitions=1).selectExpr("id", "if(id % 10 = 0, 'cancelled', 'ok') AS status")
    rows.write.format("mvtable").mode("append").save(path)
deleted = mvtable.delete(spark, path, "status = 'cancelled' AND id < 1000")
df = spark.read.format("mvtable").load(path)
spark.sql(f"CREATE TEMPORARY VIEW jar_v USING mvtable OPTIONS (path '{{path}}')")
view = spark.sql("SELECT id, status FROM jar_v WHERE id >= 900")
emit(dict(
    refused=refused,
    deleted=deleted,
    plan={explain_df},
    view_plan={explain_view},
    ids=sorted(r.id for r in df.collect()),
    view_ids=sorted(r.id for r in view.collect()),
))
"""

VISIBLE = [i for i in range(2000) if i >= 1000 or i % 10]


def reads(path: str, *, explain_df: str, explain_view: str) -> str:
    return READS.format(path=path, explain_df=explain_df, explain_view=explain_view)


def assert_native(plan: str) -> None:
    assert "FileScan mvtable-parquet" in plan and "_mv_deleted" in plan and "(Python)" not in plan, plan


def assert_rows(got: dict) -> None:
    assert got["deleted"] == 100
    assert got["ids"] == VISIBLE and got["view_ids"] == [i for i in VISIBLE if i >= 900]


def test_a_classic_session_built_with_the_jar_reads_natively(tmp_path):
    done = run_spark_script(
        reads(
            str(tmp_path / "t"),
            explain_df="df._jdf.queryExecution().executedPlan().toString()",
            explain_view="view._jdf.queryExecution().executedPlan().toString()",
        ),
        conf={"spark.jars": str(native_jvm.spark_jar())},
    )
    [got] = done.result
    assert "DATA_SOURCE_ALREADY_EXISTS" in got["refused"]
    assert_rows(got)
    assert_native(got["plan"])
    assert_native(got["view_plan"])


@pytest.mark.parametrize("jar", [True, False], ids=["jar-on-server", "no-jar"])
def test_spark_connect_reads_natively_with_the_jar_on_the_server(spark_connect, tmp_path, jar):
    """The client has no JVM to add the jar to: with the jar in the server's ``spark.jars``
    the reads run on its Parquet scan; without it, the Python source serves the same rows."""
    _, [got] = spark_connect.run(
        reads(
            str(tmp_path / "t"),
            explain_df="df._explain_string()",
            explain_view="spark.sql('EXPLAIN SELECT id, status FROM jar_v WHERE id >= 900').first()[0]",
        ),
        conf={"spark.jars": str(native_jvm.spark_jar())} if jar else None,
    )
    assert_rows(got)
    if jar:
        assert "DATA_SOURCE_ALREADY_EXISTS" in got["refused"]
        assert_native(got["plan"])
        assert_native(got["view_plan"])
    else:
        assert got["refused"] is None
        for plan in (got["plan"], got["view_plan"]):
            assert "BatchScan mvtable" in plan and "(Python)" in plan and "FileScan" not in plan, plan
