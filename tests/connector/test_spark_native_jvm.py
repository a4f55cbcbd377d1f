"""``native_jvm``: the JVM class that marks deleted rows inside Spark's Parquet batches —
built once per machine, added to the running session, and reading the same rows as the
data source whatever reader path, vector kind, split or deletion-vector storage Spark uses."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.spark import native_jvm, read_native
from mvtable.connector.spark.native_mask import _MASKS
from mvtable.errors import JvmMaskUnavailableError, SchemaMismatchError
from tests.support.spark_session import spark_conf

from .conftest import orders


def rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def arrow_rows(table: pa.Table) -> list[tuple]:
    return sorted(zip(*[c.to_pylist() for c in table.columns]))


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@pytest.fixture
def table(tmp_path) -> Table:
    """Four segments of 2000 rows (row groups of 300): deletion vectors inline in the log
    (segment 0), in a DV file (segments 1 and 2: many scattered deletes), none (segment 3)."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema, properties={"rowGroupRows": "300"})
    for start in (0, 2000, 4000, 6000):
        t.append(orders(start, 2000))
    t.delete((pc.field("id") < 2000) & (pc.field("status") == "cancelled"))
    segs = t.snapshot().visible_segments()
    t.delete_rows({seg.id: [p for p in range(2000) if (start + p) % 3 != 0] for seg, start in zip(segs[1:3], (2000, 4000))})
    snap = t.snapshot()
    kinds = [None if snap.dvs.get(s.id) is None else snap.dvs[s.id].inline is None for s in snap.visible_segments()]
    assert kinds == [False, True, True, None]  # inline, file, file, no deletes
    return t


