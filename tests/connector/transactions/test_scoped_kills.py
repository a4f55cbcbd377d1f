"""SIGKILL a transaction holding a scoped overwrite (one day of a day-partitioned fact table) and a dimension append.

On local disk at every step in both orders of the tables, and on a real S3 server at every step.

The transaction's entry in the fact table holds one day only, and its prepare replaces that
day's segment alone. After a kill at each step of the protocol: each table alone shows a
whole snapshot; the next writer of the fact table (a push of another day) proceeds at once
and settles the dead transaction first, publishing or reverting exactly the day it
replaced; a consistent read shows the transaction in both tables or in neither; every
other day keeps its rows throughout; and a scoped push of the same day lands afterwards —
or, as the first writer after the kill, settles the transaction's entry on its day first.
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support import forked

import mvtable
from mvtable.connector import Table

DAY_A, DAY_B, DAY_C = dt.date(2024, 1, 5), dt.date(2024, 1, 6), dt.date(2024, 1, 7)
SCHEMA = pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())])

CHILD = textwrap.dedent(
    """
    import datetime as dt, json, sys
    import pyarrow as pa, pyarrow.compute as pc
    import mvtable

    cfg = json.loads(sys.argv[1])
    fact, dim = (mvtable.Table(cfg[n], storage_options=cfg["options"]) for n in ("fact", "dim"))
    day = dt.date(2024, 1, 6)
    new = pa.table(
        {"day": [day, day], "id": [30, 40], "v": ["new", "new"]},
        schema=pa.schema([("day", pa.date32()), ("id", pa.int64()), ("v", pa.string())]),
    )
    with mvtable.transaction() as tx:
        for which in cfg["order"]:
            if which == "fact":
                tx.overwrite(fact, new, consistent_push=True, replace_where=pc.field("day") == day)
            else:
                tx.append(dim, pa.table({"id": pa.array([3], pa.int64())}))
    """
)

OLD_A = [("2024-01-05", 1, "old"), ("2024-01-05", 2, "old")]
OLD_B = [("2024-01-06", 3, "old"), ("2024-01-06", 4, "old")]
NEW_B = [("2024-01-06", 30, "new"), ("2024-01-06", 40, "new")]
OLD_C = [("2024-01-07", 5, "old"), ("2024-01-07", 6, "old")]
BEFORE = (OLD_A + OLD_B + OLD_C, [1, 2])
AFTER = (OLD_A + NEW_B + OLD_C, [1, 2, 3])

POINTS = [
    ("transaction.after_files", BEFORE),  # files written, nothing prepared
    ("commit.TXN_PREPARE.after_put", BEFORE),  # one table prepared
    ("transaction.after_prepare.1", BEFORE),
    ("transaction.after_prepare.2", BEFORE),  # both prepared, nothing decided
    ("transaction.after_decision", AFTER),  # decided COMMITTED, nothing finalized
    ("commit.TXN_COMMIT.after_put", AFTER),  # one table finalized
    ("transaction.after_finalize.1", AFTER),
]
ORDERS = [("fact", "dim"), ("dim", "fact")]  # which table the protocol takes first


def rows(day: dt.date, *ids: int, v: str = "old") -> pa.Table:
    return pa.table({"day": [day] * len(ids), "id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def on_day(day: dt.date) -> pc.Expression:
    return pc.field("day") == day


def content(t: Table, version: int | None = None) -> list[tuple[str, int, str]]:
    return sorted((r["day"].isoformat(), r["id"], r["v"]) for r in t.to_arrow(version=version).to_pylist())


def dim_ids(t: Table, version: int | None = None) -> list[int]:
    return sorted(t.to_arrow(version=version).column("id").to_pylist())


def star(fact_uri: str, dim_uri: str, options: dict[str, Any]) -> tuple[Table, Table]:
    fact = Table.create(fact_uri, schema=SCHEMA, partition_by=["day"], storage_options=options)
    fact.append(pa.concat_tables([rows(DAY_A, 1, 2), rows(DAY_B, 3, 4), rows(DAY_C, 5, 6)]))
    dim = Table(dim_uri, storage_options=options)
    dim.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    return fact, dim


@pytest.fixture(scope="module", autouse=True)
def _stop_fork_server() -> Iterator[None]:
    yield
    forked.stop_fork_server()


def kill_at(fact: Table, dim: Table, point: str, order: tuple[str, ...]) -> None:
    """The transaction in another process, killed at ``point`` (a child forked with the
    imports done: ``support.forked``)."""
    cfg = json.dumps({"fact": fact.uri, "dim": dim.uri, "order": list(order), "options": fact.storage_options})
    proc = forked.run_forked(CHILD, [cfg], point=point, timeout=180)
    assert proc.returncode == -9, f"the child was not killed at {point}: rc {proc.returncode}\n{proc.stderr[-3000:]}"


def transaction_state(t: Table) -> dict[str, str]:
    return {e.id: e.state for e in t.lineage() if e.id.startswith("txn-")}


@pytest.mark.parametrize(("point", "expected"), POINTS, ids=[p for p, _ in POINTS])
def test_the_next_push_of_the_same_day_settles_the_killed_transaction_first(tmp_path, point, expected):
    # the first writer after the kill wants the very day the dead transaction's entry holds
    fact, dim = star(str(tmp_path / "fact"), str(tmp_path / "dim"), {})
    kill_at(fact, dim, point, ORDERS[0])
    fact.overwrite(rows(DAY_B, 31, v="next"), consistent_push=True, replace_where=on_day(DAY_B))
    assert content(fact) == OLD_A + [("2024-01-06", 31, "next")] + OLD_C
    settled = "COMPLETED" if expected is AFTER else "REVERTED"
    entries = [e for e in fact.lineage() if e.id.startswith("txn-")]
    assert all(e.state == settled for e in entries)
    for e in entries:  # the version that settled it shows exactly the transaction's day, or the old one back
        assert content(fact, e.state_version) == expected[0]
    versions = mvtable.consistent_versions([fact, dim])
    assert content(fact, versions[fact.uri]) == OLD_A + [("2024-01-06", 31, "next")] + OLD_C
    assert dim_ids(dim, versions[dim.uri]) == expected[1]


@pytest.mark.parametrize("order", ORDERS, ids=["fact-first", "dim-first"])
@pytest.mark.parametrize(("point", "expected"), POINTS, ids=[p for p, _ in POINTS])
def test_kill_of_a_scoped_transaction_on_local_disk(tmp_path, point, expected, order):
    fact, dim = star(str(tmp_path / "fact"), str(tmp_path / "dim"), {})
    kill_at(fact, dim, point, order)
    check_after_kill(fact, dim, expected)


@pytest.mark.parametrize(("point", "expected"), POINTS, ids=[p for p, _ in POINTS])
def test_kill_of_a_scoped_transaction_on_s3(seaweedfs_s3, point, expected):
    fact, dim = star(seaweedfs_s3.url("fact"), seaweedfs_s3.url("dim"), seaweedfs_s3.storage_options())
    kill_at(fact, dim, point, ORDERS[0])
    check_after_kill(fact, dim, expected)


def check_after_kill(fact: Table, dim: Table, expected: tuple[list[tuple[str, int, str]], list[int]]) -> None:
    fact_rows, dims = expected

    # each table alone: the whole of its part of the transaction, or nothing of it
    assert content(fact) in (BEFORE[0], AFTER[0])
    assert dim_ids(dim) in (BEFORE[1], AFTER[1])
    prepared = [txn for txn, state in transaction_state(fact).items() if state == "IN_PROGRESS"]

    # the next writer of the fact table pushes another day: it proceeds at once, settling the dead
    # transaction first (publish when decided, revert when not), and only its own day changes
    fact.overwrite(rows(DAY_C, 50, v="later"), consistent_push=True, replace_where=on_day(DAY_C))
    days_a_b = [r for r in fact_rows if r[0] != "2024-01-07"]
    assert content(fact) == days_a_b + [("2024-01-07", 50, "later")]
    settled = "COMPLETED" if expected is AFTER else "REVERTED"
    assert all(transaction_state(fact)[txn] == settled for txn in prepared)
    assert "IN_PROGRESS" not in transaction_state(fact).values()

    # a consistent read: the transaction in both tables or in neither
    versions = mvtable.consistent_versions([fact, dim])
    assert content(fact, versions[fact.uri]) == days_a_b + [("2024-01-07", 50, "later")]
    assert dim_ids(dim, versions[dim.uri]) == dims
    assert set(transaction_state(dim).values()) <= {settled}  # finalized there too (or never prepared there)

    # the next writer of the dimension proceeds at once too
    dim.append(pa.table({"id": pa.array([7], pa.int64())}))
    assert dim_ids(dim) == sorted([*dims, 7])

    # a scoped push of the transaction's day lands, replacing what the transaction left there
    fact.overwrite(rows(DAY_B, 31, v="next"), consistent_push=True, replace_where=on_day(DAY_B))
    assert content(fact) == OLD_A + [("2024-01-06", 31, "next"), ("2024-01-07", 50, "later")]
    versions = mvtable.consistent_versions([fact, dim])
    assert content(fact, versions[fact.uri]) == OLD_A + [("2024-01-06", 31, "next"), ("2024-01-07", 50, "later")]
    assert dim_ids(dim, versions[dim.uri]) == sorted([*dims, 7])
