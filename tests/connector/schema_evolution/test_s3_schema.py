"""Schema evolution on a real S3 server (seaweedfs and moto on loopback): evolve, read old and new rows by id,
merge through a write, and the schema-change race from other processes."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table

from .test_reads_by_id import OLD, evolve, expected, new_rows, old_rows
from .test_schema_race import _run, gang  # noqa: F401  (the module's process gang)

pytestmark = pytest.mark.s3


@pytest.fixture(params=["seaweedfs", "moto"])
def s3(request):
    return request.getfixturevalue(f"{request.param}_s3")


def test_evolve_and_read_by_id_on_s3(s3):
    uri, opts = s3.url(f"schema/{uuid.uuid4().hex}"), s3.storage_options()
    t = Table.create(uri, schema=OLD, properties={"rowGroupRows": "5"}, storage_options=opts)
    t.append(old_rows(0, 10))
    t.append(old_rows(10, 20))
    t.delete(pc.field("id") == 3)
    evolve(t)
    t.append(new_rows(20, 25))
    again = Table.open(uri, storage_options=opts)
    assert sorted(again.to_arrow().to_pylist(), key=lambda r: r["id"]) == expected([i for i in range(25) if i != 3])
    # the first Iceberg export after the changes reads the files' footers from the server for the name mapping
    again.export_iceberg()
    meta = json.loads(again.io.read(f"metadata/v{again.io.read('metadata/version-hint.text').decode()}.metadata.json"))
    mapping = {m["field-id"]: m["names"] for m in json.loads(meta["properties"]["schema.name-mapping.default"])}
    assert mapping[3] == ["b", "bee"] and mapping[4] == ["c"]  # c added again: a new id, the name stays the old one's
    again.append(new_rows(30, 31).append_column("more", pa.array([1], pa.int8())), merge_schema=True)
    assert again.to_arrow(columns=["id", "more"], filter=pc.field("id") == 1).to_pylist() == [{"id": 1, "more": None}]
    again.compact(min_input_files=2)
    assert again.to_arrow().num_rows == 25


def test_schema_race_on_s3(gang, s3):  # noqa: F811
    _run(gang, s3.url(f"race/{uuid.uuid4().hex}"), s3.storage_options())
