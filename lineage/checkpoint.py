"""Log checkpoints: the whole snapshot at one version.

Planning reads one file plus the commits after it instead of the whole log. Pure (bytes in, snapshot
out).

**Format** (``_mvtable/log/<version:020d>.checkpoint.parquet``, checkpoint format 3): a
Parquet file with one row per segment (``SEGMENT_SCHEMA``: the descriptor, the versions it
was added/removed at, its lineage entry, its row groups as a list of structs whose ``stats``
is the row group's statistics as JSON text, and its current deletion vector, if any, as
``dv_*`` columns), zstd-compressed with page checksums. Everything else (format, version,
timestamp, table id, schema, properties, lineage entries, and the history as three parallel
lists) is one JSON document in the footer's key-value metadata under ``mvtable.checkpoint``,
with its CRC-32 (8 hex digits) under ``mvtable.checkpoint.crc32``.

**The whole file is checksummed** (format 3): the footer's key-value metadata holds
``mvtable.checkpoint.file_crc32``, the CRC-32 of every byte of the file with that value's
own 8 hex digits read as ``00000000`` (the way IP and ext4 checksum a header that holds its
own checksum). Page checksums and the document's CRC leave the rest of the footer bare
(row group offsets and row counts, the schema), where a flipped bit can still decode into
a smaller snapshot. The file checksum is verified before anything is parsed, and it is
mandatory from format 3 on: a file without it must say format 2 in its (checksummed)
document, so no single flipped bit turns a format-3 file into an unchecked one. Format 2
(the same without the file checksum and the ``footer_crc32`` column) is still read.

Why columnar: a large snapshot as one JSON document was slow to parse and validate, most of
it spent in per-row-group statistics that planning without a filter never looks at. Here the columns are checked vectorised (types by the Parquet schema, ranges
and paths with ``pyarrow.compute``/numpy, row group contiguity with numpy), descriptors are
plain slotted objects, and statistics stay raw until first used (``descriptors``). GC reads a
column projection (``read_checkpoint_summary``) and never materialises segments.

Format 1 (one JSON document) was written only before mvtable's first release and is no
longer read.
"""

from __future__ import annotations

import json
import zlib
from functools import partial
from itertools import repeat
from typing import Annotated, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CorruptMetadataError, UnsupportedFormatError
from mvtable.ids import ID_PATTERN
from mvtable.paths import check_relative_path

from .actions import PushOwner, check_envelope, validation_error
from .descriptors import RowGroupDescriptor, SegmentDescriptor, paused_gc, stats_json
from .enums import LineageState, Operation
from .partitioning import UNPARTITIONED, PartitionSpec, PartitionValue, check_partition_values, partition_problem
from .push_scopes import PushScope
from .snapshot import HistoryItem, LineageEntry, SegmentState, Snapshot
from .summary import TableSummary

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "SEGMENT_SCHEMA",
    "checkpoint_bytes",
    "parse_checkpoint",
    "read_checkpoint_summary",
]

CHECKPOINT_FORMAT_VERSION = 3
_UNCHECKED_FORMAT = 2  # the format before file checksums, still read
HEADER_KEY = b"mvtable.checkpoint"
HEADER_CRC_KEY = b"mvtable.checkpoint.crc32"  # page checksums cover the data, not the footer
FILE_CRC_KEY = b"mvtable.checkpoint.file_crc32"
_FILE_CRC_PLACEHOLDER = b"00000000"
# The key as Thrift's compact protocol writes it in the footer, followed by the header of
# the value (field 2, binary) and its length (8). Unique in a footer: JSON text escapes
# control characters, and the footer's other binary fields are names and base64.
_FILE_CRC_MARK = FILE_CRC_KEY + b"\x18\x08"
PARQUET_MAGIC = b"PAR1"
ROWS_PER_ROW_GROUP = 16_384  # bounds what a summary's full check holds at once (~20 MB of stats)

