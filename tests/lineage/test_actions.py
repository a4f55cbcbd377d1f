"""Parsing of commit files: every hostile or corrupt input gives a typed error naming the file."""

from __future__ import annotations

import json

import pytest

from mvtable.errors import CorruptMetadataError, MvTableError, UnsafePathError, UnsupportedFormatError
from mvtable.lineage.actions import (
    CHECKSUM_KEY,
    AddSegment,
    Commit,
    DeletionVectorRef,
    LineageEnd,
    LineagePurge,
    LineageRevert,
    LineageStart,
    MetadataAction,
    RemoveSegment,
    RowGroupInfo,
    SegmentFile,
    SetDeletionVector,
    parse_commit,
    seal,
)
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitLog, commit_path
from mvtable.paths import check_relative_path
from mvtable.storage import LocalFileIO

SOURCE = "/tables/t/_mvtable/log/00000000000000000003.json"


def segment(sid: str = "seg-1", **kw) -> SegmentFile:
    fields = dict(
        id=sid,
        path=f"data/{sid}.parquet",
        num_rows=10,
        size_bytes=1234,
        row_groups=(
            RowGroupInfo(num_rows=6, first_row=0, total_byte_size=700, stats={"a": {"min": 1, "max": 9, "null_count": 0}}),
            RowGroupInfo(num_rows=4, first_row=6, total_byte_size=534),
        ),
    )
    fields.update(kw)
    return SegmentFile(**fields)


def full_commit(version: int = 3) -> Commit:
    return Commit(
        version=version,
        read_version=version - 1,
        timestamp_ms=1_700_000_000_000,
        operation=Operation.APPEND,
        parameters={"mode": "append", "txn": "abc", "nested": {"x": [1, 2, None]}},
        writer="mvtable test",
        metrics={"rows": 10, "seconds": 0.5},
        actions=(
            MetadataAction(table_id="t-1", table_schema={"fields": [{"name": "a", "type": "long"}]}, properties={"k": "v"}),
            AddSegment(segment=segment("s1")),
            AddSegment(segment=segment("s2"), lineage_entry="e1"),
            RemoveSegment(segment_id="s0"),
            SetDeletionVector(segment_id="s1", dv=DeletionVectorRef(cardinality=2, inline="AAAA")),
            SetDeletionVector(segment_id="s1", dv=DeletionVectorRef(cardinality=3, path="_mvtable/dv/u.dv", offset=4, size=40)),
            LineageStart(entry_id="e1", segments_from=("s0",), segments_to=("s3",)),
            LineageEnd(entry_id="e1"),
            LineageRevert(entry_id="e1"),
            LineagePurge(entry_id="e1"),
        ),
    )


def raw_commit(version: int = 3) -> dict:
    return json.loads(full_commit(version).to_json_bytes())


def encode(doc) -> bytes:
    """``doc`` written as a commit file of this release: sealed with its checksum."""
    doc = {k: v for k, v in doc.items() if k != CHECKSUM_KEY} if isinstance(doc, dict) else doc
    text = json.dumps(doc).encode()
    return seal(text) if isinstance(doc, dict) and doc else text


def parse_error(data: bytes, expected_version: int | None = 3) -> CorruptMetadataError:
    with pytest.raises(CorruptMetadataError) as info:
        parse_commit(data, source=SOURCE, expected_version=expected_version)
    err = info.value
    assert err.path == SOURCE and err.message.startswith(SOURCE), "the error must name the file"
    assert isinstance(err, MvTableError)
    return err


# -- the happy path -------------------------------------------------------------------------
def test_every_action_kind_round_trips() -> None:
    c = full_commit()
    assert parse_commit(c.to_json_bytes(), source=SOURCE, expected_version=3) == c
    assert [a.kind for a in c.actions] == [
        "metadata",
        "add",
        "add",
        "remove",
        "dv",
        "dv",
        "lineage_start",
        "lineage_end",
        "lineage_revert",
        "lineage_purge",
    ]


def test_minimal_commit_parses_with_defaults() -> None:
    doc = {"format": 2, "version": 0, "read_version": -1, "timestamp_ms": 0, "operation": "CREATE"}
    c = parse_commit(encode(doc), source=SOURCE)
    assert c.actions == () and c.parameters == {} and c.writer == ""
    legacy = {**doc, "format": 1}  # written before commits had checksums: none to check
    assert parse_commit(json.dumps(legacy).encode(), source=SOURCE).format == 1


