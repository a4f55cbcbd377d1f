"""The post-commit pipeline behind Spark's commits: the data source writer's commit, its
upsert and its delete run in Spark's Python workers, and each runs the table's steps."""

from __future__ import annotations

import pytest

from mvtable.connector import Table, delete

from .test_post_commit import exported_version, operations

pytestmark = pytest.mark.spark


def test_spark_commits_export_and_auto_compact_through_the_pipeline(spark, tmp_path):
    path = str(tmp_path / "t")

    def rows(start: int, end: int, tag: str):
        return spark.range(start, end, numPartitions=1).selectExpr("id", f"concat('{tag}', id) AS name")

    (
        rows(0, 30, "v1-")
        .write.format("mvtable")
        .mode("append")
        .option("primaryKey", "id")
        .option("property.icebergCompat", "true")
        .option("property.autoCompact", "true")
        .option("property.compactMinInputFiles", "3")
        .option("property.rowGroupRows", "50")
        .save(path)
    )
    assert exported_version(path) == 0
    rows(30, 60, "v1-").write.format("mvtable").mode("append").save(path)
    assert operations(Table.open(path)) == ["CREATE", "APPEND"] and exported_version(path) == 1
    # the upsert adds the third small segment: compacted right after, and both exported
    rows(50, 70, "v2-").write.format("mvtable").mode("append").option("operation", "upsert").save(path)
    t = Table.open(path)
    assert operations(t)[-2:] == ["UPSERT", "COMPACT"] and exported_version(path) == t.version
    assert len(t.snapshot().visible_segment_ids()) == 1
    assert delete(spark, path, "id < 5") == 5
    t = Table.open(path)
    assert operations(t)[-1] == "DELETE" and exported_version(path) == t.version
    assert sorted(t.to_arrow()["id"].to_pylist()) == list(range(5, 70))