_INT_MAX = 2**62  # bigger is nonsense for rows/bytes/versions, and keeps numpy sums exact
_ID_RE = f"^{ID_PATTERN}$"
# A superset of what paths.check_relative_path refuses; flagged paths go through it for the verdict.
_OK_PATH_RE = r"^[^/\\:\x00~][^\\:\x00]*$"
_BAD_PART_RE = r"//|/$|(^|/)\.\.?(/|$)"

ROW_GROUP_TYPE = pa.struct(
    [
        pa.field("num_rows", pa.int64(), nullable=False),
        pa.field("first_row", pa.int64(), nullable=False),
        pa.field("total_byte_size", pa.int64(), nullable=False),
        pa.field("stats", pa.string(), nullable=False),
    ]
)
SEGMENT_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("num_rows", pa.int64(), nullable=False),
        pa.field("size_bytes", pa.int64(), nullable=False),
        pa.field("added_version", pa.int64(), nullable=False),
        pa.field("removed_version", pa.int64()),
        pa.field("lineage_entry", pa.string()),
        pa.field("row_groups", pa.list_(pa.field("item", ROW_GROUP_TYPE, nullable=False)), nullable=False),
        pa.field("dv_cardinality", pa.int64()),
        pa.field("dv_inline", pa.string()),
        pa.field("dv_path", pa.string()),
        pa.field("dv_offset", pa.int64()),
        pa.field("dv_size", pa.int64()),
        pa.field("footer_crc32", pa.int64()),
        pa.field("spec_id", pa.int64()),
        pa.field("partition", pa.string()),  # the partition tuple as a JSON array
    ]
)
_PARTITION_COLUMNS = ("spec_id", "partition")
# format 3 as written before partitions, still read (its segments are unpartitioned)
_SEGMENT_SCHEMA_3 = pa.schema([f for f in SEGMENT_SCHEMA if f.name not in _PARTITION_COLUMNS])
_SEGMENT_SCHEMA_2 = pa.schema([f for f in _SEGMENT_SCHEMA_3 if f.name != "footer_crc32"])  # format 2
_SUMMARY_COLUMNS = ["id", "dv_cardinality", "dv_inline", "dv_path", "dv_offset", "dv_size"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Entry(_Model):
    id: str
    segments_from: tuple[str, ...]
    segments_to: tuple[str, ...]
    state: LineageState
    timestamp_ms: int
    started_version: int
    state_version: int
    owner: PushOwner | None = None
    lease_expires_ms: int | None = None
    staged: bool = False
    revert_reason: str | None = None
    scope: PushScope | None = None  # written only when set: checkpoints without scoped pushes read as before

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("scope", 0) is None:
            del data["scope"]
        return data


class _History(_Model):
    version: tuple[int, ...]
    timestamp_ms: tuple[int, ...]
    operation: tuple[Operation, ...]


class _Header(_Model):
    """The footer document of a format-2 checkpoint."""

    format: int
    version: int = Field(ge=0)
    timestamp_ms: int = Field(ge=0)
    table_id: str
    table_schema: dict[str, Any]
    properties: dict[str, str]
    primary_key: tuple[str, ...] = ()
    lineage: tuple[_Entry, ...]
    history: _History
    transactions: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)  # streaming writers' last batch ids
    schema_id: int = Field(default=0, ge=0)
    last_field_id: int = Field(default=0, ge=0)
    schema_break_version: int = Field(default=-1, ge=-1)
    # commit time of each streaming writer's last batch; absent in checkpoints written before
    # vacuum forgot idle applications (they read as of the checkpoint's own time)
    transaction_times: dict[str, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    # absent in checkpoints written before partitions (unpartitioned: spec 0 only)
    partition_specs: tuple[PartitionSpec, ...] = ()
    default_spec_id: int = Field(default=0, ge=0)


# -- writing -----------------------------------------------------------------------------
def checkpoint_bytes(s: Snapshot) -> bytes:
    """The checkpoint of ``s`` (format 2).

    Statistics a snapshot still holds raw are copied as they are, so writing never parses them."""
    segs = list(s.segments.values())
    offsets = [0]
    rg_cols: tuple[list[Any], ...] = ([], [], [], [])
    for seg in segs:
        for rg in seg.file.row_groups:
            rg_cols[0].append(rg.num_rows)
            rg_cols[1].append(rg.first_row)
            rg_cols[2].append(rg.total_byte_size)
            rg_cols[3].append(rg.stats_json() if isinstance(rg, RowGroupDescriptor) else stats_json(rg.stats))
        offsets.append(len(rg_cols[0]))
    groups = pa.StructArray.from_arrays(
        [pa.array(rg_cols[i], f.type) for i, f in enumerate(ROW_GROUP_TYPE)], fields=list(ROW_GROUP_TYPE)
    )
    dvs = [s.dvs.get(seg.file.id) for seg in segs]
    columns = [
        pa.array([seg.file.id for seg in segs], pa.string()),
        pa.array([seg.file.path for seg in segs], pa.string()),
        pa.array([seg.file.num_rows for seg in segs], pa.int64()),
        pa.array([seg.file.size_bytes for seg in segs], pa.int64()),
        pa.array([seg.added_version for seg in segs], pa.int64()),
        pa.array([seg.removed_version for seg in segs], pa.int64()),
        pa.array([seg.lineage_entry for seg in segs], pa.string()),
        pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), groups, type=SEGMENT_SCHEMA.field("row_groups").type),
        pa.array([d.cardinality if d else None for d in dvs], pa.int64()),
        pa.array([d.inline if d else None for d in dvs], pa.string()),
        pa.array([d.path if d else None for d in dvs], pa.string()),
        pa.array([d.offset if d else None for d in dvs], pa.int64()),
        pa.array([d.size if d else None for d in dvs], pa.int64()),
        pa.array([seg.file.footer_crc32 for seg in segs], pa.int64()),
        pa.array([seg.file.spec_id for seg in segs], pa.int64()),
        pa.array(_partition_texts(segs), pa.string()),
    ]
    header = _Header(
        format=CHECKPOINT_FORMAT_VERSION,
        version=s.version,
        timestamp_ms=s.timestamp_ms,
        table_id=s.table_id,
        table_schema=s.table_schema,
        properties=s.properties,
        primary_key=s.primary_key,
        lineage=tuple(_Entry(**vars(e)) for e in s.lineage.values()),
        history=_History(
            version=tuple(h.version for h in s.history),
            timestamp_ms=tuple(h.timestamp_ms for h in s.history),
            operation=tuple(h.operation for h in s.history),
        ),
        transactions=dict(s.transactions),
        schema_id=s.schema_id,
        last_field_id=s.last_field_id,
        schema_break_version=s.schema_break_version,
        transaction_times=dict(s.transaction_times),
        partition_specs=tuple(spec for sid, spec in sorted(s.partition_specs.items()) if sid != 0),
        default_spec_id=s.default_spec_id,
    )
    doc = header.model_dump_json().encode()
    table = pa.Table.from_arrays(
        columns,
        schema=SEGMENT_SCHEMA.with_metadata(
            {HEADER_KEY: doc, HEADER_CRC_KEY: b"%08x" % zlib.crc32(doc), FILE_CRC_KEY: _FILE_CRC_PLACEHOLDER}
        ),
    )
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression="zstd",
        use_dictionary=False,
        write_statistics=False,
        write_page_checksum=True,
        row_group_size=ROWS_PER_ROW_GROUP,
    )
    return seal_file_crc(sink.getvalue().to_pybytes())


