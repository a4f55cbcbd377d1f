"""Rolling back a completed consistent push of a keyed table brings the rows it replaced
back; a key appended since the push (free while the push was visible) must not end up in the
table twice. The rollback checks the returning rows' keys against what stays visible and
against commits racing it, and commits nothing when one would repeat."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mvtable.connector import Table
from mvtable.connector.keys.rollback import commit_rollback
from mvtable.errors import DuplicateKeyError
from mvtable.lineage import operations as ops
from mvtable.lineage.actions import InsertedKeys
from tests.connector.keys.test_key_races import SCHEMA, rows


@pytest.fixture
def keyed(table_uri) -> Table:
    t = Table.create(table_uri, schema=SCHEMA, primary_key=["id"], properties={"rowGroupRows": "100"})
    t.append(rows(range(100), "seed"))
    return t


def push(t: Table, data: pa.Table) -> str:
    """A completed consistent push of ``data``; its lineage entry id."""
    return str(t.overwrite(data, consistent_push=True).entry)


def view(t: Table) -> tuple[int, list[tuple[int, str]]]:
    return t.version, sorted((r["id"], r["who"]) for r in Table.open(t.uri).to_arrow().to_pylist())


def test_rollback_refuses_to_bring_back_a_key_appended_after_the_push(keyed: Table) -> None:
    entry = push(keyed, rows([500], "push"))
    keyed.append(rows([7, 900], "late"))  # 7 is free: the push replaced the seed rows
    before = view(keyed)
    with pytest.raises(DuplicateKeyError, match=f"roll back push {entry}.*7") as exc:
        keyed.rollback(entry=entry)
    assert exc.value.keys == [(7,)]
    assert view(keyed) == before  # nothing committed
    assert [e.state for e in keyed.lineage() if e.id == entry] == ["COMPLETED"]
    # the way out the message names: delete the late row, then the rollback lands
    keyed.delete(keys=[7])
    assert keyed.rollback(entry=entry).changed
    ids = Table.open(keyed.uri).to_arrow().column("id").to_pylist()
    assert sorted(ids) == [*range(100), 900]


def test_rows_deleted_before_the_push_do_not_come_back_or_count(keyed: Table) -> None:
    keyed.delete(keys=[3, 4])
    entry = push(keyed, rows([500], "push"))
    keyed.append(rows([3], "late"))  # 3 was deleted in the replaced segment: no clash
    assert keyed.rollback(entry=entry).changed
    _, seen = view(keyed)
    assert sorted(i for i, _ in seen) == sorted([*(i for i in range(100) if i not in (3, 4)), 3])
    assert (3, "late") in seen


def test_rolling_back_a_staged_push_brings_nothing_back_and_is_never_refused(keyed: Table) -> None:
    entry = str(keyed.overwrite(rows([500], "push"), consistent_push=True, publish=False).entry)
    keyed.append(rows([1000], "late"))
    assert keyed.rollback(entry=entry).changed
    assert sorted(Table.open(keyed.uri).to_arrow().column("id").to_pylist()) == [*range(100), 1000]


def test_a_rival_append_landing_during_the_rollback_is_caught(keyed: Table) -> None:
    entry = push(keyed, rows([500], "push"))
    read = keyed.snapshot()  # the rollback reads here …
    Table.open(keyed.uri).append(rows([11, 4000], "rival"))  # … a rival lands before it commits
    with pytest.raises(DuplicateKeyError) as exc:
        commit_rollback(
            keyed.io, keyed.commit_log, read, entry, build=lambda cur: ops.revert(cur, entry), parameters={"entry": entry}
        )
    assert exc.value.keys == [(11,)]
    assert Table.open(keyed.uri).lineage()[-1].state == "COMPLETED"


def test_a_keyed_rollback_records_the_keys_it_brings_back(keyed: Table) -> None:
    keyed.delete(keys=[0])
    entry = push(keyed, rows([500], "push"))
    assert keyed.rollback(entry=entry).changed
    commit = keyed.commit_log.read_commit(keyed.version)
    assert commit.operation == "ROLLBACK" and commit.parameters["primary_key"] == ["id"]
    [recorded] = [a for a in commit.actions if isinstance(a, InsertedKeys)]
    assert recorded.count == 99  # the live rows that came back; racing keyed writers probe them
    # and a keyed append after it sees them
    with pytest.raises(DuplicateKeyError):
        keyed.append(rows([42], "after"))


def test_revert_effect_names_what_comes_back_and_what_stays(keyed: Table) -> None:
    seed = keyed.snapshot().visible_segment_ids()
    entry = push(keyed, rows([500], "push"))
    keyed.append(rows([900], "late"))
    snap = keyed.snapshot()
    late = [sid for sid in snap.visible_segment_ids() if sid not in snap.lineage[entry].segments_to]
    returning, staying = ops.revert_effect(snap, entry)
    assert returning == seed and staying == late
    assert snap.lineage[entry].state == "COMPLETED"  # pure: the snapshot is untouched
