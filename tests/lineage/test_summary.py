"""GC's summaries of the log: replaying summaries must agree with replaying full commits on
everything a summary keeps, and a bad commit file must still give a typed error."""

from __future__ import annotations

import json
import random

import pytest

from mvtable.errors import CorruptMetadataError, UnsafePathError, UnsupportedFormatError
from mvtable.lineage.actions import (
    CHECKSUM_KEY,
    AddSegment,
    Commit,
    DeletionVectorRef,
    MetadataAction,
    RemoveSegment,
    SegmentFile,
    SetDeletionVector,
    seal,
)
from mvtable.lineage.enums import Operation
from mvtable.lineage.snapshot import Snapshot, apply_commit
from mvtable.lineage.summary import TableSummary, apply_summary, parse_commit_summary, summarize


def _commit(version: int, actions: list, *, operation: Operation = Operation.APPEND) -> Commit:
    return Commit(
        version=version, read_version=version - 1, timestamp_ms=1000 + version, operation=operation, actions=tuple(actions)
    )


# a distinct operation per kind of commit, so a summary that mixed up commits would show
_OPERATION_OF = {
    AddSegment: Operation.APPEND,
    SetDeletionVector: Operation.DELETE,
    RemoveSegment: Operation.OVERWRITE,
    MetadataAction: Operation.RESTORE,
}


def _random_log(seed: int, n: int = 60) -> list[Commit]:
    rng = random.Random(seed)
    commits = [
        _commit(0, [MetadataAction(table_id="t", table_schema={"a": "long"}, properties={"k": "0"})], operation=Operation.CREATE)
    ]
    live: list[str] = []
    for v in range(1, n):
        roll = rng.random()
        if roll < 0.4 or not live:
            sids = [f"s{v}x{i}" for i in range(rng.randint(1, 3))]
            live += sids
            acts = [AddSegment(segment=SegmentFile(id=s, path=f"data/{s}.parquet", num_rows=10, size_bytes=1)) for s in sids]
        elif roll < 0.75:
            hit = rng.sample(live, k=min(len(live), rng.randint(1, 3)))
            acts = [
                SetDeletionVector(
                    segment_id=s,
                    dv=(
                        DeletionVectorRef(cardinality=1, inline="AAAA")
                        if rng.random() < 0.3
                        else DeletionVectorRef(cardinality=1, path=f"_mvtable/dv/{v}.dv", offset=4, size=9)
                    ),
                )
                for s in hit
            ]
        elif roll < 0.9:
            gone = rng.choice(live)
            live.remove(gone)
            acts = [RemoveSegment(segment_id=gone)]
        else:
            acts = [MetadataAction(table_id="t", table_schema={"a": "long"}, properties={"k": str(v)})]
        commits.append(_commit(v, acts, operation=_OPERATION_OF[type(acts[0])]))
    return commits


@pytest.mark.parametrize("seed", range(8))
def test_summary_replay_matches_full_replay_at_every_version(seed):
    commits = _random_log(seed)
    full = Snapshot()
    light = TableSummary()
    for commit in commits:
        apply_commit(full, commit)
        apply_summary(light, parse_commit_summary(commit.to_json_bytes(), source="x", expected_version=commit.version))
        assert light == summarize(full)
    assert light.dv_paths == {ref.path for ref in full.dvs.values() if ref.path}


def test_summary_continues_from_a_summarised_snapshot():
    commits = _random_log(99)
    full = Snapshot()
    for commit in commits[:30]:
        apply_commit(full, commit)
    light = summarize(full)
    for commit in commits[30:]:
        apply_commit(full, commit)
        apply_summary(light, parse_commit_summary(commit.to_json_bytes(), source="x"))
    assert light == summarize(full)


def test_summary_rejects_a_gap():
    light = TableSummary()
    with pytest.raises(CorruptMetadataError, match="does not follow"):
        apply_summary(light, parse_commit_summary(_commit(1, []).to_json_bytes(), source="x"))


def _doc(**changes) -> bytes:
    doc = json.loads(
        _commit(
            3, [SetDeletionVector(segment_id="a", dv=DeletionVectorRef(cardinality=1, path="_mvtable/dv/x.dv"))]
        ).to_json_bytes()
    )
    doc.pop(CHECKSUM_KEY)
    doc.update(changes)
    return seal(json.dumps(doc).encode())  # as written by this release: the content is what is wrong


@pytest.mark.parametrize(
    "data, error, match",
    [
        (b"{not json", CorruptMetadataError, "not valid JSON"),
        (b"[1, 2]", CorruptMetadataError, "JSON object"),
        (_doc(format=3), UnsupportedFormatError, "format version 3"),
        (_doc(format=True), UnsupportedFormatError, "format version"),
        (_doc(version="3"), CorruptMetadataError, "version must be"),
        (_doc(version=4), CorruptMetadataError, "expected 3"),
        (_doc(timestamp_ms=-1), CorruptMetadataError, "timestamp_ms"),
        (_doc(actions={"kind": "dv"}), CorruptMetadataError, "'actions' a list"),
        (_doc(actions=[{"no": "kind"}]), CorruptMetadataError, "has no 'kind'"),
        (_doc(actions=[{"kind": "dv", "segment_id": "", "dv": {}}]), CorruptMetadataError, "segment_id"),
        (_doc(actions=[{"kind": "dv", "segment_id": "a/../b", "dv": {}}]), CorruptMetadataError, "segment_id"),
        (_doc(actions=[{"kind": "dv", "segment_id": "a", "dv": "x"}]), CorruptMetadataError, "invalid content"),
        (_doc(actions=[{"kind": "dv", "segment_id": "a", "dv": {"cardinality": 1}}]), CorruptMetadataError, "exactly one"),
        (_doc(actions=[{"kind": "dv", "segment_id": "a", "dv": {"path": "../../etc/passwd"}}]), UnsafePathError, "unsafe path"),
        (_doc(actions=[{"kind": "remove"}]), CorruptMetadataError, "segment_id"),
        (_doc(actions=[{"kind": "add", "segment": {"path": "/etc/passwd"}}]), UnsafePathError, "unsafe path"),
        (_doc(actions=[{"kind": "add", "segment": {}}]), CorruptMetadataError, "segment.path"),
        (_doc(actions=[{"kind": "metadata", "properties": {"k": 1}}]), CorruptMetadataError, "properties"),
    ],
)
def test_bad_commit_files_are_typed_errors_naming_the_file(data, error, match):
    with pytest.raises(error, match=match) as info:
        parse_commit_summary(data, source="t/_mvtable/log/3.json", expected_version=3)
    assert "t/_mvtable/log/3.json" in str(info.value)