def _partition_texts(segs: list[SegmentState]) -> list[str | None]:
    """Each segment's partition tuple as JSON text (None: unpartitioned), encoding each distinct tuple once."""
    memo: dict[int, str] = {}  # by identity: segments of one partition share their tuple
    out: list[str | None] = []
    for seg in segs:
        part = seg.file.partition
        if part is None:
            out.append(None)
            continue
        text = memo.get(id(part))
        if text is None:
            text = memo[id(part)] = json.dumps(list(part), separators=(",", ":"), allow_nan=False)
        out.append(text)
    return out


def seal_file_crc(parquet: bytes) -> bytes:
    """``parquet`` (a checkpoint written with the placeholder under ``FILE_CRC_KEY``) with its file checksum filled in."""
    data = bytearray(parquet)
    at = _file_crc_at(data)
    if at is None:  # pyarrow wrote the footer in a way this module does not know
        raise RuntimeError("the checkpoint's file checksum could not be placed in its footer")
    data[at : at + 8] = b"%08x" % zlib.crc32(data)  # computed over the placeholder
    return bytes(data)


def _file_crc_at(data: bytes | bytearray) -> int | None:
    """Where the 8 hex digits of the file checksum are in ``data`` (None: no such field)."""
    if len(data) < 12:
        return None
    footer_start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    at = data.rfind(_FILE_CRC_MARK, max(footer_start, 0))
    return None if at < 0 else at + len(_FILE_CRC_MARK)


