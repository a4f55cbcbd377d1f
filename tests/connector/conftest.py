"""Fixtures for connector tests: small tables built in ``tmp_path``."""

from __future__ import annotations

import pyarrow as pa
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
