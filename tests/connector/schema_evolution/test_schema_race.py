"""A schema change racing appends from other processes: each append either lands and reads right by id under the
final schema, or fails with a typed error and leaves nothing behind (no torn file, no partial row)."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from support.process_gang import ProcessGang

from mvtable.connector import Table
from mvtable.lineage.enums import Operation

from .race_workers import CHANGES, race

APPENDERS = 3
APPENDS = 20


@pytest.fixture(scope="module")
def gang() -> Iterator[ProcessGang]:
    g = ProcessGang(APPENDERS + 1)
    try:
        yield g
    finally:
        g.close()


def _expected(rid: int, schema_id: int) -> dict:
    return {
        "id": rid,
        "label": f"n{rid}",
        "v": rid * 2,
        "extra": rid + 0.5 if schema_id >= 1 else None,
        "tmp": f"t{rid}" if schema_id >= len(CHANGES) else None,  # the dropped values never come back
    }


def _run(gang: ProcessGang, uri: str, options: dict) -> None:
    t = Table.create(
        uri,
        schema=pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.int32()), ("tmp", pa.string())]),
        storage_options=options,
    )
    results = gang.run(race, uri, options, APPENDS, 0.08, timeout=240)
    outcomes = [o for per in results[1:] for o in per]
    for per in results[1:]:
        assert len(per) >= APPENDS and per[-1][1] == len(CHANGES)  # each appender ran until the last change
    assert {kind for _, _, kind in outcomes} <= {"landed", "ConcurrentSchemaChangeError", "SchemaMismatchError"}
    landed = {rid: sid for rid, sid, kind in outcomes if kind == "landed"}
    assert len(set(landed.values())) >= 2, "the appends did not overlap the schema changes"
    t = Table.open(uri, storage_options=options)
    got = sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["id"] for r in got] == sorted(landed)  # every landed append once, no failed one
    assert got == [_expected(rid, landed[rid]) for rid in sorted(landed)]
    assert t.schema.names == ["id", "label", "v", "extra", "tmp"] and t.schema.field("v").type == pa.int64()
    assert sum(h.operation is Operation.UPDATE_SCHEMA for h in t.history()) == len(CHANGES)
    # no torn file: the data folder holds exactly the files the table names
    named = {seg.file.path for seg in t.snapshot().visible_segments()}
    files = {f"data/{f.name}" for f in t.io.list("data") if f.name.endswith(".parquet")}
    assert files == named


def test_schema_changes_racing_appends_from_other_processes(gang: ProcessGang, tmp_path) -> None:
    _run(gang, str(tmp_path / "t"), {})
