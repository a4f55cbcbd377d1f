"""``mvtable schema PATH [--history] [--json]`` and the schema id in ``mvtable inspect``."""

from __future__ import annotations

import json

import pyarrow as pa

from mvtable.connector import Table

from ..test_cli import run, run_json


def _table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("name", pa.string())]), primary_key=["id"])
    with t.update_schema() as u:
        u.rename_column("name", "label").add_column("price", pa.float64(), doc="in EUR")
    with t.update_schema() as u:
        u.drop_column("price")
    return t


def test_schema_json_lists_ids_types_and_docs(tmp_path):
    t = _table(tmp_path)
    [doc] = run_json("schema", t.uri)
    assert doc["schema_id"] == 2 and doc["key"] == ["id"]
    assert [(f["id"], f["name"], f["type"]) for f in doc["fields"]] == [(1, "id", "int64"), (2, "label", "string")]
    [old] = run_json("schema", t.uri, "--version", "1")
    assert [f["name"] for f in old["fields"]] == ["id", "label", "price"] and old["fields"][2]["doc"] == "in EUR"


def test_schema_history_names_each_change_and_its_version(tmp_path):
    t = _table(tmp_path)
    changes = run_json("schema", t.uri, "--history")
    assert [(c["version"], c["schema_id"], c["changes"]) for c in changes] == [
        (0, 0, ["create"]),
        (1, 1, ["rename name to label", "add price"]),
        (2, 2, ["drop price"]),
    ]
    text = run("schema", t.uri, "--history")
    assert text.returncode == 0 and "rename name to label" in text.stdout


def test_schema_for_people_and_inspect_show_the_schema_id(tmp_path):
    t = _table(tmp_path)
    text = run("schema", t.uri)
    assert text.returncode == 0 and "schema id 2" in text.stdout.replace("\n", " ").replace("  ", " ")
    assert "label" in text.stdout and "(key)" in text.stdout
    [info] = json.loads(run("inspect", t.uri, "--json").stdout)
    assert info["schema_id"] == 2 and info["schema"][1] == {"name": "label", "type": "string", "id": 2}
    assert "schema id 2" in run("inspect", t.uri).stdout