def _check_file_crc(data: bytes, source: str) -> bool:
    """Verify the file checksum when the file has one; whether it has.

    Raises:
        CorruptMetadataError: the checksum does not match the bytes."""
    at = _file_crc_at(data)
    if at is None:
        return False
    stored = data[at : at + 8]
    view = memoryview(data)
    actual = zlib.crc32(view[at + 8 :], zlib.crc32(_FILE_CRC_PLACEHOLDER, zlib.crc32(view[:at])))
    if stored != b"%08x" % actual:
        raise CorruptMetadataError(
            source,
            "the checkpoint fails its file checksum (damaged on storage); delete it and the table reads from the "
            "commits before it",
        )
    return True


# -- reading -----------------------------------------------------------------------------
def parse_checkpoint(data: bytes, *, source: str, expected_version: int | None = None) -> Snapshot:
    """The snapshot a checkpoint holds.

    Every column is validated before it is used, except row group statistics (validated when first
    read, see ``descriptors``); every failure is a ``CorruptMetadataError`` (or
    ``UnsafePathError``/``UnsupportedFormatError``) naming ``source``."""
    _check_magic(data, source)
    checked = _check_file_crc(data, source)
    with paused_gc():
        return _parse_parquet(data, source=source, expected_version=expected_version, checked=checked)


def _parse_parquet(data: bytes, *, source: str, expected_version: int | None, checked: bool) -> Snapshot:
    pf = _open(data, source)
    header = _header(pf, source, expected_version, checked=checked)
    try:
        table = pf.read(use_threads=False)
    except Exception as exc:  # pyarrow decoding errors of every kind
        raise CorruptMetadataError(source, f"unreadable Parquet data ({_brief(exc)})") from None
    segments: dict[str, SegmentState] = {}
    dvs: dict[str, DeletionVectorRef] = {}
    specs = _specs(header, source)
    partitions = _PartitionParser(specs, source)
    for batch in table.to_batches():
        _check_segments(batch, source)
        _build(batch, source, segments, dvs, partitions)
    if len(segments) != table.num_rows:
        raise CorruptMetadataError(source, "segment ids are not unique")
    lineage = {e.id: LineageEntry(**{**e.model_dump(), "owner": e.owner, "scope": e.scope}) for e in header.lineage}
    _check_lineage(lineage, segments, source)
    h = header.history
    return Snapshot(
        version=header.version,
        timestamp_ms=header.timestamp_ms,
        table_id=header.table_id,
        table_schema=header.table_schema,
        properties=dict(header.properties),
        primary_key=tuple(header.primary_key),
        segments=segments,
        lineage=lineage,
        dvs=dvs,
        history=_history(h),
        transactions=dict(header.transactions),
        schema_id=header.schema_id,
        last_field_id=header.last_field_id,
        schema_break_version=header.schema_break_version,
        transaction_times={app: header.transaction_times.get(app, header.timestamp_ms) for app in header.transactions},
        partition_specs=specs,
        default_spec_id=header.default_spec_id,
    )


