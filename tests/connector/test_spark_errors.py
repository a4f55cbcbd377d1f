"""mvtable's typed errors across Spark: the error class in the message, and
``mvtable.errors.from_spark`` turning Spark's exception back into the typed error, in local
mode and under Spark Connect."""

from __future__ import annotations

import pytest

from mvtable.connector import Table, register
from mvtable.errors import (
    InvalidLineageTransitionError,
    SchemaMismatchError,
    TableNotFoundError,
    VersionNotFoundError,
    from_spark,
)

pytestmark = pytest.mark.spark


def spark_error(action):
    with pytest.raises(Exception) as info:
        action()
    return info.value


@pytest.mark.usefixtures("read_route")
def test_errors_of_reads_writes_and_procedures_come_back_typed(spark, tmp_path):
    path = str(tmp_path / "t")
    spark.range(0, 5).write.format("mvtable").mode("append").save(path)
    register(spark)

    read = spark_error(lambda: spark.read.format("mvtable").option("versionAsOf", 99).load(path).count())
    err = from_spark(read)
    assert type(err) is VersionNotFoundError
    assert str(err) == "[MVTABLE_VERSION_NOT_FOUND] version 99 does not exist; the table's versions end at 0"
    assert err.spark_exception is read and "Traceback" in str(read)  # the traceback stays available
    assert "\tat org.apache" not in str(read)  # no Java stack for a refusal mvtable made

    write = spark_error(lambda: spark.range(3).selectExpr("'x' AS id").write.format("mvtable").mode("append").save(path))
    assert isinstance(from_spark(write), SchemaMismatchError)

    missing = spark_error(lambda: spark.read.format("mvtable").load(str(tmp_path / "nope")).count())
    assert isinstance(from_spark(missing), TableNotFoundError)

    udtf = spark_error(lambda: spark.sql(f"SELECT * FROM mvtable_rollback(table => '{path}', entry => 'nope')").collect())
    err = from_spark(udtf)
    assert type(err) is InvalidLineageTransitionError and "no lineage entry 'nope'" in str(err)
    assert Table.open(path).version == 0


def test_errors_come_back_typed_under_spark_connect(spark_connect, tmp_path):
    path = str(tmp_path / "t")
    _, result = spark_connect.run(
        f"""
        import mvtable
        from mvtable.connector import register
        from mvtable.errors import from_spark
        path = {path!r}
        register(spark)
        spark.range(0, 5).write.format("mvtable").save(path)  # Spark's default save mode: creates the table
        seen = {{}}
        for what, action in {{
            "read": lambda: spark.read.format("mvtable").option("versionAsOf", 99).load(path).count(),
            "exists": lambda: spark.range(3).write.format("mvtable").save(path),
            "partition": lambda: spark.range(3).write.format("mvtable").partitionBy("id").option("partitionBy", "bucket(2, id)")
            .save(path + "-p"),
            "udtf": lambda: spark.sql(f"SELECT * FROM mvtable_rollback(table => '{{path}}', entry => 'nope')").collect(),
        }}.items():
            try:
                action()
                seen[what] = None
            except Exception as exc:
                err = from_spark(exc)
                seen[what] = [type(exc).__module__, type(err).__name__ if err else None, str(err), len(str(exc))]
        spark.range(3).write.format("mvtable").partitionBy("id").save(path + "-q")  # Spark's partitionBy, through Connect
        seen["partitioned"] = mvtable.connector.Table.open(path + "-q").snapshot().default_spec.fields[0].name
        emit(seen)
        """
    )
    (seen,) = result
    assert seen["read"][0].startswith("pyspark.errors.exceptions.connect")
    assert seen["read"][1:3] == [
        "VersionNotFoundError",
        "[MVTABLE_VERSION_NOT_FOUND] version 99 does not exist; the table's versions end at 0",
    ]
    assert seen["exists"][1] == "TableAlreadyExistsError" and "(version 0)" in seen["exists"][2]
    assert seen["partition"][1] == "InvalidOptionError" and "differ" in seen["partition"][2]
    assert seen["partitioned"] == "id"
    assert seen["udtf"][1] == "InvalidLineageTransitionError"
    assert Table.open(path).to_arrow().num_rows == 5
