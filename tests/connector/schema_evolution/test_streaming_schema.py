"""Streams across a schema change: additions flow, other changes stop the stream naming the version, a restart
continues from there with the new schema (no row lost or repeated); the sink with ``mergeSchema``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.schema import schema_from_json
from mvtable.connector.streaming import Position, SourceOptions, StreamSource, read_unit
from mvtable.errors import StreamSchemaChangedError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def rows(ids, **extra) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids], **extra}
    return pa.table(cols)


def drain(src: StreamSource, start: Position, columns: list[str]) -> tuple[list[dict], Position]:
    """Micro-batches until nothing is new, read as a Spark task would (by the stream's field ids)."""
    out: list[dict] = []
    schema = schema_from_json(src.table_schema)
    while True:
        end = src.latest_position(start, limited=False)
        if end == start:
            return out, start
        for unit in src.units_between(start, end):
            for t in read_unit(src.io, unit, columns=columns, with_meta=False, schema=schema, primary_key=src.primary_key):
                out.extend(t.to_pylist())
        src.committed(end)
        start = end


def test_additions_flow_other_changes_stop_and_a_restart_continues(tmp_path):
    t = Table.create(str(tmp_path / "src"), schema=SCHEMA)
    t.append(rows([0, 1]))
    src = StreamSource(t.io, SourceOptions(starting_version=0))
    got, pos = drain(src, src.initial_position(), ["id", "name"])
    assert [r["id"] for r in got] == [0, 1]
    # an addition: the running stream goes on with its own columns
    with t.update_schema() as u:
        u.add_column("extra", pa.int32())
    t.append(rows([2], extra=pa.array([7], pa.int32())))
    got, pos = drain(src, pos, ["id", "name"])
    assert got == [{"id": 2, "name": "n2"}]
    # a rename stops it, naming the version; the rows before it were emitted
    t.append(rows([3], extra=pa.array([8], pa.int32())))
    with t.update_schema() as u:
        u.rename_column("name", "label")
    rename_version = t.version
    t.append(pa.table({"id": pa.array([4], pa.int64()), "label": ["n4"], "extra": pa.array([9], pa.int32())}))
    got, pos = drain_until_error(src, pos, ["id", "name"])
    assert got == [{"id": 3, "name": "n3"}]
    with pytest.raises(StreamSchemaChangedError) as err:
        src.latest_position(pos, limited=False)
    assert err.value.version == rename_version and "renamed to label" in err.value.message
    # a restart from the stream's position takes the new schema: nothing lost, nothing repeated
    restarted = StreamSource(t.io, SourceOptions(starting_version=0))
    got, _ = drain(restarted, pos, ["id", "label", "extra"])
    assert got == [{"id": 4, "label": "n4", "extra": 9}]


def drain_until_error(src: StreamSource, start: Position, columns: list[str]) -> tuple[list[dict], Position]:
    out: list[dict] = []
    schema = schema_from_json(src.table_schema)
    end = src.latest_position(start, limited=False)  # stops before the change, after the rows before it
    for unit in src.units_between(start, end):
        for t in read_unit(src.io, unit, columns=columns, with_meta=False, schema=schema):
            out.extend(t.to_pylist())
    src.committed(end)
    return out, end


@pytest.mark.spark
def test_spark_stream_with_a_merging_sink_across_an_addition(spark, tmp_path):
    src, dst, ck = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "ck")
    t = Table.create(src, schema=SCHEMA)
    t.append(rows([0, 1]))

    def run() -> None:
        q = (
            spark.readStream.format("mvtable")
            .load(src)
            .writeStream.format("mvtable")
            .option("checkpointLocation", ck)
            .option("mergeSchema", "true")
            .trigger(availableNow=True)
            .start(dst)
        )
        q.awaitTermination(180)
        if q.exception() is not None:
            raise q.exception()

    run()
    with t.update_schema() as u:
        u.add_column("extra", pa.int32())
    t.append(rows([2], extra=pa.array([7], pa.int32())))
    run()  # the restarted stream has the new column, the sink adds it to its table
    out = Table.open(dst)
    assert out.schema.names == ["id", "name", "extra"]
    assert sorted(out.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 0, "name": "n0", "extra": None},
        {"id": 1, "name": "n1", "extra": None},
        {"id": 2, "name": "n2", "extra": 7},
    ]
    assert any("schemaChanges" in h.parameters for h in out.history())


@pytest.mark.spark
def test_spark_stream_stops_at_a_rename_naming_the_version_and_a_restart_continues(spark, tmp_path):
    src, dst, ck = str(tmp_path / "src"), str(tmp_path / "dst"), str(tmp_path / "ck")
    t = Table.create(src, schema=SCHEMA)
    t.append(rows([0, 1]))
    q = (
        spark.readStream.format("mvtable")
        .load(src)
        .writeStream.format("mvtable")
        .option("checkpointLocation", ck)
        .option("mergeSchema", "true")
        .trigger(processingTime="500 milliseconds")
        .start(dst)
    )
    try:
        q.processAllAvailable()
        t.append(rows([2]))
        with t.update_schema() as u:
            u.rename_column("name", "label")
        rename = t.version
        t.append(pa.table({"id": pa.array([3], pa.int64()), "label": ["n3"]}))
        with pytest.raises(Exception) as err:  # the query fails; awaitTermination re-raises its error
            q.awaitTermination(120)
        message = str(err.value)
        assert "MVTABLE_STREAM_SCHEMA_CHANGED" in message and f"version {rename} of the source table" in message
    finally:
        q.stop()
    assert sorted(Table.open(dst).to_arrow().column("id").to_pylist()) == [0, 1, 2]  # the rows before the rename
    # the restarted query reads on from the rename with the new schema (into a table of that schema:
    # the old sink has no column ``label`` and a write cannot drop its ``name``)
    dst2 = str(tmp_path / "dst2")
    q = (
        spark.readStream.format("mvtable")
        .load(src)
        .writeStream.format("mvtable")
        .option("checkpointLocation", ck)
        .option("mergeSchema", "true")
        .trigger(availableNow=True)
        .start(dst2)
    )
    q.awaitTermination(120)
    assert q.exception() is None
    assert Table.open(dst2).to_arrow().to_pylist() == [{"id": 3, "label": "n3"}]  # nothing lost, nothing repeated