def _specs(header: _Header, source: str) -> dict[int, PartitionSpec]:
    """The header's partition specs with the implicit spec 0, checked as replay checks them.

    Raises:
        CorruptMetadataError: a spec id twice (spec 0 is implicit) or a default spec that does not exist."""
    specs = {0: UNPARTITIONED}
    for spec in header.partition_specs:
        if spec.spec_id in specs:
            raise CorruptMetadataError(source, f"invalid content: partition spec {spec.spec_id} is listed twice")
        specs[spec.spec_id] = spec
    if header.default_spec_id not in specs:
        raise CorruptMetadataError(source, f"invalid content: the default partition spec {header.default_spec_id} does not exist")
    return specs


class _PartitionParser:
    """Partition tuples from their JSON text, each distinct (spec, text) parsed and checked once.

    Segments of one partition then share one tuple (memory, and pruning caches by it)."""

    def __init__(self, specs: dict[int, PartitionSpec], source: str) -> None:
        self.specs = specs
        self.source = source
        self.memo: dict[tuple[int | None, str | None], tuple[PartitionValue, ...] | None] = {}

    def __call__(self, spec_id: int | None, text: str | None) -> tuple[PartitionValue, ...] | None:
        key = (spec_id, text)
        if key in self.memo:
            return self.memo[key]
        part: tuple[PartitionValue, ...] | None = None
        try:
            if text is not None:
                part = check_partition_values(json.loads(text))
        except (ValueError, RecursionError) as exc:
            raise CorruptMetadataError(self.source, f"invalid content: partition {(text or '')[:200]!r}: {exc}") from None
        problem = partition_problem(self.specs, spec_id, part)
        if problem is not None:
            raise CorruptMetadataError(self.source, f"invalid content: {problem}")
        self.memo[key] = part
        return part


def read_checkpoint_summary(
    data: bytes, *, source: str, expected_version: int | None = None, full_check: bool = False
) -> TableSummary:
    """The version, properties, history and deletion-vector files of a checkpoint, reading few columns.

    Only the ``id`` and ``dv_*`` columns are read, so memory stays small on tables of many segments.

    With ``full_check`` every column is read and validated as ``parse_checkpoint`` would,
    one Parquet row group at a time, so a caller can learn whether the file is readable
    (GC does before cutting the log at it) without materialising its segments.

    Raises:
        CorruptMetadataError: The checkpoint is unreadable Parquet or its segment ids are not unique."""
    _check_magic(data, source)
    checked = _check_file_crc(data, source)
    pf = _open(data, source)
    header = _header(pf, source, expected_version, checked=checked)
    dvs: dict[str, str | None] = {}
    ids: set[str] = set()
    rows = 0
    try:
        for i in range(pf.num_row_groups):
            batch = pf.read_row_group(i, columns=None if full_check else _SUMMARY_COLUMNS, use_threads=False)
            for b in batch.to_batches():
                rows += b.num_rows
                if full_check:
                    _check_segments(b, source)
                else:
                    _check_ids(b.column("id"), source)
                    _check_dvs(b, source)
                ids.update(b.column("id").to_pylist())
                has_dv = b.column("dv_cardinality").is_valid()
                if pc.any(has_dv).as_py():
                    picked = b.filter(has_dv)
                    dvs.update(zip(picked.column("id").to_pylist(), picked.column("dv_path").to_pylist()))
    except CorruptMetadataError:
        raise
    except Exception as exc:
        raise CorruptMetadataError(source, f"unreadable Parquet data ({_brief(exc)})") from None
    if len(ids) != rows:
        raise CorruptMetadataError(source, "segment ids are not unique")
    if full_check:
        _check_lineage(
            {e.id: LineageEntry(**{**e.model_dump(), "owner": e.owner, "scope": e.scope}) for e in header.lineage}, ids, source
        )
    h = header.history
    return TableSummary(header.version, header.timestamp_ms, dict(header.properties), _history(h), dvs)


