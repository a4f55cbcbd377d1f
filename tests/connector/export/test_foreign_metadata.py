"""An export continues only metadata this table's exports wrote: another table's export
(a table deleted and created again at the same location) or foreign or damaged files in
``metadata/`` / ``_delta_log/`` are refused with a typed error, and nothing is written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.errors import ExportOfAnotherTableError

SCHEMA = pa.schema([("id", pa.int64())])
FOLDERS = {"iceberg": "metadata", "delta": "_delta_log"}


def ids(start: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(start, start + n), pa.int64())})


def export(t: Table, fmt: str, **kw: bool) -> object:
    return t.export_iceberg(**kw) if fmt == "iceberg" else t.export_delta(**kw)


def listing(root: str, folder: str) -> list[str]:
    return sorted(os.listdir(os.path.join(root, folder)))


@pytest.mark.parametrize("fmt", ["iceberg", "delta"])
@pytest.mark.parametrize("new_appends", [1, 5])  # fewer versions than the old export, and more
def test_a_table_created_again_at_the_same_path_refuses_the_old_tables_export(tmp_path: Path, fmt: str, new_appends: int) -> None:
    path = str(tmp_path / "t")
    old = Table.create(path, schema=SCHEMA)
    for i in range(3):
        old.append(ids(i * 10, 10))
    export(old, fmt)
    shutil.rmtree(os.path.join(path, "_mvtable"))
    shutil.rmtree(os.path.join(path, "data"))
    t = Table.create(path, schema=SCHEMA)
    for i in range(new_appends):
        t.append(ids(1000 + i, 1))
    before = listing(path, FOLDERS[fmt])
    with pytest.raises(ExportOfAnotherTableError, match="(?s)another table.*Move"):
        export(t, fmt, all_versions=True)
    assert listing(path, FOLDERS[fmt]) == before