# -- the jar -----------------------------------------------------------------------------------
# two processes that need the jar at once: one builds it, the other waits and takes it
_BUILD = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(message)s")
from mvtable.connector.spark import native_jvm
print(native_jvm.spark_jar())
"""


def test_the_jar_is_built_once_and_named_by_its_source_and_spark(tmp_path, monkeypatch):
    monkeypatch.setenv("MVTABLE_JVM_CACHE", str(tmp_path / "cache"))
    builders = [
        subprocess.Popen([sys.executable, "-c", _BUILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [b.communicate(timeout=300) for b in builders]
    assert [b.returncode for b in builders] == [0, 0], outputs
    assert sum(err.count("mvtable: built") for _, err in outputs) == 1, outputs  # one javac run
    jar = native_jvm.spark_jar()
    assert [out.strip() for out, _ in outputs] == [str(jar)] * 2
    assert jar.parent == tmp_path / "cache" and jar.suffix == ".jar"
    import zipfile

    names = zipfile.ZipFile(jar).namelist()
    assert "io/mvtable/spark/MaskedParquetFileFormat.class" in names
    built = jar.stat().st_mtime_ns
    assert native_jvm.spark_jar() == jar and jar.stat().st_mtime_ns == built  # cached, not rebuilt
    assert [p.name for p in jar.parent.iterdir()] == [jar.name]  # no build leftovers
    # another Spark (a jars folder with another version) gets its own jar
    other = tmp_path / "spark-other" / "jars"
    other.mkdir(parents=True)
    for f in native_jvm.spark_jars_dir().glob("*.jar"):
        target = other / (f.name.replace("spark-core_", "spark-core_x") if f.name.startswith("spark-core_") else f.name)
        target.symlink_to(f)
    assert native_jvm.spark_jar(jars=other) != jar


def test_the_cli_prints_the_jar_for_spark_submit(tmp_path, monkeypatch, capsys):
    from mvtable.connector.cli import main

    monkeypatch.setenv("MVTABLE_JVM_CACHE", str(tmp_path / "cache"))
    assert main(["spark-jar"]) == 0
    [jar] = (tmp_path / "cache").glob("mvtable-spark-*.jar")
    assert capsys.readouterr().out == f"{jar}\n"
    assert main(["spark-jar", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"jar": str(jar)}]
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("MVTABLE_JVM_CACHE", str(tmp_path / "empty"))
    assert main(["spark-jar"]) == 1
    assert "no javac" in capsys.readouterr().err


def test_without_javac_the_jar_cannot_be_built_and_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("MVTABLE_JVM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JvmMaskUnavailableError, match="no javac.*install a JDK"):
        native_jvm.spark_jar()


def test_a_dv_line_names_the_file_and_where_its_vector_is(table):
    snap = table.snapshot()
    inline_seg, file_seg = snap.visible_segments()[:2]
    line = native_jvm.dv_line("a.parquet", 2000, snap.dvs[inline_seg.id], root="s3a://b/t").split("\t")
    assert line[:4] == ["a.parquet", "2000", "200", "inline"] and len(line) == 5
    ref = snap.dvs[file_seg.id]
    line = native_jvm.dv_line("b.parquet", 2000, ref, root="s3a://b/t").split("\t")
    assert line == ["b.parquet", "2000", str(ref.cardinality), "file", f"s3a://b/t/{ref.path}", str(ref.offset), str(ref.size)]


# -- Spark ---------------------------------------------------------------------------------------
@pytest.mark.spark
def test_the_jvm_mask_reads_what_the_data_source_reads(spark, table):
    _MASKS.clear()
    df = read_native(spark, table.uri)
    plan = plan_of(df)
    assert "MvtableMaskedParquet" in plan and "FileScan parquet" in plan  # masked files + the plain one
    assert "element_at" not in plan and "BroadcastHashJoin" not in plan and not _MASKS
    got = rows(df)
    assert got == arrow_rows(table.to_arrow()) == rows(spark.read.format("mvtable").load(table.uri))
    assert len(got) == 1800 + sum(1 for i in range(2000, 6000) if i % 3 == 0) + 2000
    # the query's own filters push into the same scan and still see the mask
    assert df.where("id < 2000").count() == 1800
    assert df.where("id >= 2000 AND id < 6000").collect() == df.where("id >= 2000 AND id < 6000 AND id % 3 = 0").collect()


@pytest.mark.spark
@pytest.mark.parametrize(
    "conf",
    [
        {"spark.sql.parquet.enableVectorizedReader": "false"},  # rows, not batches
        {"spark.sql.columnVector.offheap.enabled": "true"},  # off-heap batches
        {"spark.sql.parquet.columnarReaderBatchSize": "7"},  # batches cut mid-word
        {"spark.sql.files.maxPartitionBytes": "3000", "spark.sql.files.openCostInBytes": "0"},  # files split
    ],
    ids=["row-reader", "off-heap", "small-batches", "split-files"],
)
def test_the_jvm_mask_under_every_reader_shape(spark, table, conf):
    expected = arrow_rows(table.to_arrow())
    with spark_conf(spark, conf):
        df = read_native(spark, table.uri)
        assert "MvtableMaskedParquet" in plan_of(df)
        assert rows(df) == expected
        assert rows(df.where("id % 2 = 0")) == [r for r in expected if r[0] % 2 == 0]
        # a filter Parquet skips row groups by (ids ascend in each file): positions from Spark's reader
        assert rows(df.where("id >= 4950")) == [r for r in expected if r[0] >= 4950]


@pytest.mark.spark
def test_a_split_read_counts_positions_from_its_first_row_group(spark, tmp_path):
    """With no filter for Parquet the mask counts positions; a read of a file's later bytes starts
    at the first row group Spark's reader takes for them. Deletes that no shift of the positions
    leaves in place (none of the fixture's period 3) tell a wrong start from the right one."""
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema, properties={"rowGroupRows": "250"})
    t.append(orders(0, 2000))
    [seg] = t.snapshot().visible_segments()
    t.delete_rows({seg.id: sorted({(p * p * 7 + p) % 2000 for p in range(700)})})
    expected = arrow_rows(t.to_arrow())
    with spark_conf(spark, {"spark.sql.files.maxPartitionBytes": "3000", "spark.sql.files.openCostInBytes": "0"}):
        df = read_native(spark, t.uri)
        assert df.rdd.getNumPartitions() > 4  # the one file is read in parts
        assert rows(df) == expected
        assert rows(df.where("price > 100")) == [r for r in expected if r[2] > 100]  # positions from Spark's reader


@pytest.mark.spark
def test_a_damaged_deletion_vector_fails_the_query_naming_it(spark, table):
    snap = table.snapshot()
    ref = snap.dvs[snap.visible_segments()[1].id]
    dv_file = os.path.join(table.uri, ref.path)
    data = bytearray(open(dv_file, "rb").read())
    data[ref.offset + 20] ^= 0xFF
    df = read_native(spark, table.uri)  # executors read the vectors: the query fails, not the plan
    open(dv_file, "wb").write(bytes(data))
    with pytest.raises(Exception, match="corrupt deletion vector .*CRC-32 mismatch"):
        df.count()
    os.remove(dv_file)
    with pytest.raises(Exception, match="cannot read the deletion vector"):
        read_native(spark, table.uri).count()