def _history(h: _History) -> list[HistoryItem]:
    return list(map(partial(tuple.__new__, HistoryItem), zip(h.version, h.timestamp_ms, h.operation)))


def _open(data: bytes, source: str) -> pq.ParquetFile:
    try:
        pf = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
        schema = pf.schema_arrow
    except Exception as exc:
        raise CorruptMetadataError(source, f"not a readable Parquet checkpoint ({_brief(exc)})") from None
    plain = schema.remove_metadata()
    if not (plain.equals(SEGMENT_SCHEMA) or plain.equals(_SEGMENT_SCHEMA_3) or plain.equals(_SEGMENT_SCHEMA_2)):
        raise CorruptMetadataError(source, f"unexpected checkpoint columns: {schema.remove_metadata()}"[:500])
    return pf


def _header(pf: pq.ParquetFile, source: str, expected_version: int | None, *, checked: bool) -> _Header:
    meta = pf.metadata.metadata or {}
    raw = meta.get(HEADER_KEY)
    if raw is None:
        raise CorruptMetadataError(source, "the Parquet footer holds no mvtable.checkpoint document")
    if meta.get(HEADER_CRC_KEY) != b"%08x" % zlib.crc32(raw):
        raise CorruptMetadataError(source, "the checkpoint document fails its checksum")
    try:
        header = _Header.model_validate_json(raw, strict=True)
    except ValidationError as exc:
        check_envelope(raw, source=source, what="checkpoint header", version=CHECKPOINT_FORMAT_VERSION)
        raise validation_error(source, exc) from None
    if header.format not in (CHECKPOINT_FORMAT_VERSION, _UNCHECKED_FORMAT):
        raise UnsupportedFormatError(
            source,
            f"checkpoint format version {header.format!r} is not supported (this mvtable reads "
            f"{_UNCHECKED_FORMAT} and {CHECKPOINT_FORMAT_VERSION})",
        )
    if checked != (header.format == CHECKPOINT_FORMAT_VERSION):
        raise CorruptMetadataError(
            source,
            f"a format-{header.format} checkpoint {'with' if checked else 'without'} a file checksum: damaged on storage",
        )
    has_column = pf.schema_arrow.get_field_index("footer_crc32") >= 0
    if has_column != (header.format == CHECKPOINT_FORMAT_VERSION):
        raise CorruptMetadataError(source, f"the columns do not match checkpoint format {header.format}")
    h = header.history
    if not len(h.version) == len(h.timestamp_ms) == len(h.operation):
        raise CorruptMetadataError(source, "invalid content: the history lists differ in length")
    if expected_version is not None and header.version != expected_version:
        raise CorruptMetadataError(source, f"file holds version {header.version}, expected {expected_version}")
    return header


def _check_segments(b: pa.RecordBatch, source: str) -> None:
    """Everything ``SegmentFile``/``DeletionVectorRef`` validation would check, vectorised."""
    _check_ids(b.column("id"), source)
    _check_paths(b.column("path"), source, "path")
    for name in ("num_rows", "size_bytes", "added_version", "removed_version"):
        _check_range(b.column(name), source, name)
    if "footer_crc32" in b.schema.names:
        _check_range(b.column("footer_crc32"), source, "footer_crc32", limit=2**32)
    if "spec_id" in b.schema.names:
        _check_range(b.column("spec_id"), source, "spec_id")
    entries = b.column("lineage_entry")
    if entries.null_count < len(entries):
        _check_ids(entries.drop_null(), source, what="lineage_entry")
    groups = b.column("row_groups")
    flat = groups.flatten()
    if groups.null_count or flat.null_count:
        raise CorruptMetadataError(source, "invalid content: row_groups holds nulls")
    nr = flat.field("num_rows")
    fr = flat.field("first_row")
    for name, arr in (
        ("row_groups.num_rows", nr),
        ("row_groups.first_row", fr),
        ("row_groups.total_byte_size", flat.field("total_byte_size")),
    ):
        _check_range(arr, source, name)
    if flat.field("stats").null_count:
        raise CorruptMetadataError(source, "invalid content: row_groups.stats holds nulls")
    _check_contiguous(groups, nr, fr, b.column("num_rows"), b.column("id"), source)
    _check_dvs(b, source)


