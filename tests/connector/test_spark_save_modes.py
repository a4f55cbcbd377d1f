"""Spark's default save mode (ErrorIfExists), Ignore and ``partitionBy`` with
``format("mvtable")``: what Spark 4.3 hands a Python source of them (nothing), and what
mvtable makes of them in the driver's DataFrameWriter (``mvtable.spark_save``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable import spark_save
from mvtable.connector import Table, writes
from mvtable.errors import InvalidOptionError, TableAlreadyExistsError, from_spark

pytestmark = pytest.mark.spark


def test_what_spark_hands_a_python_source_of_the_save_mode(spark, tmp_path):
    """The measurement behind ``mvtable.spark_save``: for ErrorIfExists (the default) and Ignore,
    and for partitionBy, Spark 4.3 fails in the JVM before any method of a Python source runs,
    so the source cannot see them. Only append and overwrite reach ``writer(schema, overwrite)``."""
    from pyspark.errors import AnalysisException, IllegalArgumentException
    from pyspark.sql.datasource import DataSource, DataSourceWriter, WriterCommitMessage

    calls = tmp_path / "calls.log"
    calls.write_text("")

    class Recorder(DataSource):  # another format: mvtable.spark_save leaves it alone
        @classmethod
        def name(cls):
            return "mvtable_probe_recorder"

        def __init__(self, options):
            super().__init__(options)
            with open(calls, "a") as f:
                f.write("init\n")

        def writer(self, schema, overwrite):
            with open(calls, "a") as f:
                f.write(f"writer overwrite={overwrite}\n")

            class Drain(DataSourceWriter):
                def write(self, iterator):
                    for _ in iterator:
                        pass
                    return WriterCommitMessage()

            return Drain()

    spark.dataSource.register(Recorder)
    df = spark.range(3)
    target = str(tmp_path / "x")
    for mode in (None, "errorifexists", "ignore"):
        with pytest.raises(AnalysisException, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            df.write.format("mvtable_probe_recorder").mode(mode).save(target)
    with pytest.raises(IllegalArgumentException, match="do not match the existing table's"):
        df.write.format("mvtable_probe_recorder").mode("append").partitionBy("id").save(target)
    assert calls.read_text() == ""  # nothing of the source ran
    df.write.format("mvtable_probe_recorder").mode("append").save(target)
    df.write.format("mvtable_probe_recorder").mode("overwrite").save(target)
    assert calls.read_text().splitlines() == ["init", "writer overwrite=False", "init", "writer overwrite=True"]


def test_the_default_save_mode_creates_a_table_and_refuses_an_existing_one(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.range(0, 10).selectExpr("id", "id * 2 AS v").write.format("mvtable").save(path)  # Spark's defaults
    t = Table.open(path)
    assert t.version == 0 and t.to_arrow().num_rows == 10 and [h.operation for h in t.history()] == ["CREATE"]
    with pytest.raises(Exception) as info:
        spark.range(10, 20).selectExpr("id", "id * 2 AS v").write.format("MVTABLE").mode("errorifexists").save(path)
    err = from_spark(info.value)
    assert isinstance(err, TableAlreadyExistsError)
    assert str(err).startswith(f"[MVTABLE_TABLE_ALREADY_EXISTS] a table exists at {path} (version 0)")
    assert ".mode('append')" in str(err) and ".mode('overwrite')" in str(err)
    assert Table.open(path).version == 0  # nothing written
    spark.range(10, 20).selectExpr("id", "id * 2 AS v").write.format("mvtable").mode("append").save(path)
    assert Table.open(path).to_arrow().num_rows == 20  # the other modes are Spark's own, untouched


def test_ignore_writes_nothing_into_an_existing_table(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.range(5).write.format("mvtable").mode("ignore").save(path)  # none there: created
    assert Table.open(path).to_arrow().num_rows == 5
    files = sorted(p.name for p in (tmp_path / "t").rglob("*"))
    spark.range(100).write.save(path, format="mvtable", mode="ignore")  # the same through save()'s arguments
    t = Table.open(path)
    assert t.version == 0 and t.to_arrow().num_rows == 5
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == files  # no segment, no pin left behind


def test_operations_on_an_existing_table_ignore_the_default_mode(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.range(10).write.format("mvtable").save(path)
    rows = spark.read.format("mvtable").option("withRowAddress", "true").load(path).where("id < 3")
    rows.select("_mv_segment", "_mv_row").write.format("mvtable").option("operation", "delete").save(path)
    assert sorted(Table.open(path).to_arrow().column("id").to_pylist()) == list(range(3, 10))


def test_spark_partition_by_makes_identity_fields(spark, tmp_path):
    """``df.write.partitionBy(...)`` is the ``partitionBy`` option of plain columns: identity
    fields of the table it creates, and on an existing table only its own spec."""
    df = spark.range(10).selectExpr("id", "id % 2 AS day", "cast(id % 3 AS string) AS region")
    path = str(tmp_path / "t")
    df.write.format("mvtable").partitionBy("day", "region").save(path)  # Spark's default mode: creates it
    t = Table.open(path)
    assert [(f.name, f.transform) for f in t.snapshot().default_spec.fields] == [("day", "identity"), ("region", "identity")]
    assert {seg.file.partition for seg in t.snapshot().visible_segments()} == {(d, str(r)) for d in (0, 1) for r in range(3)}
    df.write.format("mvtable").mode("append").partitionBy(["DAY", "region"]).save(path)  # the same spec, as Spark folds names
    df.write.save(path, format="mvtable", mode="append", partitionBy=["day", "region"])
    assert Table.open(path).to_arrow().num_rows == 30
    with pytest.raises(Exception) as info:
        df.write.format("mvtable").mode("append").partitionBy("day").save(path)
    err = from_spark(info.value)
    assert isinstance(err, InvalidOptionError) and "update_partitioning" in str(err)
    # given both ways they must agree
    other = str(tmp_path / "o")
    df.write.format("mvtable").mode("append").partitionBy("Day").option("partitionBy", "day").save(other)
    assert [f.name for f in Table.open(other).snapshot().default_spec.fields] == ["day"]
    never = str(tmp_path / "never")
    with pytest.raises(Exception) as info:
        df.write.format("mvtable").mode("append").partitionBy("day").option("partitionBy", "bucket(2, id)").save(never)
    err = from_spark(info.value)
    assert isinstance(err, InvalidOptionError) and "differ" in str(err) and "'day'" in str(err)
    assert not os.path.exists(never)
    # other formats keep Spark's own partitionBy
    df.write.partitionBy("day").parquet(str(tmp_path / "parquet"))
    assert sorted(p.name for p in (tmp_path / "parquet").iterdir() if p.name.startswith("day=")) == ["day=0", "day=1"]


def test_a_table_created_meanwhile_is_refused_at_commit(tmp_path):
    """ErrorIfExists is decided by the commit that creates the table, not only by the check
    when the write is planned: a table another writer created in between is not appended to."""
    path = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    plan = writes.begin_write(path, storage_options=None, incoming=rows.schema, mode=writes.APPEND)
    from dataclasses import replace

    plan = replace(plan, create_only=True)
    segments = writes.write_data(plan, rows.to_batches())
    Table.create(path, schema=rows.schema).append(rows)  # someone else creates it first
    with pytest.raises(TableAlreadyExistsError, match="Spark's default save mode ErrorIfExists"):
        writes.finish_write(plan, segments)
    assert Table.open(path).to_arrow().num_rows == 2 and Table.open(path).version == 1


def test_import_mvtable_wraps_writers_loaded_before_and_after_it():
    script = """
