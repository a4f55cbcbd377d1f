"""Fixtures for connector tests: small tables built in ``tmp_path``."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table


def orders(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "status": pa.array(["cancelled" if i % 10 == 0 else "ok" for i in ids]),
            "price": pa.array([i * 1.5 for i in ids], pa.float64()),
        }
    )


@pytest.fixture
def table_uri(tmp_path) -> str:
    return str(tmp_path / "t")


@pytest.fixture
def small_table(table_uri) -> Table:
    """Two appended segments of 1000 rows, row groups of 100 rows."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100"})
    t.append(orders(0, 1000))
    t.append(orders(1000, 1000))
    return t


def churned_table(uri: str) -> Table:
    """A table after a consistent push (so a rollback has an entry to revert) and a delete,
    whose vacuum keeps nothing that no pin needs: no retention window, DVs in files."""
    zero = ("replacedSegmentsRetentionPeriod", "lineageEntryCleanupRetentionPeriod", "versionRetentionPeriod")
    props = {"rowGroupRows": "100", "dvInlineMaxBytes": "0", **dict.fromkeys(zero, "0s")}
    t = Table.create(uri, schema=orders(0, 1).schema, properties=props)
    t.append(orders(0, 1000))
    t.overwrite(orders(3000, 1500), consistent_push=True)
    t.delete(pc.field("id") < 3100)
    return t


# Commits that change what a read of the newest version returns, each in its own way.
COMMITS = {
    "append": lambda t: t.append(orders(5000, 10)),
    "delete": lambda t: t.delete(pc.field("id") < 3300),
    "push": lambda t: t.overwrite(orders(7000, 10), consistent_push=True),
    "rollback": lambda t: t.rollback(entry=t.lineage()[-1].id),
}