def _check_ids(arr: pa.Array, source: str, *, what: str = "id") -> None:
    if arr.null_count:
        raise CorruptMetadataError(source, f"invalid content: {what} holds nulls")
    ok = pc.match_substring_regex(arr, _ID_RE)
    if not pc.all(ok).as_py():
        bad = arr.filter(pc.invert(ok))[0].as_py()
        raise CorruptMetadataError(source, f"invalid content: {what} {bad!r}"[:300] + " is not a valid id")


def _check_paths(arr: pa.Array, source: str, what: str) -> None:
    if not len(arr):
        return
    suspect = pc.or_(pc.invert(pc.match_substring_regex(arr, _OK_PATH_RE)), pc.match_substring_regex(arr, _BAD_PART_RE))
    if pc.any(suspect).as_py():
        for path in arr.filter(suspect).to_pylist():
            check_relative_path(path, source=source)  # raises UnsafePathError with the reason


def _check_range(arr: pa.Array, source: str, what: str, *, limit: int = _INT_MAX) -> None:
    if len(arr) == arr.null_count:
        return
    mm = pc.min_max(arr).as_py()
    if mm["min"] < 0 or mm["max"] >= limit:
        raise CorruptMetadataError(source, f"invalid content: {what} out of range ({mm['min']}..{mm['max']})")


def _check_contiguous(groups: pa.ListArray, nr: pa.Array, fr: pa.Array, seg_rows: pa.Array, ids: pa.Array, source: str) -> None:
    """``SegmentFile``'s rule: each segment's row groups start at row 0 and follow each other without gaps.

    When there are any, they add up to the segment's rows."""
    if not len(nr):
        return
    off = np.asarray(groups.offsets, dtype=np.int64)
    off = off - off[0]
    n = nr.to_numpy(zero_copy_only=False)
    f = fr.to_numpy(zero_copy_only=False)
    lengths = np.diff(off)
    has = lengths > 0
    starts = off[:-1][has]
    lasts = off[1:][has] - 1
    bad = np.zeros(len(lengths), dtype=bool)
    bad[has] |= f[starts] != 0
    follows = np.ones(len(n), dtype=bool)
    follows[starts] = False  # the first group of a segment follows nothing
    idx = np.nonzero(follows)[0]
    broken = idx[f[idx] != f[idx - 1] + n[idx - 1]]
    if len(broken):
        bad[np.searchsorted(off, broken, side="right") - 1] = True
    totals = f[lasts] + n[lasts]
    bad[has] |= totals != seg_rows.to_numpy(zero_copy_only=False)[has]
    if bad.any():
        i = int(np.argmax(bad))
        raise CorruptMetadataError(
            source, f"invalid content: row groups of segment {ids[i].as_py()!r} do not cover its rows contiguously"
        )


