"""How far an export lags behind the table: ``export_status`` and ``mvtable inspect``."""

from __future__ import annotations

import json
import os

import pyarrow as pa

from mvtable.connector import Table
from mvtable.connector.cli import EXIT_OK, main
from mvtable.connector.export import export_status

from .conftest import rows

SCHEMA = rows(0, 1).schema


def _status(t: Table) -> dict[str, dict]:
    return {s.format: s.to_json() for s in export_status(t.io, t.commit_log.listing())}


def test_a_table_never_exported_has_no_status(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(0, 10))
    assert _status(t) == {}


def test_versions_committed_after_an_export_are_counted(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(0, 10))
    t.export_iceberg()
    exported = t.version
    t.append(rows(10, 10))
    t.delete(pa.compute.field("id") < 3)
    t.export_delta()
    status = _status(t)
    assert status["iceberg"] == {
        "format": "iceberg",
        "folder": "metadata",
        "version": exported,
        "behind": 2,
        "expired": False,
        "current": False,
        "problem": None,
    }
    assert (status["delta"]["version"], status["delta"]["behind"], status["delta"]["current"]) == (t.version, 0, True)
    t.export_iceberg()
    assert _status(t)["iceberg"]["current"]


def test_an_export_older_than_the_log_keeps_is_expired(tmp_path) -> None:
    props = {"checkpointInterval": "2", "versionRetentionPeriod": "0s"}
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, properties=props)
    t.append(rows(0, 10))
    t.export_delta()
    exported = t.version
    for i in range(1, 5):
        t.append(rows(i * 10, 10))
    assert not _status(t)["delta"]["expired"]  # behind, but every version is still in the log
    t.collect_garbage()
    assert min(t.commit_log.listing().checkpoints) > exported  # GC cut the log: the exported version is gone
    delta = _status(t)["delta"]
    assert delta["version"] == exported and delta["expired"] and delta["behind"] == t.version - exported


def test_damaged_export_metadata_is_reported_not_raised(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(0, 10))
    t.export_delta()
    t.export_iceberg()
    with open(os.path.join(t.uri, "_delta_log", f"{1:020d}.json"), "w") as f:
        f.write("not json\n")
    status = _status(t)
    assert status["delta"]["version"] is None and "_delta_log" in status["delta"]["problem"]
    assert not status["delta"]["current"]
    assert status["iceberg"]["current"]  # the other format is unaffected


def test_inspect_shows_a_stale_export_and_what_to_run(tmp_path, capsys) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA)
    t.append(rows(0, 10))
    t.export_iceberg()
    exported = t.version
    t.append(rows(10, 10))
    assert main(["inspect", t.uri]) == EXIT_OK
    out = " ".join(capsys.readouterr().out.split())  # rich may wrap the line
    assert f"iceberg export (metadata/): version {exported}, 1 version(s) behind the table" in out
    assert f"run `mvtable export iceberg {t.uri}`" in out
    assert "delta export" not in out
    assert main(["inspect", t.uri, "--json"]) == EXIT_OK
    (info,) = json.loads(capsys.readouterr().out)
    assert [(e["format"], e["version"], e["behind"]) for e in info["exports"]] == [("iceberg", exported, 1)]