import sys
from pathlib import Path
import pyspark.sql.readwriter as classic
import mvtable
import mvtable
from mvtable import spark_save
assert spark_save.installed(classic.DataFrameWriter)
assert "pyspark.sql.connect.readwriter" not in sys.modules
import pyspark.sql.connect.readwriter as connect  # loaded after mvtable: wrapped when it loads
assert spark_save.installed(connect.DataFrameWriter)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
    assert spark_save.installed(__import__("pyspark.sql.readwriter", fromlist=["x"]).DataFrameWriter)


def readme_block(heading: str, index: int = 0) -> str:
    """The ``index``-th Python code block of the README section ``heading``."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n")[index + 1].split("```", 1)[0]


def test_the_readmes_first_spark_example_runs_as_written(spark, tmp_path):
    code = readme_block("## From Spark")
    assert 'df.write.format("mvtable").save("/data/t")' in code  # Spark's default save mode
    path = str(tmp_path / "t")
    namespace: dict = {}
    exec(compile(code.replace('"/data/t"', repr(path)), "README.md", "exec"), namespace)
    t = Table.open(path)
    spark.catalog.dropTempView("t")
    assert [h.operation for h in t.history()] == ["CREATE", "APPEND", "PUSH_START", "CONSISTENT_PUSH", "DELETE"]
    assert sorted(t.to_arrow().column("id").to_pylist()) == [i for i in range(100) if i % 7 != 3]


def test_save_as_table_is_refused_before_spark_runs(spark, tmp_path):
    from mvtable.errors import CatalogTableNotSupportedError

    with pytest.raises(CatalogTableNotSupportedError, match=r"^\[MVTABLE_CATALOG_TABLE_NOT_SUPPORTED\] saveAsTable\('t1'\)"):
        spark.range(3).write.format("mvtable").saveAsTable("t1")
    with pytest.raises(CatalogTableNotSupportedError, match="create_view"):
        spark.range(3).write.saveAsTable("t1", format="mvtable", mode="append")
    assert not spark.catalog.tableExists("t1")