def _check_dvs(b: pa.RecordBatch, source: str) -> None:
    card = b.column("dv_cardinality")
    inline, path = b.column("dv_inline"), b.column("dv_path")
    offset, size = b.column("dv_offset"), b.column("dv_size")
    has = card.is_valid()
    one_location = pc.xor(inline.is_valid(), path.is_valid())
    complete = pc.and_(offset.is_valid(), size.is_valid())
    consistent = pc.if_else(
        has,
        pc.and_(one_location, complete),
        pc.and_(pc.and_(inline.is_null(), path.is_null()), pc.and_(offset.is_null(), size.is_null())),
    )
    if not pc.all(consistent).as_py():
        sid = b.column("id").filter(pc.invert(consistent))[0].as_py()
        raise CorruptMetadataError(
            source, f"invalid content: the deletion vector of segment {sid!r} needs exactly one of 'inline' and 'path'"
        )
    for name, arr in (("dv_cardinality", card), ("dv_offset", offset), ("dv_size", size)):
        _check_range(arr, source, name)
    if path.null_count < len(path):
        _check_paths(path.drop_null(), source, "dv_path")


def _check_lineage(lineage: dict[str, LineageEntry], segments: Any, source: str) -> None:
    for e in lineage.values():
        # A push may declare segments_to that it uploads later; only a COMPLETED entry must have them all.
        named = (*e.segments_from, *e.segments_to) if e.state == LineageState.COMPLETED else e.segments_from
        unknown = [sid for sid in named if sid not in segments]
        if unknown:
            raise CorruptMetadataError(source, f"lineage entry {e.id} names unknown segments {unknown[:3]}")


def _build(
    b: pa.RecordBatch,
    source: str,
    segments: dict[str, SegmentState],
    dvs: dict[str, DeletionVectorRef],
    partitions: _PartitionParser,
) -> None:
    """Descriptors for one validated batch.

    One list per column, then plain objects built with ``map`` (no Python loop body per segment);
    statistics stay raw."""
    ids = b.column("id").to_pylist()
    groups = b.column("row_groups")
    flat = groups.flatten()
    n_groups = len(flat)
    row_groups = list(
        map(
            RowGroupDescriptor,
            flat.field("num_rows").to_pylist(),
            flat.field("first_row").to_pylist(),
            flat.field("total_byte_size").to_pylist(),
            repeat(None, n_groups),
            flat.field("stats").to_pylist(),
            repeat(source, n_groups),
        )
    )
    off = np.asarray(groups.offsets, dtype=np.int64)
    off = off - off[0]
    if n_groups == len(ids) and bool((np.diff(off) == 1).all()):
        per_segment: Any = zip(row_groups)  # the common case: one row group per segment
    else:
        bounds = off.tolist()
        per_segment = (tuple(row_groups[a:z]) for a, z in zip(bounds, bounds[1:]))
    footer_crcs = b.column("footer_crc32").to_pylist() if "footer_crc32" in b.schema.names else repeat(None)
    if "spec_id" in b.schema.names:
        spec_ids: Any = b.column("spec_id").to_pylist()
        parts: Any = map(partitions, spec_ids, b.column("partition").to_pylist())
    else:
        spec_ids = parts = repeat(None)
    files = map(
        SegmentDescriptor,
        ids,
        b.column("path").to_pylist(),
        b.column("num_rows").to_pylist(),
        b.column("size_bytes").to_pylist(),
        per_segment,
        footer_crcs,
        spec_ids,
        parts,
    )
    states = map(
        SegmentState,
        files,
        b.column("added_version").to_pylist(),
        b.column("removed_version").to_pylist(),
        b.column("lineage_entry").to_pylist(),
    )
    segments.update(zip(ids, states))
    card = b.column("dv_cardinality")
    if card.null_count < len(card):
        picked = b.filter(card.is_valid())
        for sid, c, inline, path, offset, size in zip(*(picked.column(n).to_pylist() for n in _SUMMARY_COLUMNS)):
            # every field was validated above, so the model is built without validating again
            dvs[sid] = DeletionVectorRef.model_construct(cardinality=c, inline=inline, path=path, offset=offset, size=size)


def _check_magic(data: bytes, source: str) -> None:
    if not data.startswith(PARQUET_MAGIC):
        raise CorruptMetadataError(source, f"not a Parquet checkpoint (starts with {data[:8]!r})")


def _brief(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]
