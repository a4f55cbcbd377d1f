"""Field ids in stored schemas and the log's schema rules (pure)."""

from __future__ import annotations

import pytest

from mvtable.errors import CorruptMetadataError
from mvtable.lineage.actions import Commit, MetadataAction
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import Operation
from mvtable.lineage.schema_ids import FIELD_ID_KEY, breaking_change, highest_id, key_follows_ids, schema_race, with_ids
from mvtable.lineage.snapshot import replay


def f(name, type_, fid=None):
    return {"name": name, "type": type_, "nullable": True, "metadata": {FIELD_ID_KEY: fid} if fid else {}}


LEGACY = {
    "type": "struct",
    "fields": [
        f("a", "long"),
        f("s", {"type": "struct", "fields": [f("x", "integer"), f("y", "string")]}),
        f("l", {"type": "array", "elementType": {"type": "struct", "fields": [f("k", "string")]}, "containsNull": True}),
        f("b", "string"),
    ],
}


def test_ids_by_position_level_by_level():
    numbered = with_ids(LEGACY)
    top = [x["metadata"][FIELD_ID_KEY] for x in numbered["fields"]]
    assert top == [1, 2, 3, 4]
    assert [x["metadata"][FIELD_ID_KEY] for x in numbered["fields"][1]["type"]["fields"]] == [5, 6]
    assert numbered["fields"][2]["type"]["elementType"]["fields"][0]["metadata"][FIELD_ID_KEY] == 7
    assert highest_id(LEGACY) == 7
    assert with_ids(numbered) is numbered and "metadata" in LEGACY["fields"][0] and not LEGACY["fields"][0]["metadata"]


def test_breaking_change_is_rename_drop_or_type_change():
    old = with_ids(LEGACY)
    added = {**old, "fields": [*old["fields"], f("c", "long", 8)]}
    assert breaking_change(old, added) is None
    renamed = {**old, "fields": [{**old["fields"][0], "name": "aa"}, *old["fields"][1:]]}
    assert "renamed to aa" in breaking_change(old, renamed)
    assert "dropped" in breaking_change(old, {**old, "fields": old["fields"][:3]})
    widened = {**old, "fields": [*old["fields"][:3], {**old["fields"][3], "type": "binary"}]}
    assert "changed type" in breaking_change(old, widened)


def test_schema_race_rules():
    assert schema_race(1, 1, changes_schema=True, adds_files=True, break_version=9, read_version=0) is None
    assert "schema changed" in schema_race(1, 2, changes_schema=True, adds_files=False, break_version=-1, read_version=5)
    assert schema_race(1, 2, changes_schema=False, adds_files=True, break_version=3, read_version=5) is None
    assert "renamed, dropped or retyped at version 6" in schema_race(
        1, 2, changes_schema=False, adds_files=True, break_version=6, read_version=5
    )


def _commit(version, action, op=Operation.UPDATE_SCHEMA):
    return Commit(version=version, read_version=version - 1, timestamp_ms=version + 1, operation=op, actions=(action,))


def test_replay_tracks_schema_id_break_version_and_key_renames():
    first = MetadataAction(table_id="t", table_schema=LEGACY, primary_key=("a",))
    numbered = with_ids(LEGACY)
    renamed = {**numbered, "fields": [{**numbered["fields"][0], "name": "key"}, *numbered["fields"][1:]]}
    added = {**renamed, "fields": [*renamed["fields"], f("c", "long", 8)]}
    s = replay(
        [
            _commit(0, first, Operation.CREATE),
            _commit(1, MetadataAction(table_id="t", table_schema=renamed, primary_key=("key",), schema_id=1, last_field_id=7)),
            _commit(2, MetadataAction(table_id="t", table_schema=added, schema_id=2, last_field_id=8)),
        ]
    )
    assert (s.schema_id, s.last_field_id, s.schema_break_version, s.primary_key) == (2, 8, 1, ("key",))
    back = parse_checkpoint(checkpoint_bytes(s), source="cp")
    assert (back.schema_id, back.last_field_id, back.schema_break_version) == (2, 8, 1)
    assert key_follows_ids(LEGACY, ("a",), renamed, ("key",))
    assert not key_follows_ids(LEGACY, ("a",), renamed, ("b",))


def test_a_key_that_changes_columns_or_an_id_that_goes_down_is_corrupt():
    first = MetadataAction(table_id="t", table_schema=LEGACY, primary_key=("a",), last_field_id=7)
    other_key = MetadataAction(table_id="t", table_schema=LEGACY, primary_key=("b",))
    with pytest.raises(CorruptMetadataError, match="primary key"):
        replay([_commit(0, first, Operation.CREATE), _commit(1, other_key)])
    lower = MetadataAction(table_id="t", table_schema=LEGACY, last_field_id=3)
    with pytest.raises(CorruptMetadataError, match="highest field id"):
        replay([_commit(0, first, Operation.CREATE), _commit(1, lower)])
