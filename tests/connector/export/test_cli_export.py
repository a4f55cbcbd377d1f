"""`mvtable export iceberg|delta URI [--all-versions] [--json]`."""

from __future__ import annotations

import json
import os

import pyarrow as pa
from pyiceberg.table import StaticTable

from mvtable.connector import Table
from mvtable.connector.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE, main

from .conftest import sorted_rows


def test_export_iceberg_json(history_table: Table, capsys) -> None:
    assert main(["export", "iceberg", history_table.uri, "--all-versions", "--json"]) == EXIT_OK
    (report,) = json.loads(capsys.readouterr().out)
    assert report["format"] == "iceberg" and report["versions"] == list(range(history_table.version + 1))
    assert report["bytes_written"] > 0 and report["skipped_versions"] == []
    table = StaticTable.from_metadata(report["metadata"])
    assert sorted_rows(table.scan().to_arrow()) == sorted_rows(history_table.scan().to_arrow())


def test_export_delta_text_then_nothing_new(history_table: Table, capsys) -> None:
    assert main(["export", "delta", history_table.uri]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"exported version(s) {history_table.version} as delta" in out
    assert os.path.exists(os.path.join(history_table.uri, "_delta_log", f"{0:020d}.json"))
    assert main(["export", "delta", history_table.uri]) == EXIT_OK
    assert "nothing to export" in capsys.readouterr().out


def test_export_errors_exit_1_with_a_hint(tmp_path, capsys) -> None:
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("bad name", pa.int64())]))
    assert main(["export", "delta", t.uri]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "UnsupportedExportTypeError" in err and "'bad name'" in err and "hint:" in err
    assert main(["export", "parquet", t.uri]) == EXIT_USAGE
