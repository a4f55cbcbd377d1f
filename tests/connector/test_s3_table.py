"""The Table API and the Spark source on real S3 servers on 127.0.0.1 (SeaweedFS, moto)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table

pytestmark = pytest.mark.s3


@pytest.fixture(params=["seaweedfs", "moto"])
def s3(request):
    return request.getfixturevalue(f"{request.param}_s3")


def rows(start: int, n: int) -> pa.Table:
    return pa.table(
        {"id": pa.array(range(start, start + n), pa.int64()), "s": pa.array([f"r{i}" for i in range(start, start + n)])}
    )


def test_table_lifecycle_on_s3(s3):
    uri = s3.url("tables/t")
    opts = s3.storage_options()
    t = Table.create(
        uri, schema=rows(0, 1).schema, storage_options=opts, properties={"rowGroupRows": "50", "dvInlineMaxBytes": "0"}
    )
    t.append(rows(0, 200))
    t.append(rows(200, 100))
    assert t.delete(pc.field("id") < 20).deleted_rows == 20  # a DV file on S3 (nothing inlined)
    assert any(ref.path for ref in t.snapshot().dvs.values())
    t.overwrite(rows(1000, 10), consistent_push=True)
    again = Table.open(uri, storage_options=opts)
    assert sorted(again.to_arrow().column("id").to_pylist()) == list(range(1000, 1010))
    assert again.scan(version=3).count() == 280
    entry = again.lineage()[-1].id
    assert again.rollback(entry=entry).changed
    assert again.scan().count() == 280
    report = again.vacuum(dry_run=True)
    assert report.dry_run
    assert again.collect_garbage().complete


@pytest.mark.spark
def test_spark_reads_and_writes_s3(spark, seaweedfs_s3):
    s3 = seaweedfs_s3
    uri = s3.url("spark/t")
    storage = {f"storage.{k}": (json.dumps(v) if isinstance(v, dict) else v) for k, v in s3.storage_options().items()}
    spark.range(0, 500, numPartitions=2).selectExpr("id", "cast(id AS string) AS s").write.format("mvtable").options(
        **storage
    ).mode("append").save(uri)
    (
        spark.range(500, 510)
        .selectExpr("id", "cast(id AS string) AS s")
        .write.format("mvtable")
        .options(**storage)
        .mode("overwrite")
        .option("consistentPush", "true")
        .save(uri)
    )
    df = spark.read.format("mvtable").options(**storage).load(uri)
    assert sorted(r.id for r in df.collect()) == list(range(500, 510))
    assert spark.read.format("mvtable").options(**storage).option("versionAsOf", 0).load(uri).count() == 500
    t = Table.open(uri, storage_options=s3.storage_options())
    assert [e.state for e in t.lineage()] == ["COMPLETED"]
