"""The partition model in the log: specs on metadata actions, a partition tuple per segment,
strict validation in commits and checkpoints, and old logs reading as unpartitioned."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest
from pydantic import ValidationError

from mvtable.errors import CorruptMetadataError, InvalidLineageTransitionError
from mvtable.lineage.actions import AddSegment, Commit, MetadataAction, SegmentFile, parse_commit
from mvtable.lineage.checkpoint import checkpoint_bytes, parse_checkpoint
from mvtable.lineage.descriptors import describe
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog
from mvtable.lineage.partitioning import UNPARTITIONED, PartitionField, PartitionSpec
from mvtable.lineage.snapshot import Snapshot, apply_commit, replay
from mvtable.storage import LocalFileIO

from .test_checkpoint import SOURCE, rewrite

DAY = PartitionSpec(
    spec_id=1,
    fields=(
        PartitionField(source_id=1, field_id=1000, name="ts_day", transform="day"),
        PartitionField(source_id=2, field_id=1001, name="region", transform="identity"),
    ),
)


def seg(sid: str, spec_id: int | None = None, partition=None) -> SegmentFile:
    return SegmentFile(id=sid, path=f"data/{sid}.parquet", num_rows=3, size_bytes=30, spec_id=spec_id, partition=partition)


def meta(**kw) -> MetadataAction:
    return MetadataAction(table_id="t", table_schema={"fields": []}, **kw)


def commit(version: int, *actions) -> Commit:
    return Commit(
        version=version, read_version=version - 1, timestamp_ms=1000 + version, operation=Operation.APPEND, actions=actions
    )


def test_a_log_without_partitions_reads_as_unpartitioned() -> None:
    s = replay([commit(0, meta()), commit(1, AddSegment(segment=seg("a")))])
    assert s.partition_specs == {0: UNPARTITIONED} and s.default_spec_id == 0 and s.default_spec.fields == ()
    assert s.segments["a"].file.spec_id is None and s.segments["a"].file.partition is None


def test_unset_partition_fields_are_not_written() -> None:
    """An unpartitioned table's log stays what an mvtable from before partitions reads."""
    data = commit(0, meta(), AddSegment(segment=seg("a"))).to_json_bytes()
    assert b"spec_id" not in data and b"partition" not in data


def test_specs_and_partitions_round_trip_through_a_commit() -> None:
    c = commit(0, meta(partition_specs=(DAY,), default_spec_id=1), AddSegment(segment=seg("a", 1, (19000, "eu"))))
    back = parse_commit(c.to_json_bytes(), source="x")
    assert back == c
    s = replay([back])
    assert s.partition_specs == {0: UNPARTITIONED, 1: DAY} and s.default_spec_id == 1
    assert s.segments["a"].file.partition == (19000, "eu") and s.segments["a"].file.spec_id == 1


@pytest.mark.parametrize(
    "value",
    [[[1], "x"], [{"a": 1}, "x"], "19000"],
    ids=["list", "object", "not-a-list"],
)
def test_a_partition_value_must_be_a_json_scalar(value) -> None:
    c = commit(0, meta(partition_specs=(DAY,), default_spec_id=1), AddSegment(segment=seg("a", 1, (1, "x"))))
    data = c.to_json_bytes().decode().replace('"partition":[1,"x"]', '"partition":' + __import__("json").dumps(value))
    body = data[: data.rindex(',"crc32"')] + "}"
    with pytest.raises(CorruptMetadataError, match="partition"):
        parse_commit(body.encode().replace(b'"format":2', b'"format":1'), source="x")


def test_json_scalars_keep_their_kinds() -> None:
    s = seg("a", 1, (True, 1.5))
    back = SegmentFile.model_validate_json(s.model_dump_json(), strict=True)
    assert back.partition == (True, 1.5) and type(back.partition[0]) is bool
    with pytest.raises(ValidationError):
        seg("b", 1, (b"bytes", 1))


@pytest.mark.parametrize(
    "segment, message",
    [
        (seg("a", 2, (1, "x")), "partition spec 2 does not exist"),
        (seg("a", 1, (1,)), "has 2 values, not 1"),
        (seg("a", 1, None), "has 2 values, not 0"),
        (seg("a", None, (1, "x")), "no spec id"),
        (seg("a", 0, (1,)), "has 0 values, not 1"),
    ],
)
def test_replay_checks_a_segment_against_its_spec(segment, message) -> None:
    s = replay([commit(0, meta(partition_specs=(DAY,), default_spec_id=1))])
    with pytest.raises(InvalidLineageTransitionError, match=message):
        apply_commit(s, commit(1, AddSegment(segment=segment)))


