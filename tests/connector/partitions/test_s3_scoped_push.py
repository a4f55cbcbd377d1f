"""Scoped consistent pushes on real S3 servers on 127.0.0.1 (SeaweedFS, moto): an aligned
predicate changes metadata only, another copies what it keeps, and rollback brings back
exactly what was replaced."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table

pytestmark = pytest.mark.s3

DAY_A, DAY_B = dt.date(2024, 1, 5), dt.date(2024, 1, 6)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])


@pytest.fixture(params=["seaweedfs", "moto"])
def s3(request):
    return request.getfixturevalue(f"{request.param}_s3")


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def content(t: Table) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow().to_pylist())


def test_scoped_pushes_and_their_rollback_on_s3(s3):
    uri, opts = s3.url("tables/scoped"), s3.storage_options()
    t = Table.create(uri, schema=SCHEMA, storage_options=opts, properties={"dvInlineMaxBytes": "0"})
    t.append(rows(DAY_A, 1, 2, 3))
    t.append(rows(DAY_B, 4, 5, 6))
    original = content(t)
    first = t.overwrite(rows(DAY_A, 7, v="new"), consistent_push=True, replace_where=pc.field("day") == DAY_A)
    params = [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters
    assert (params["replacedSegments"], params["rewrittenSegments"], params["probedSegments"]) == (1, 0, 0)
    t.delete(pc.field("id") == 5)  # a DV file on S3, which the copy below must respect
    second = t.overwrite(
        rows(DAY_B, 6, v="new"), consistent_push=True, replace_where=(pc.field("day") == DAY_B) & (pc.field("id") == 6)
    )
    params = [h for h in t.history() if h.operation == "CONSISTENT_PUSH"][-1].parameters
    assert params["rewrittenSegments"] == 1
    again = Table.open(uri, storage_options=opts)
    assert content(again) == [("2024-01-05", 7, "new"), ("2024-01-06", 4, "old"), ("2024-01-06", 6, "new")]
    assert [e.scope for e in again.lineage()] == [
        "replace_where (day == 2024-01-05)",
        "replace_where ((day == 2024-01-06) and (id == 6))",
    ]
    again.rollback(entry=second.entry)
    assert content(again) == [("2024-01-05", 7, "new"), ("2024-01-06", 4, "old"), ("2024-01-06", 6, "old")]
    again.rollback(entry=first.entry)
    assert content(again) == [r for r in original if r[1] != 5]