def test_segment_without_row_group_metadata_is_accepted() -> None:
    assert segment(row_groups=()).row_groups == ()


# -- not JSON / not a commit -----------------------------------------------------------------
@pytest.mark.parametrize("cut", [0, 1, 17, 100, -40, -1])
def test_truncated_json(cut: int) -> None:
    data = full_commit().to_json_bytes()
    err = parse_error(data[:cut])
    assert "JSON" in err.problem or "invalid" in err.problem


@pytest.mark.parametrize(
    "data",
    [b"", b"   ", b"\xff\xfe\x00garbage", b"null", b"[]", b'"commit"', b"42", b"[" * 100_000, b'{"a":' * 100_000],
    ids=["empty", "blank", "binary", "null", "array", "string", "number", "deep-array", "deep-object"],
)
def test_not_a_commit_object(data: bytes) -> None:
    err = parse_error(data)
    assert not isinstance(err, UnsupportedFormatError)


# -- wrong types -----------------------------------------------------------------------------
def _with(path: tuple, value):
    doc = raw_commit()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


@pytest.mark.parametrize(
    "path,value",
    [
        (("version",), "3"),
        (("version",), True),
        (("version",), 3.0),
        (("version",), -1),
        (("version",), None),
        (("read_version",), -2),
        (("timestamp_ms",), -5),
        (("timestamp_ms",), "yesterday"),
        (("operation",), 7),
        (("parameters",), ["not", "a", "dict"]),
        (("metrics",), {"rows": "ten"}),
        (("actions",), {"kind": "add"}),
        (("actions",), "add"),
        (("actions", 0), 17),
        (("actions", 1, "segment"), "s1"),
        (("actions", 1, "segment", "num_rows"), "10"),
        (("actions", 1, "segment", "num_rows"), -10),
        (("actions", 1, "segment", "size_bytes"), 1.5),
        (("actions", 1, "segment", "id"), ""),
        (("actions", 1, "segment", "id"), "a/b"),
        (("actions", 1, "segment", "id"), 5),
        (("actions", 1, "segment", "row_groups"), {"num_rows": 10}),
        (("actions", 1, "segment", "row_groups", 0, "first_row"), -1),
        (("actions", 3, "segment_id"), None),
        (("actions", 4, "dv", "cardinality"), -1),
        (("actions", 6, "segments_from"), "s0"),
        (("actions", 6, "segments_from"), [1, 2]),
        (("actions", 1, "lineage_entry"), ["e1"]),
        (("actions", 1, "surprise"), 1),  # extra fields are refused
        (("surprise",), 1),
    ],
)
def test_wrong_types(path: tuple, value) -> None:
    parse_error(encode(_with(path, value)))


def test_missing_required_field() -> None:
    doc = raw_commit()
    del doc["operation"]
    parse_error(encode(doc))


@pytest.mark.parametrize("kind", ["delete_everything", "", None, 5, "ADD"])
def test_unknown_action_kind(kind) -> None:
    doc = raw_commit()
    doc["actions"][1]["kind"] = kind
    err = parse_error(encode(doc))
    assert not isinstance(err, UnsafePathError)


def test_action_without_kind() -> None:
    doc = raw_commit()
    del doc["actions"][0]["kind"]
    parse_error(encode(doc))


# -- format versions -------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", [3, 0, 999, "2", None, [2]])
def test_unknown_format_version(fmt) -> None:
    doc = raw_commit()
    doc["format"] = fmt
    err = parse_error(encode(doc))
    assert isinstance(err, UnsupportedFormatError)


def test_missing_format_version() -> None:
    doc = raw_commit()
    del doc["format"]
    assert isinstance(parse_error(encode(doc)), UnsupportedFormatError)


@pytest.mark.parametrize("fmt", [True, 1.0])
def test_format_version_of_the_wrong_type(fmt) -> None:
    doc = raw_commit()
    doc["format"] = fmt
    parse_error(encode(doc))


# -- paths -----------------------------------------------------------------------------------
UNSAFE_PATHS = [
    "../x",
    "data/../../x",
    "data/..",
    "./data/x",
    "/etc/passwd",
    "\\\\server\\share\\x",
    "s3://other/x",
    "file:///etc/passwd",
    "C:\\x",
    "C:/x",
    "c:x",
    "a//b",
    "a/",
    "data\\..\\x",
    "~/x",
    "~root/x",
    "data/x\x00.parquet",
    "",
]


@pytest.mark.parametrize("bad", UNSAFE_PATHS)
def test_check_relative_path_refuses(bad: str) -> None:
    with pytest.raises(UnsafePathError):
        check_relative_path(bad, source="here")


