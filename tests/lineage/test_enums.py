"""Lineage states and operation names are enums whose values are the strings the log has
always stored: old files parse, new files hold the same bytes, and unknown names are
typed errors instead of silently odd histories."""

from __future__ import annotations

import json

import pytest

from mvtable.errors import CorruptMetadataError
from mvtable.lineage.actions import AddSegment, Commit, LineageStart, MetadataAction, SegmentFile, parse_commit
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.snapshot import Snapshot, apply_commit
from mvtable.lineage.summary import parse_commit_summary

# The on-disk vocabulary. Changing a value here breaks every existing table: don't.
STORED_OPERATIONS = {
    "CREATE",
    "APPEND",
    "OVERWRITE",
    "PUSH_START",
    "PUSH_STAGE",
    "CONSISTENT_PUSH",
    "PUSH_ABORT",
    "PUBLISH",
    "ROLLBACK",
    "RESTORE",
    "DELETE",
    "RETENTION",
}


def test_values_are_the_stored_strings() -> None:
    assert {o.value for o in Operation} >= STORED_OPERATIONS
    assert all(o.name == o.value for o in Operation)
    assert [s.value for s in LineageState] == ["IN_PROGRESS", "COMPLETED", "REVERTED"]


@pytest.mark.parametrize("member", [Operation.PUSH_START, LineageState.COMPLETED])
def test_members_print_and_compare_as_their_value(member: Operation | LineageState) -> None:
    assert member == member.value and isinstance(member, str)
    assert f"{member}" == str(member) == "%s" % member == member.value  # noqa: UP031  (%-format is what logging uses)
    assert f"{member:>20}" == f"{member.value:>20}"
    assert json.dumps({"x": member}) == json.dumps({"x": member.value})


def _doc(operation: str) -> bytes:
    return json.dumps(
        {"format": 1, "version": 0, "read_version": -1, "timestamp_ms": 5, "operation": operation, "actions": []}
    ).encode()


@pytest.mark.parametrize("name", sorted(STORED_OPERATIONS))
def test_existing_commit_files_parse_to_members(name: str) -> None:
    commit = parse_commit(_doc(name), source="00.json")
    assert commit.operation is Operation(name)
    assert json.loads(commit.to_json_bytes())["operation"] == name  # written back unchanged
    assert parse_commit_summary(_doc(name), source="00.json").operation is Operation(name)


@pytest.mark.parametrize("name", ["append", "MERGE", ""])
def test_unknown_operation_is_a_typed_error_naming_the_file(name: str) -> None:
    with pytest.raises(CorruptMetadataError, match="00.json.*operation"):
        parse_commit(_doc(name), source="00.json")
    with pytest.raises(CorruptMetadataError, match="00.json.*operation"):
        parse_commit_summary(_doc(name), source="00.json")


def test_checkpoint_round_trips_states_and_operations() -> None:
    s = Snapshot()
    seg = SegmentFile(id="a", path="data/a.parquet", num_rows=1, size_bytes=1)
    for v, op, actions in [
        (0, Operation.CREATE, (MetadataAction(table_id="t", table_schema={}), AddSegment(segment=seg))),
        (1, Operation.PUSH_START, (LineageStart(entry_id="e", segments_from=("a",)),)),
    ]:
        apply_commit(s, Commit(version=v, read_version=v - 1, timestamp_ms=10 + v, operation=op, actions=actions))
    back = parse_checkpoint(checkpoint_bytes(s), source="cp", expected_version=1)
    assert [h.operation for h in back.history] == [Operation.CREATE, Operation.PUSH_START]
    assert all(type(h.operation) is Operation for h in back.history)
    assert back.lineage["e"].state is LineageState.IN_PROGRESS