@pytest.mark.spark
def test_a_column_named_metadata_reads_through_the_jvm_mask_only(spark, tmp_path, monkeypatch):
    """The expression mask needs Spark's ``_metadata`` column, which a data column of that
    name hides; the JVM mask does not."""
    t = Table.create(str(tmp_path / "m"), schema=pa.schema([("id", pa.int64()), ("_metadata", pa.string())]))
    t.append(pa.table({"id": [1, 2, 3], "_metadata": ["a", "b", "c"]}))
    t.delete(pc.field("id") == 2)
    assert rows(read_native(spark, t.uri)) == [(1, "a"), (3, "c")]
    monkeypatch.setenv(native_jvm.SWITCH, "off")
    with pytest.raises(SchemaMismatchError, match="_metadata.*MVTABLE_JVM_MASK=off.*format\\('mvtable'\\)"):
        read_native(spark, t.uri)


@pytest.mark.spark
def test_switched_off_or_unavailable_it_falls_back_to_the_expression_mask(spark, table, monkeypatch, caplog):
    expected = arrow_rows(table.to_arrow())
    monkeypatch.setenv(native_jvm.SWITCH, "off")
    _MASKS.clear()
    df = read_native(spark, table.uri)
    assert "MvtableMaskedParquet" not in plan_of(df) and _MASKS
    assert rows(df) == expected
    monkeypatch.delenv(native_jvm.SWITCH)

    # a session where the class cannot be made available: one warning, then the fallback
    def broken(*_: object) -> bool:
        raise JvmMaskUnavailableError("no javac (test)")

    monkeypatch.setattr(native_jvm, "_loadable", broken)
    monkeypatch.setattr(native_jvm, "_attached", {})
    with caplog.at_level(logging.WARNING, logger="mvtable.connector"):
        df = read_native(spark, table.uri)
        read_native(spark, table.uri)
    warnings = [r.getMessage() for r in caplog.records if "no javac" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, for both reads
    assert "read_native masks deleted rows with Spark expressions" in warnings[0]
    assert "MvtableMaskedParquet" not in plan_of(df) and rows(df) == expected


@pytest.mark.spark
def test_the_jvm_mask_when_parquet_skips_pages(spark, tmp_path):
    """With a page index, Spark's reader skips the pages a filter rules out, so a batch's
    row positions jump: each row is still tested at its own position. (mvtable writes no
    page index; a segment rewritten with one, same rows in the same order, stands in for a
    writer that does.)"""
    import pyarrow.parquet as pq

    t = Table.create(str(tmp_path / "p"), schema=orders(0, 1).schema)
    t.append(orders(0, 20_000))
    [seg] = t.snapshot().visible_segments()
    t.delete_rows({seg.id: list(range(0, 20_000, 7))})
    path = os.path.join(t.uri, seg.file.path)
    where = "(id >= 1000 AND id < 1100) OR (id >= 15000 AND id < 15050)"
    # before the rewrite: mvtable's own reader refuses a file whose footer is not the one it wrote
    expected = sorted(r for r in arrow_rows(t.to_arrow()) if 1000 <= r[0] < 1100 or 15000 <= r[0] < 15050)
    pq.write_table(pq.read_table(path), path, write_page_index=True, data_page_size=1024, row_group_size=20_000)
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).has_column_index
    _record_footer(t, seg.id, path)  # as that writer's commit would have
    assert len(expected) == 150 - len([i for i in [*range(1000, 1100), *range(15000, 15050)] if i % 7 == 0])
    assert rows(read_native(spark, t.uri).where(where)) == expected


def _record_footer(t: Table, segment_id: str, path: str) -> None:
    """Point the commit that added ``segment_id`` at the footer of the file now at ``path``
    (re-sealed with its checksum): read_native checks footers against the log."""
    import json
    import zlib

    from mvtable.lineage.actions import CHECKSUM_KEY, seal
    from mvtable.lineage.log import commit_path

    data = open(path, "rb").read()
    footer = data[-8 - int.from_bytes(data[-8:-4], "little") : -8]
    for v in range(t.version + 1):
        log_file = os.path.join(t.uri, commit_path(v))
        doc = json.load(open(log_file))
        adds = [a for a in doc["actions"] if a["kind"] == "add" and a["segment"]["id"] == segment_id]
        if adds:
            doc.pop(CHECKSUM_KEY)
            adds[0]["segment"]["footer_crc32"] = zlib.crc32(footer)
            with open(log_file, "wb") as f:
                f.write(seal(json.dumps(doc).encode()))
            return
    raise AssertionError(f"no commit adds {segment_id}")