@pytest.mark.parametrize("good", ["data/a.parquet", "data/x-1_2.attempt-3.parquet", "_mvtable/dv/0f.dv", "a", "a..b/c"])
def test_check_relative_path_accepts(good: str) -> None:
    assert check_relative_path(good) == good


@pytest.mark.parametrize("bad", UNSAFE_PATHS)
def test_unsafe_segment_path_in_a_commit(bad: str) -> None:
    err = parse_error(encode(_with(("actions", 1, "segment", "path"), bad)))
    assert isinstance(err, UnsafePathError), err
    assert "unsafe path" in err.problem


@pytest.mark.parametrize("bad", ["../x.dv", "/tmp/x.dv", "s3://other/x.dv", "C:\\x.dv", "a//b.dv"])
def test_unsafe_deletion_vector_path_in_a_commit(bad: str) -> None:
    err = parse_error(encode(_with(("actions", 5, "dv", "path"), bad)))
    assert isinstance(err, UnsafePathError), err


def test_unsafe_path_cannot_be_constructed_either() -> None:
    with pytest.raises(ValueError):
        segment(path="../escape.parquet")


# -- versions ----------------------------------------------------------------------------------
def test_version_in_file_differs_from_its_name() -> None:
    err = parse_error(full_commit(version=4).to_json_bytes(), expected_version=3)
    assert "4" in err.problem and "3" in err.problem


def test_log_names_the_file_of_a_misnumbered_commit(tmp_path) -> None:
    log = CommitLog(LocalFileIO(str(tmp_path)), check_files=False)
    log.io.write(commit_path(3), full_commit(version=4).to_json_bytes())
    with pytest.raises(CorruptMetadataError) as info:
        log.read_commit(3)
    assert info.value.path.endswith("_mvtable/log/00000000000000000003.json")
    assert str(tmp_path) in info.value.path


# -- row groups ------------------------------------------------------------------------------
def _rg(num_rows: int, first_row: int) -> dict:
    return {"num_rows": num_rows, "first_row": first_row, "total_byte_size": 1}


@pytest.mark.parametrize(
    "groups,num_rows",
    [
        ([_rg(6, 0), _rg(3, 6)], 10),  # too few rows
        ([_rg(6, 0), _rg(5, 6)], 10),  # too many rows
        ([_rg(6, 0), _rg(4, 7)], 10),  # a gap
        ([_rg(6, 0), _rg(4, 5)], 10),  # an overlap
        ([_rg(10, 1)], 10),  # does not start at row 0
        ([_rg(4, 6), _rg(6, 0)], 10),  # out of file order
        ([_rg(0, 0)], 10),
    ],
    ids=["too-few", "too-many", "gap", "overlap", "offset", "unordered", "empty-group"],
)
def test_row_groups_must_cover_the_segment(groups, num_rows) -> None:
    doc = _with(("actions", 1, "segment", "row_groups"), groups)
    doc["actions"][1]["segment"]["num_rows"] = num_rows
    err = parse_error(encode(doc))
    assert "row" in err.problem


# -- deletion vector descriptors ----------------------------------------------------------
@pytest.mark.parametrize("dv", [{"cardinality": 1}, {"cardinality": 1, "inline": "AA", "path": "_mvtable/dv/x.dv"}])
def test_deletion_vector_needs_exactly_one_location(dv) -> None:
    parse_error(encode(_with(("actions", 4, "dv"), dv)))


# -- the commit's checksum -------------------------------------------------------------------
def test_every_commit_is_sealed_and_every_flip_is_caught() -> None:
    data = full_commit().to_json_bytes()
    assert data.endswith(b'"}') and f',"{CHECKSUM_KEY}":"'.encode() in data[-20:]
    assert json.loads(data)["format"] == 2
    for i in range(0, len(data), 7):
        for bit in (0, 3, 6):
            bad = bytearray(data)
            bad[i] ^= 1 << bit
            with pytest.raises(CorruptMetadataError):
                parse_commit(bytes(bad), source=SOURCE)


def test_a_commit_without_its_checksum_must_be_format_1() -> None:
    doc = raw_commit()
    del doc[CHECKSUM_KEY]
    err = parse_error(json.dumps(doc).encode())
    assert "without its checksum" in err.problem
    doc["format"] = 1  # as the release before checksums wrote it
    assert parse_commit(json.dumps(doc).encode(), source=SOURCE, expected_version=3).format == 1
