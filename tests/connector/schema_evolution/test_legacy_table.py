"""A table written before field ids (``tests/fixtures/legacy_table_v0``, made by the previous release) reads, evolves and reads again.

Its schema and its segments carry no ids: both get them by position, the same way, on first read,
and nothing is rewritten."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mvtable.connector import Table
from mvtable.lineage.schema_ids import FIELD_ID_KEY, has_ids

FIXTURE = Path(__file__).parents[2] / "fixtures" / "legacy_table_v0"
EXPECTED = [
    {"id": i, "name": f"n{i}", "qty": i * 10, "info": {"a": i, "b": f"b{i}"}, "tags": [{"k": f"k{i}", "v": i}]}
    for i in (0, 1, 2, 3, 5)
]


@pytest.fixture
def legacy(tmp_path) -> Table:
    root = tmp_path / "legacy"
    shutil.copytree(FIXTURE, root)
    return Table.open(str(root))


def _digests(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "data").iterdir()}


def test_the_fixture_has_no_field_ids():
    schema = pq.read_schema(next((FIXTURE / "data").glob("*.parquet")))
    assert all(b"PARQUET:field_id" not in (f.metadata or {}) for f in schema)


def test_reads_as_before(legacy):
    assert not has_ids(legacy.snapshot().table_schema)
    assert legacy.to_arrow().sort_by("id").to_pylist() == EXPECTED


def test_evolves_by_position_ids_and_reads_again_without_rewriting(legacy):
    root = Path(legacy.uri)
    before = _digests(root)
    with legacy.update_schema() as u:
        u.rename_column("name", "label")
        u.drop_column("qty")
        u.add_column("qty", pa.int64())  # a new id: old values stay gone
        u.add_column("info.c", pa.string())
        u.rename_column("tags.element.v", "value")
        u.rename_column("id", "key")
    snap = legacy.snapshot()
    fields = {f["name"]: f["metadata"][FIELD_ID_KEY] for f in snap.table_schema["fields"]}
    assert fields == {"key": 1, "label": 2, "info": 4, "tags": 5, "qty": 10}  # 1-5 by position, nested 6-9
    assert snap.last_field_id == 11 and snap.primary_key == ("key",)
    legacy.append(
        pa.table(
            {
                "key": pa.array([9], pa.int64()),
                "label": ["n9"],
                "info": [{"a": 9, "b": "b9", "c": "c9"}],
                "tags": [[{"k": "k9", "value": 9}]],
                "qty": pa.array([90], pa.int64()),
            },
            schema=legacy.schema,
        )
    )
    out = legacy.to_arrow().sort_by("key").to_pylist()
    assert out[:5] == [
        {
            "key": r["id"],
            "label": r["name"],
            "info": {**r["info"], "c": None},
            "tags": [{"k": r["tags"][0]["k"], "value": r["tags"][0]["v"]}],
            "qty": None,
        }
        for r in EXPECTED
    ]
    assert out[5]["qty"] == 90 and out[5]["info"]["c"] == "c9"
    # key lookups and upserts follow the renamed key into the old files
    legacy.upsert(pa.table({"key": pa.array([2], pa.int64()), "label": ["two"], "info": [None], "tags": [None],
                            "qty": pa.array([1], pa.int64())}, schema=legacy.schema))  # fmt: skip
    got = {r["key"]: r["label"] for r in legacy.to_arrow().to_pylist()}
    assert got == {0: "n0", 1: "n1", 2: "two", 3: "n3", 5: "n5", 9: "n9"}
    legacy.delete(keys=[5])
    assert 5 not in legacy.to_arrow().column("key").to_pylist()
    # the old files were never rewritten
    after = _digests(root)
    assert all(after[name] == digest for name, digest in before.items())
    assert legacy.to_arrow(version=3).sort_by("id").to_pylist() == EXPECTED
    assert legacy.to_arrow(filter=pc.field("label") == "n1").column("key").to_pylist() == [1]


def _evolve_legacy(t: Table) -> None:
    with t.update_schema() as u:
        u.rename_column("name", "label")
        u.drop_column("qty")
        u.add_column("qty", pa.int64())  # the old name under a new id: old rows read null
        u.rename_column("info.a", "alpha")
        u.rename_column("tags.element.v", "value")


EVOLVED = [
    {"id": r["id"], "label": r["name"], "info": {"alpha": r["info"]["a"], "b": r["info"]["b"]},
     "tags": [{"k": r["tags"][0]["k"], "value": r["tags"][0]["v"]}], "qty": None}
    for r in EXPECTED
]  # fmt: skip
NEW_ROW = {"id": 9, "label": "n9", "info": {"alpha": 9, "b": "b9"}, "tags": [{"k": "k9", "value": 9}], "qty": 90}


def _iceberg_rows(metadata: str) -> list[dict]:
    from pyiceberg.table import StaticTable

    return sorted(StaticTable.from_metadata(metadata).scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def _name_mapping(metadata: str) -> dict[int, dict]:
    import json

    doc = json.loads(Path(metadata.removeprefix("file://")).read_text())
    return {m["field-id"]: m for m in json.loads(doc["properties"]["schema.name-mapping.default"])}


def test_iceberg_first_exported_after_renames_reads_the_old_files_by_their_old_names(legacy):
    _evolve_legacy(legacy)
    assert legacy.to_arrow().sort_by("id").to_pylist() == EVOLVED
    result = legacy.export_iceberg()
    assert _iceberg_rows(result.metadata) == EVOLVED  # renamed columns with their values, the re-added qty null
    mapping = _name_mapping(result.metadata)
    # the old names first, the new ones after; the re-added qty's name stays the dropped column's (id 3)
    assert mapping[2]["names"] == ["name", "label"] and mapping[3]["names"] == ["qty"] and 10 not in mapping
    assert [f["names"] for f in mapping[4]["fields"]] == [["a", "alpha"], ["b"]]
    assert [f["names"] for f in mapping[5]["fields"][0]["fields"]] == [["k"], ["v", "value"]]


def test_iceberg_export_after_new_rows_under_the_new_names(legacy):
    _evolve_legacy(legacy)
    legacy.append(pa.Table.from_pylist([NEW_ROW], schema=legacy.schema))
    assert legacy.to_arrow().sort_by("id").to_pylist() == [*EVOLVED, NEW_ROW]
    got = _iceberg_rows(legacy.export_iceberg().metadata)
    assert got[:5] == EVOLVED
    # pyiceberg maps a file by name unless every field of it has an id, list elements included: the
    # new segment carries ids on its list elements too, so it is read by id and its qty (the name of
    # the dropped column in the name mapping) is the re-added column's value
    assert got[5] == NEW_ROW


def test_iceberg_exported_before_and_after_the_renames_reads_right_both_times(legacy):
    first = legacy.export_iceberg()
    assert _iceberg_rows(first.metadata) == EXPECTED
    _evolve_legacy(legacy)
    second = legacy.export_iceberg()
    assert _iceberg_rows(second.metadata) == EVOLVED
    assert _name_mapping(second.metadata)[2]["names"] == ["name", "label"]
