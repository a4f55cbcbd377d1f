"""Which versions an export covers, and how column types map to Iceberg and Delta."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest
from pyiceberg.table import StaticTable

from mvtable.connector import Table
from mvtable.connector.export import export_iceberg
from mvtable.connector.export.common import oldest_rebuildable
from mvtable.connector.export.types import delta_schema, iceberg_schema
from mvtable.connector.schema import schema_to_json
from mvtable.errors import ExportConflictError, InvalidOptionError, UnsupportedExportTypeError

from .conftest import sorted_rows


def ints(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def test_oldest_rebuildable_version() -> None:
    assert oldest_rebuildable([0, 1, 2, 3], [], 3) == 0
    assert oldest_rebuildable([5, 6], [4], 6) == 4  # from the checkpoint on
    assert oldest_rebuildable([0, 1, 2, 3, 5, 6], [5], 6) == 5  # a hole in the commits, then a checkpoint
    assert oldest_rebuildable([], [7], 7) == 7


def test_all_versions_start_where_the_log_does(tmp_path) -> None:
    props = {"checkpointInterval": "2", "versionRetentionPeriod": "0s"}
    t = Table.create(str(tmp_path / "t"), schema=ints(0, 1).schema, properties=props)
    for i in range(5):
        t.append(ints(i * 10, 10))
    t.collect_garbage()
    oldest = min(t.commit_log.listing().checkpoints)
    assert oldest > 0
    result = t.export_iceberg(all_versions=True)
    assert result.versions == tuple(range(oldest, t.version + 1))
    table = StaticTable.from_metadata(result.metadata)
    assert sorted_rows(table.scan(snapshot_id=oldest + 1).to_arrow()) == sorted_rows(t.scan(version=oldest).to_arrow())


def test_versions_whose_files_were_vacuumed_are_skipped(tmp_path) -> None:
    props = {"replacedSegmentsRetentionPeriod": "0s", "orphanGracePeriod": "0s"}
    t = Table.create(str(tmp_path / "t"), schema=ints(0, 1).schema, properties=props)
    t.append(ints(0, 10))
    t.overwrite(ints(100, 5))
    t.vacuum(retention="0s", force=True)
    result = t.export_delta(all_versions=True)
    # version 1 showed the overwritten segment, whose file vacuum deleted; vacuum's own commit (if any) is exported
    assert result.skipped == (1,) and result.versions == (0, *range(2, t.version + 1))


def test_iceberg_ids_and_name_mapping_cover_nested_fields() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("m", pa.map_(pa.string(), pa.list_(pa.int32()))),
            ("s", pa.struct([("a", pa.decimal128(10, 2)), ("t", pa.timestamp("us"))])),
        ]
    )
    doc, mapping, last_id = iceberg_schema(schema_to_json(schema))
    # struct fields carry the table's field ids (by position here: 1-3, then s's fields 4-5);
    # list elements and map keys/values get ids derived from their parent's, above all of those
    base = 1 << 24
    key, value = base + 2 * 3 + 1, base + 2 * 3 + 2
    element = base + value * 3
    assert last_id == element
    id_, m, s = doc["fields"]
    assert (id_["id"], id_["required"], id_["type"]) == (1, True, "long")
    assert (m["id"], m["type"]["key-id"], m["type"]["value-id"], m["type"]["value"]["element-id"]) == (2, key, value, element)
    assert [(f["id"], f["name"], f["type"]) for f in s["type"]["fields"]] == [(4, "a", "decimal(10, 2)"), (5, "t", "timestamp")]
    names = json.loads(json.dumps(mapping))
    assert names[1] == {
        "field-id": 2,
        "names": ["m"],
        "fields": [
            {"field-id": key, "names": ["key"]},
            {"field-id": value, "names": ["value"], "fields": [{"field-id": element, "names": ["element"]}]},
        ],
    }


def test_delta_schema_features_and_refusals() -> None:
    ntz = schema_to_json(pa.schema([("t", pa.list_(pa.timestamp("us")))]))
    assert delta_schema(ntz)[1] == ["deletionVectors", "timestampNtz"]
    plain, features = delta_schema(schema_to_json(pa.schema([("s", pa.struct([("a", pa.int8())]))])))
    assert features == ["deletionVectors"] and plain["fields"][0]["metadata"] == {}
    with pytest.raises(UnsupportedExportTypeError, match="'s.a=b'"):
        delta_schema(schema_to_json(pa.schema([("s", pa.struct([("a=b", pa.int8())]))])))
    with pytest.raises(UnsupportedExportTypeError, match="Iceberg cannot hold decimal\\(4,5\\)"):
        iceberg_schema({"type": "struct", "fields": [{"name": "d", "type": "decimal(4,5)", "nullable": True}]})


def test_versions_whose_dv_files_were_vacuumed_are_skipped(tmp_path) -> None:
    t = Table.create(
        str(tmp_path / "t"), schema=ints(0, 1).schema, properties={"dvInlineMaxBytes": "0", "orphanGracePeriod": "0s"}
    )
    t.append(ints(0, 1000))
    t.delete(pa.compute.field("id") < 10)
    t.delete(pa.compute.field("id") < 20)  # supersedes the first DV file, which vacuum then removes
    t.vacuum(retention="0s", force=True)
    result = t.export_iceberg(all_versions=True)
    assert result.skipped == (2,) and result.versions == (0, 1, 3)
    table = StaticTable.from_metadata(result.metadata)
    assert sorted_rows(table.scan(snapshot_id=4).to_arrow()) == sorted_rows(t.scan().to_arrow())


def test_a_racing_export_wins_and_ours_leaves_nothing_behind(tmp_path) -> None:
    """Two exporters adding the same Iceberg metadata version: one wins, the other raises
    ``ExportConflictError`` (the CLI exits 3) and removes the manifests it wrote."""
    t = Table.create(str(tmp_path / "t"), schema=ints(0, 1).schema)
    t.append(ints(0, 10))
    t.export_iceberg()
    t.append(ints(10, 10))
    metadata = os.path.join(t.uri, "metadata")

    def snapshots_while_another_export_lands():
        yield t.snapshot()
        t.export_iceberg()  # the other exporter, between our manifests and our metadata file

    before_ours = set(os.listdir(metadata))
    with pytest.raises(ExportConflictError):
        export_iceberg(t.io, snapshots_while_another_export_lands())
    theirs = set(os.listdir(metadata)) - before_ours
    assert "v2.metadata.json" in theirs and len(theirs) == 3  # their manifest, list and metadata; nothing of ours
    assert open(os.path.join(metadata, "version-hint.text")).read() == "2"
    assert StaticTable.from_metadata(f"file://{metadata}/v2.metadata.json").current_snapshot().snapshot_id == t.version + 1


def test_exports_follow_compaction_and_later_deletes(tmp_path) -> None:
    """Compaction rewrites segments (deleted rows dropped) and later deletes land on its
    output: both formats still read exactly mvtable's rows at every version."""
    t = Table.create(str(tmp_path / "t"), schema=ints(0, 1).schema, properties={"dvInlineMaxBytes": "0"})
    for i in range(4):
        t.append(ints(i * 1000, 1000))
    t.delete(pa.compute.equal(pa.compute.bit_wise_and(pa.compute.field("id"), 3), 0))
    assert t.compact().output_segments == 1
    t.delete(pa.compute.field("id") < 100)
    iceberg = t.export_iceberg(all_versions=True)
    delta = t.export_delta(all_versions=True)
    assert iceberg.versions == delta.versions == tuple(range(t.version + 1)) and iceberg.copied_dv_bytes == 0
    table = StaticTable.from_metadata(iceberg.metadata)
    for v in range(1, t.version + 1):
        expected = sorted_rows(t.scan(version=v).to_arrow())
        assert sorted_rows(table.scan(snapshot_id=v + 1).to_arrow()) == expected, f"iceberg, version {v}"
        assert sorted_rows(pl.read_delta(t.uri, version=v).to_arrow()) == expected, f"delta, version {v}"


@pytest.mark.parametrize("value", ["false", 0, 1, None])
@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
def test_all_versions_must_be_a_bool(tmp_path: Path, fmt: str, value: object) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]))
    t.append(pa.table({"id": pa.array([1], pa.int64())}))
    call = t.export_iceberg if fmt == "iceberg" else t.export_delta
    with pytest.raises(InvalidOptionError, match="all_versions must be True or False"):
        call(all_versions=value)  # type: ignore[arg-type]
    assert not os.path.exists(os.path.join(t.uri, "metadata" if fmt == "iceberg" else "_delta_log"))
