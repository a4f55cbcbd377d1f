"""Workers of the schema-change race (``test_schema_race``), importable by spawned processes."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

CHANGES = (
    ("add", "extra", pa.float64()),
    ("rename", "name", "label"),
    ("widen", "v", pa.int64()),
    ("drop", "tmp", None),
    ("add", "tmp", pa.string()),  # the old name, a new id
)


def row_for(schema: pa.Schema, schema_id: int, rid: int) -> pa.Table:
    """One row with the columns of ``schema`` (the schema the writer read), values derived from ``rid``."""
    values: dict[str, Any] = {
        "id": rid,
        "name": f"n{rid}",
        "label": f"n{rid}",
        "v": rid * 2,
        "extra": rid + 0.5,
        "tmp": f"t{rid}" if schema_id >= len(CHANGES) else f"old{rid}",
    }
    return pa.table({f.name: pa.array([values[f.name]], f.type) for f in schema}, schema=schema)


def appender(index: int, barrier: Any, uri: str, options: dict[str, Any], appends: int) -> list[tuple[int, int, str]]:
    """Append rows, each built from the schema read just before: (row id, schema id read, outcome).

    At least ``appends``, and on until the last schema change is seen, so the appends span the
    changes however the machine schedules the processes."""
    from mvtable.connector import Table
    from mvtable.connector.schema import schema_from_json
    from mvtable.errors import ConcurrentSchemaChangeError, SchemaMismatchError

    t = Table.open(uri, storage_options=options)
    barrier.wait(timeout=120)
    out = []
    for j in range(appends * 20):
        rid = index * 1000 + j
        snap = t.snapshot()
        data = row_for(schema_from_json(snap.table_schema), snap.schema_id, rid)
        try:
            t.append(data)
            out.append((rid, snap.schema_id, "landed"))
        except (ConcurrentSchemaChangeError, SchemaMismatchError) as exc:
            out.append((rid, snap.schema_id, type(exc).__name__))
        if j + 1 >= appends and snap.schema_id >= len(CHANGES):
            break
    return out


def changer(index: int, barrier: Any, uri: str, options: dict[str, Any], pause_s: float) -> list[tuple[int, int, str]]:
    from mvtable.connector import Table

    t = Table.open(uri, storage_options=options)
    barrier.wait(timeout=120)
    for kind, name, arg in CHANGES:
        _after_appends(t, 2, timeout_s=120)  # each schema has appends of its own, whatever the load
        time.sleep(pause_s)
        with t.update_schema() as u:
            if kind == "add":
                u.add_column(name, arg)
            elif kind == "rename":
                u.rename_column(name, arg)
            elif kind == "widen":
                u.update_column(name, arg)
            else:
                u.drop_column(name)
    return []


def race(index: int, barrier: Any, uri: str, options: dict[str, Any], appends: int, pause_s: float) -> list[tuple[int, int, str]]:
    """Process 0 changes the schema, the others append."""
    if index == 0:
        return changer(index, barrier, uri, options, pause_s)
    return appender(index, barrier, uri, options, appends)


def _after_appends(t: Any, count: int, *, timeout_s: float) -> None:
    """Wait until ``count`` commits landed after the newest version seen now."""
    start = t.version
    deadline = time.monotonic() + timeout_s
    while t.version < start + count and time.monotonic() < deadline:
        time.sleep(0.01)
