"""SIGKILL a transaction's process at every step of the protocol, on local disk and on a real S3 server.

After each kill: a consistent read of the tables shows the transaction whole or not at
all, each table alone shows a whole snapshot (its own part or nothing of it), and the next
writer of every table proceeds at once — a prepared transaction whose owner provably died
is aborted by it, a decided one finished."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from support import forked

import mvtable
from mvtable.connector import Table

CHILD = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa, pyarrow.compute as pc
    import mvtable

    cfg = json.loads(sys.argv[1])
    tables = [mvtable.Table(u, storage_options=cfg["options"]) for u in cfg["uris"]]
    one = lambda *v: pa.table({"id": pa.array(v, pa.int64())})
    if cfg["txn"] is None:
        with mvtable.transaction() as tx:
            tx.append(tables[0], one(3))
            tx.overwrite(tables[1], one(100), consistent_push=True)
            tx.delete(tables[2], pc.field("id") == 21)
    else:
        mvtable.rollback_transaction(cfg["txn"], tables=tables[:1])
    """
)

BEFORE = ([1, 2], [11, 12], [21, 22])
AFTER = ([1, 2, 3], [100], [22])

COMMIT_POINTS = [
    ("transaction.after_files", BEFORE),
    ("commit.TXN_PREPARE.after_put", BEFORE),  # the first table prepared
    ("transaction.after_prepare.2", BEFORE),
    ("transaction.after_prepare.3", BEFORE),  # every table prepared, nothing decided
    ("transaction.after_decision", AFTER),
    ("commit.TXN_COMMIT.before_put", AFTER),
    ("transaction.after_finalize.1", AFTER),
    ("transaction.after_finalize.2", AFTER),
]
ROLLBACK_POINTS = [
    "transaction.rollback.after_decision",
    "transaction.rollback.after_revert.1",
    "commit.TXN_ROLLBACK.after_put",
]


def ids(t: Table, version: int | None = None) -> list[int]:
    return sorted(t.to_arrow(version=version).column("id").to_pylist())


def make_tables(uris: list[str], options: dict[str, Any]) -> list[Table]:
    tables = [Table(u, storage_options=options) for u in uris]
    for t, start in zip(tables, (1, 11, 21)):
        t.append(pa.table({"id": pa.array([start, start + 1], pa.int64())}))
    return tables


@pytest.fixture(scope="module", autouse=True)
def _stop_fork_server() -> Iterator[None]:
    yield
    forked.stop_fork_server()


def run_child(uris: list[str], options: dict[str, Any], *, point: str | None, txn: str | None = None) -> None:
    """The transaction (or the rollback of ``txn``) in another process, ``point`` armed (a
    child forked with the imports done: ``support.forked``)."""
    cfg = json.dumps({"uris": uris, "options": options, "txn": txn})
    proc = forked.run_forked(CHILD, [cfg], point=point or "", timeout=180)
    if point is None:
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == -9, f"the child was not killed at {point}: rc {proc.returncode}\n{proc.stderr[-3000:]}"


def whole(tables: list[Table], versions: dict[str, int] | None = None) -> tuple[list[int], ...]:
    return tuple(ids(t, None if versions is None else versions[t.uri]) for t in tables)


def check_after_kill(tables: list[Table], expected: tuple[list[int], ...]) -> None:
    # each table alone: its own part whole or nothing of it
    for t, before, after in zip(tables, BEFORE, AFTER):
        assert ids(t) in (before, after)
    versions = mvtable.consistent_versions(tables)
    assert whole(tables, versions) == expected
    # the next writer of each table proceeds at once: a push over the whole table (held by a prepared part)
    for t in tables:
        t.overwrite(pa.table({"id": pa.array([7], pa.int64())}), consistent_push=True)
        assert ids(t) == [7]


def kill_commit(uris: list[str], options: dict[str, Any], point: str, expected: tuple[list[int], ...]) -> None:
    tables = make_tables(uris, options)
    run_child(uris, options, point=point)
    check_after_kill(tables, expected)


def kill_rollback(uris: list[str], options: dict[str, Any], point: str) -> None:
    tables = make_tables(uris, options)
    run_child(uris, options, point=None)
    assert whole(tables) == AFTER
    (txn,) = [e.id for e in tables[0].lineage() if e.id.startswith("txn-")]
    run_child(uris, options, point=point, txn=txn)
    versions = mvtable.consistent_versions(tables)
    assert whole(tables, versions) in (AFTER, BEFORE)
    assert mvtable.rollback_transaction(txn, tables=tables[2:]).outcome == "ROLLED_BACK"  # finishes what the kill left
    assert whole(tables) == BEFORE
    assert whole(tables, mvtable.consistent_versions(tables)) == BEFORE


@pytest.mark.parametrize(("point", "expected"), COMMIT_POINTS, ids=[p for p, _ in COMMIT_POINTS])
def test_kill_during_commit_on_local_disk(tmp_path, point, expected):
    kill_commit([str(tmp_path / n) for n in ("fact", "dim1", "dim2")], {}, point, expected)


@pytest.mark.parametrize("point", ROLLBACK_POINTS)
def test_kill_during_rollback_on_local_disk(tmp_path, point):
    kill_rollback([str(tmp_path / n) for n in ("fact", "dim1", "dim2")], {}, point)


@pytest.mark.parametrize(("point", "expected"), COMMIT_POINTS, ids=[p for p, _ in COMMIT_POINTS])
def test_kill_during_commit_on_s3(seaweedfs_s3, point, expected):
    uris = [seaweedfs_s3.url(n) for n in ("fact", "dim1", "dim2")]
    kill_commit(uris, seaweedfs_s3.storage_options(), point, expected)


@pytest.mark.parametrize("point", ROLLBACK_POINTS)
def test_kill_during_rollback_on_s3(seaweedfs_s3, point):
    uris = [seaweedfs_s3.url(n) for n in ("fact", "dim1", "dim2")]
    kill_rollback(uris, seaweedfs_s3.storage_options(), point)