def test_specs_only_accumulate() -> None:
    s = replay([commit(0, meta(partition_specs=(DAY,), default_spec_id=1))])
    changed = DAY.model_copy(update={"fields": DAY.fields[:1]})
    with pytest.raises(InvalidLineageTransitionError, match="cannot change"):
        apply_commit(s.copy(), commit(1, meta(partition_specs=(changed,))))
    with pytest.raises(InvalidLineageTransitionError, match="cannot be dropped"):
        apply_commit(s.copy(), commit(1, meta(partition_specs=())))
    with pytest.raises(InvalidLineageTransitionError, match="default partition spec 7"):
        apply_commit(s.copy(), commit(1, meta(default_spec_id=7)))
    # a later metadata action without specs leaves them as they were (a schema change)
    apply_commit(s, commit(1, meta(properties={"a": "b"})))
    assert s.partition_specs[1] == DAY and s.default_spec_id == 1


def test_a_spec_names_each_field_once() -> None:
    with pytest.raises(ValidationError, match="twice"):
        PartitionSpec(spec_id=1, fields=(DAY.fields[0], DAY.fields[0]))
    for text in ("identity", "year", "month", "day", "hour", "bucket[16]", "truncate[10]"):
        assert PartitionField(source_id=1, field_id=1000, name="x", transform=text).transform == text


def test_snapshot_copy_carries_the_specs() -> None:
    s = replay([commit(0, meta(partition_specs=(DAY,), default_spec_id=1))])
    c = s.copy()
    assert c.partition_specs == s.partition_specs and c.default_spec_id == 1
    c.partition_specs[5] = UNPARTITIONED
    assert 5 not in s.partition_specs


def test_descriptors_carry_the_partition_and_pickle_small() -> None:
    d = describe(seg("a", 1, (19000, None)))
    assert (d.spec_id, d.partition) == (1, (19000, None))
    back = pickle.loads(pickle.dumps(d))
    assert back == d and back.partition == (19000, None)
    assert d.to_segment_file() == seg("a", 1, (19000, None))
    plain = describe(seg("b"))
    assert len(pickle.dumps(plain)) < len(pickle.dumps(d))  # unpartitioned pickles as it did before
    assert pickle.loads(pickle.dumps(plain)).spec_id is None
    assert d != describe(seg("a", 1, (19001, None)))


def partitioned_snapshot(tmp_path) -> Snapshot:
    log = CommitLog(LocalFileIO(str(tmp_path)), check_files=False)
    read = Snapshot()
    actions = [meta(partition_specs=(DAY,), default_spec_id=1)]
    actions += [AddSegment(segment=seg(f"s{i}", 1, (19000 + i % 3, None if i == 5 else "eu"))) for i in range(6)]
    actions.append(AddSegment(segment=seg("plain")))
    return log.commit(read=read, operation=Operation.APPEND, build=lambda s: actions).snapshot


def test_checkpoint_round_trip(tmp_path) -> None:
    s = partitioned_snapshot(tmp_path)
    back = parse_checkpoint(checkpoint_bytes(s), source=SOURCE, expected_version=s.version)
    assert back == s
    assert back.partition_specs == {0: UNPARTITIONED, 1: DAY} and back.default_spec_id == 1
    assert [back.segments[f"s{i}"].file.partition for i in (0, 1, 5)] == [(19000, "eu"), (19001, "eu"), (19002, None)]
    assert back.segments["plain"].file.spec_id is None and back.segments["plain"].file.partition is None
    # segments of one partition share one tuple
    assert back.segments["s0"].file.partition is back.segments["s3"].file.partition
    assert checkpoint_bytes(back) == checkpoint_bytes(s)


def test_a_checkpoint_from_before_partitions_still_reads(tmp_path) -> None:
    log = CommitLog(LocalFileIO(str(tmp_path)), check_files=False)
    old = log.commit(read=Snapshot(), operation=Operation.APPEND, build=lambda s: [meta(), AddSegment(segment=seg("a"))]).snapshot

    def drop(t: pa.Table) -> pa.Table:
        return t.drop_columns(["spec_id", "partition"])

    def strip(doc: dict) -> None:
        del doc["partition_specs"], doc["default_spec_id"]

    back = parse_checkpoint(rewrite(checkpoint_bytes(old), table=drop, header=strip), source=SOURCE)
    assert back == old and back.partition_specs == {0: UNPARTITIONED} and back.segments["a"].file.partition is None


@pytest.mark.parametrize(
    "table, header, message",
    [
        (
            lambda t: t.set_column(t.schema.get_field_index("partition"), "partition", pa.array(['[[1],"x"]'] * t.num_rows)),
            None,
            "partition",
        ),
        (
            lambda t: t.set_column(t.schema.get_field_index("spec_id"), "spec_id", pa.array([9] * t.num_rows, pa.int64())),
            None,
            "spec 9",
        ),
        (None, lambda d: d.update(default_spec_id=4), "default partition spec 4"),
        (None, lambda d: d.update(partition_specs=d["partition_specs"] * 2), "listed twice"),
    ],
    ids=["not-scalars", "unknown-spec", "unknown-default", "spec-twice"],
)
def test_a_bad_partition_in_a_checkpoint_is_corrupt(tmp_path, table, header, message) -> None:
    s = partitioned_snapshot(tmp_path)
    with pytest.raises(CorruptMetadataError, match=message):
        parse_checkpoint(rewrite(checkpoint_bytes(s), table=table, header=header), source=SOURCE)
