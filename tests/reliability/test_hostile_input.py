"""Hostile and broken input at the table level, and time-bounded fuzzing of the log,
checkpoint and deletion-vector parsers. Every bad input gives a typed error naming the
file and the problem; none gives a wrong answer or deletes anything outside the table.

Fuzz budget per parser: ``MVTABLE_FUZZ_SECONDS`` (default 8 s)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.stats import Predicate
from mvtable.errors import (
    CommitConflictError,
    CorruptDeletionVectorError,
    CorruptMetadataError,
    CorruptSegmentError,
    SchemaMismatchError,
    UnsafePathError,
    UnsupportedFormatError,
)
from mvtable.lineage.actions import CHECKSUM_KEY, parse_commit, seal
from mvtable.lineage.checkpoint import parse_checkpoint
from mvtable.visibility import decode_dv, encode_dv

FUZZ_SECONDS = float(os.environ.get("MVTABLE_FUZZ_SECONDS", "8"))


def rows(n0: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n0, n0 + n), pa.int64())})


@pytest.fixture
def t(tmp_path) -> Table:
    table = Table.create(
        str(tmp_path / "t"), schema=rows(0, 1).schema, properties={"checkpointInterval": "3", "dvInlineMaxBytes": "0"}
    )
    table.append(rows(0, 100))
    table.delete(pc.field("id") < 10)
    table.append(rows(100, 5))  # version 3: a checkpoint
    table.append(rows(200, 5))  # version 4: only in its commit file
    return table


def log_file(t: Table, v: int, kind: str = "json") -> str:
    return os.path.join(t.uri, "_mvtable", "log", f"{v:020d}.{kind}")


def edit_commit(t: Table, v: int, change) -> None:
    path = log_file(t, v)
    doc = json.load(open(path))
    doc.pop(CHECKSUM_KEY)
    change(doc)
    # re-sealed: the content is hostile, not damaged (a damaged file fails its checksum first)
    open(path, "wb").write(seal(json.dumps(doc).encode()))


def test_truncated_newest_commit_names_the_file(t):
    path = log_file(t, t.version)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])
    with pytest.raises(CorruptMetadataError, match=f"{t.version:020d}.json"):
        Table.open(t.uri).scan().count()


def test_unknown_format_version(t):
    edit_commit(t, 1, lambda d: d.update(format=99))
    with pytest.raises(UnsupportedFormatError, match="format version 99"):
        Table.open(t.uri).scan(version=1)


@pytest.mark.parametrize("bad", ["../victim.parquet", "/etc/passwd", "s3://other-bucket/x.parquet", "data/../../victim"])
def test_escaping_paths_never_reach_storage(t, tmp_path, bad):
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"precious")

    def poison(doc):
        for a in doc["actions"]:
            if a["kind"] == "add":
                a["segment"]["path"] = bad

    edit_commit(t, 4, poison)
    fresh = Table.open(t.uri)
    with pytest.raises(UnsafePathError, match=f"{4:020d}.json: .*unsafe path"):
        fresh.scan().count()
    with pytest.raises(UnsafePathError):
        fresh.vacuum(retention="0s", force=True)
    with pytest.raises(UnsafePathError):
        fresh.collect_garbage()
    assert victim.read_bytes() == b"precious"
    assert fresh.scan(version=3).count() == 95  # older versions are still served exactly


def test_hand_edited_dv_path_and_cardinality(t):
    v = next(h.version for h in t.history() if h.operation == "DELETE")

    def lie(doc):
        for a in doc["actions"]:
            if a["kind"] == "dv":
                a["dv"]["cardinality"] += 1

    edit_commit(t, v, lie)
    with pytest.raises(CorruptDeletionVectorError, match="holds 10 positions but the descriptor says 11"):
        Table.open(t.uri).scan(version=v).count()


def test_corrupt_checkpoint_with_full_log_still_reads_exactly(t):
    expected = sorted(t.to_arrow().column("id").to_pylist())
    open(log_file(t, 3, "checkpoint.parquet"), "w").write('{"format": 1, "version": 3, "segments": "nope"}')
    assert sorted(Table.open(t.uri).to_arrow().column("id").to_pylist()) == expected


def test_corrupt_statistics_in_a_checkpoint_fail_only_the_filter_that_reads_them(t):
    """Checkpoint statistics are parsed when a filter first needs them (format 2): a bad
    one must then be the typed error naming the checkpoint, and reads without a filter
    are unaffected."""
    import zlib

    import pyarrow.parquet as pq

    from mvtable.lineage.checkpoint import FILE_CRC_KEY, HEADER_CRC_KEY, HEADER_KEY, seal_file_crc

    path = log_file(t, 3, "checkpoint.parquet")
    pf = pq.ParquetFile(path)
    table = pf.read()
    groups = table.column("row_groups").to_pylist()
    groups[0][0]["stats"] = '{"id": {"min": "zero", "max": 9, "null_count": -1}}'
    i = table.schema.get_field_index("row_groups")
    table = table.set_column(i, table.schema.field(i), pa.array(groups, table.schema.field(i).type))
    doc = pf.metadata.metadata[HEADER_KEY]
    meta = {HEADER_KEY: doc, HEADER_CRC_KEY: b"%08x" % zlib.crc32(doc), FILE_CRC_KEY: b"00000000"}
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(meta), sink)
    with open(path, "wb") as f:  # sealed: the statistics are hostile, the file is not damaged
        f.write(seal_file_crc(sink.getvalue().to_pybytes()))
    for v in range(0, 3):  # only the checkpoint knows versions 0..3 now
        os.unlink(log_file(t, v))
    fresh = Table.open(t.uri)
    assert fresh.scan().count() == 100 - 10 + 5 + 5
    with pytest.raises(CorruptMetadataError) as info:
        fresh.scan(predicates=[Predicate("id", ">", 50)]).count()
    assert info.value.path.endswith("00000000000000000003.checkpoint.parquet")


def test_lying_row_group_metadata_is_caught(t):
    def lie(doc):
        for a in doc["actions"]:
            if a["kind"] == "add":
                a["segment"]["row_groups"][0]["num_rows"] -= 1
                a["segment"]["num_rows"] -= 1

    edit_commit(t, 1, lie)
    with pytest.raises(CorruptSegmentError, match=r"row groups \[0\] have 100 rows, the log says 99"):
        Table.open(t.uri).scan(version=1).count()


def _append_with_schema(uri: str, kind: str, barrier, out) -> None:
    schema = {"long": pa.int64(), "string": pa.string()}[kind]
    data = pa.table({"id": pa.array([1, 2], schema) if kind == "long" else pa.array(["a", "b"])})
    barrier.wait()
    try:
        Table(uri).append(data)
        out.put(("ok", kind))
    except (SchemaMismatchError, CommitConflictError) as exc:
        out.put(("typed", type(exc).__name__))
    except Exception as exc:  # pragma: no cover - the assertion below reports it
        out.put(("untyped", repr(exc)))


def test_schema_drift_between_concurrent_creators(tmp_path):
    ctx = mp.get_context("spawn")
    uri = str(tmp_path / "drift")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_append_with_schema, args=(uri, k, barrier, out)) for k in ("long", "string")]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    kinds = sorted(r[0] for r in results)
    assert kinds == ["ok", "typed"], results
    t = Table.open(uri)
    assert t.scan().count() == 2 and t.version == 0


# -- fuzzing (bounded by time; reports the number of inputs) -------------------------------
def _mutations(seed: bytes, rng: random.Random):
    data = bytearray(seed)
    choice = rng.randrange(6)
    if choice == 0 and data:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif choice == 1:
        data = data[: rng.randrange(len(data) + 1)]
    elif choice == 2 and data:
        i = rng.randrange(len(data))
        data = data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[i:]
    elif choice == 3:  # a structurally valid JSON value of the wrong shape
        data = bytearray(
            json.dumps(rng.choice([None, 1, "x", [], {"format": 1}, {"format": 1, "version": -1}, [1] * 5])).encode()
        )
    elif choice == 4:  # swap a JSON value for another type
        text = data.decode(errors="replace")
        for old, new in ((":0", ':"0"'), (":1", ":-1"), ('"add"', '"bogus"'), (":true", ":null"), ("[", "{")):
            if old in text and rng.random() < 0.5:
                text = text.replace(old, new, 1)
        data = bytearray(text.encode())
    else:
        data = bytearray(os.urandom(rng.randint(0, 64)))
    return bytes(data)


def _unsealed(data: bytes) -> dict:
    doc = json.loads(data)
    doc.pop(CHECKSUM_KEY)
    return doc


def _fuzz(parse, seeds: list[bytes], ok_errors: tuple[type[BaseException], ...]) -> int:
    rng = random.Random(1234)
    deadline = time.monotonic() + FUZZ_SECONDS
    n = 0
    while time.monotonic() < deadline:
        data = _mutations(rng.choice(seeds), rng)
        n += 1
        try:
            parse(data)
        except ok_errors:
            pass
    return n


def test_fuzz_log_and_checkpoint_parsers(t):
    commits = [open(log_file(t, v), "rb").read() for v in range(t.version + 1)]
    # the same commits as format 1 wrote them (no checksum), so mutations reach the validation
    commits += [json.dumps({**_unsealed(c), "format": 1}).encode() for c in commits]
    checkpoint = open(log_file(t, 3, "checkpoint.parquet"), "rb").read()
    n1 = _fuzz(lambda d: parse_commit(d, source="fuzz"), commits, (CorruptMetadataError,))
    n2 = _fuzz(lambda d: parse_checkpoint(d, source="fuzz"), [checkpoint], (CorruptMetadataError,))
    print(f"\nfuzz: {n1} commit inputs, {n2} checkpoint inputs, only typed errors")
    assert n1 > 100 and n2 > 100


def test_fuzz_dv_decoder():
    seeds = [encode_dv(set(range(0, 5000, 3))), encode_dv({1, 2**33, 2**40 + 7}), encode_dv(set())]
    originals = set(seeds)
    wrong = []

    def parse(data: bytes):
        bm = decode_dv(data, source="fuzz")
        if data not in originals and encode_dv(bm) not in originals:
            wrong.append(data)  # decoded something new: fine only if it re-encodes to itself
            if encode_dv(bm) != data and decode_dv(encode_dv(bm), source="re") != bm:
                raise AssertionError("decoder accepted bytes it cannot round-trip")

    n = _fuzz(parse, seeds, (CorruptDeletionVectorError,))
    print(f"\nfuzz: {n} deletion-vector inputs, only typed errors")
    assert n > 100
