"""mvtable through Spark Connect (a local Connect server, as ``remote("local[2]")`` starts): writes,
appends, a consistent push, time travel, ``register()`` with the SQL procedures, and
deletes planned by Spark — all from a Connect client, with the data source's Python code
running where the Connect server runs."""

from __future__ import annotations

from mvtable.connector import Table


def test_the_whole_surface_through_spark_connect(spark_connect, tmp_path):
    path = str(tmp_path / "t")
    _, result = spark_connect.run(
        f"""
        from mvtable.connector import delete, register
        path = {path!r}
        register(spark)
        spark.range(0, 100).selectExpr("id", "id % 7 AS store").write.format("mvtable").mode("append").save(path)
        spark.range(100, 150).selectExpr("id", "id % 7 AS store").write.format("mvtable").mode("append").save(path)
        (spark.range(1000, 1040).selectExpr("id", "id % 7 AS store")
            .write.format("mvtable").mode("overwrite").option("consistentPush", "true").save(path))
        counts = [spark.read.format("mvtable").option("versionAsOf", v).load(path).count() for v in (0, 1)]
        pushed = spark.read.format("mvtable").load(path).count()
        [entry] = spark.sql(f"SELECT * FROM mvtable_lineage('{{path}}')").collect()
        history = [r.operation for r in spark.sql(f"SELECT * FROM mvtable_history('{{path}}')").collect()]
        [rolled] = spark.sql(f"SELECT * FROM mvtable_rollback(table => '{{path}}', entry => '{{entry.id}}')").collect()
        after_rollback = spark.read.format("mvtable").load(path).count()
        deleted = delete(spark, path, "id % 2 = 0")  # Spark finds the rows, one commit deletes them
        rows = spark.read.format("mvtable").option("withRowAddress", "true").load(path)
        rows.where("id >= 140").select("_mv_segment", "_mv_row").write.format("mvtable").option(
            "operation", "delete").mode("append").save(path)
        left = sorted(r.id for r in spark.read.format("mvtable").load(path).collect())
        emit(dict(counts=counts, pushed=pushed, entry_state=entry.state, history=history, rolled=rolled.changed,
                  after_rollback=after_rollback, deleted=deleted, left=left))
        """
    )
    (r,) = result
    assert r["counts"] == [100, 150] and r["pushed"] == 40
    assert r["entry_state"] == "COMPLETED" and r["rolled"] is True and r["after_rollback"] == 150
    assert r["history"][:3] == ["CREATE", "APPEND", "PUSH_START"] and "CONSISTENT_PUSH" in r["history"]
    assert r["deleted"] == 75
    assert r["left"] == [i for i in range(150) if i % 2 and i < 140]
    assert sorted(Table.open(path).to_arrow().column("id").to_pylist()) == r["left"]  # the same table, seen without Spark
