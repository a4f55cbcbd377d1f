"""The actions a commit is made of, and the commit file itself.

These are the on-disk contract: pydantic models that validate every field on read, so a
corrupt or hand-edited log gives a typed error instead of a wrong snapshot. The log knows
deletion vectors only as plain descriptors (``DeletionVectorRef``); loading them is the
visibility package's business.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CorruptMetadataError, UnsafePathError, UnsupportedFormatError
from mvtable.ids import Id as _Id
from mvtable.paths import safe_path_value as _safe_path

from .enums import Operation
from .partitioning import PartitionSpec, PartitionValue, check_partition_values

FORMAT_VERSION = 2
# Commits of format 1 (written before commits carried a checksum) are still read. From
# format 2 on the checksum is mandatory, so that removing it is no way to get a damaged
# commit read: a file without one must say format 1, and a flipped bit that turned
# ``"format":2`` into another digit changes bytes the checksum covers.
UNCHECKED_FORMAT_VERSION = 1
CHECKSUM_KEY = "crc32"
# The checksum is the commit's last member, written exactly like this; it is the CRC-32 of
# every byte before its comma, so it is checked before the JSON is parsed.
_SEAL = re.compile(rb',"' + CHECKSUM_KEY.encode() + rb'":"([0-9a-f]{8})"\}\Z')


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _without_absent(data: Any, keys: tuple[str, ...]) -> Any:
    """A dumped model without ``keys`` whose value is None.

    Fields added for partitions are written only when set, so the log of a table that never
    used them stays readable by an mvtable from before them."""
    if isinstance(data, dict):
        for key in keys:
            if key in data and data[key] is None:
                del data[key]
    return data


class ColumnStats(_Model):
    """Per-row-group statistics of one top-level column, JSON-encoded (see connector.stats)."""

    min: Any = None
    max: Any = None
    null_count: int | None = Field(default=None, ge=0)


class RowGroupInfo(_Model):
    """One Parquet row group.

    ``first_row`` is its offset in file order: DV positions are absolute positions in the file, so a
    reader needs it to slice the mask per row group."""

    num_rows: int = Field(ge=0)
    first_row: int = Field(ge=0)
    total_byte_size: int = Field(ge=0)
    stats: dict[str, ColumnStats] = Field(default_factory=dict)


class SegmentFile(_Model):
    id: _Id
    path: str
    num_rows: int = Field(ge=0)
    size_bytes: int = Field(ge=0)
    row_groups: tuple[RowGroupInfo, ...] = ()
    # CRC-32 of the file's Parquet footer (the Thrift ``FileMetaData`` bytes), recorded at
    # write time: page checksums cover the pages, this covers offsets, types, names and
    # statistics. None in segments written before mvtable checked footers.
    footer_crc32: int | None = Field(default=None, ge=0, lt=2**32)
    # The partition spec the segment was written under and its partition tuple (one JSON
    # scalar per spec field, see ``partitioning``). Both None: an unpartitioned segment, as
    # every segment written before partitions.
    spec_id: int | None = Field(default=None, ge=0)
    partition: tuple[PartitionValue, ...] | None = None

    @field_validator("path")
    @classmethod
    def _safe(cls, v: str) -> str:
        return _safe_path(v)

    @field_validator("partition", mode="before")
    @classmethod
    def _scalars(cls, v: Any) -> Any:
        return None if v is None else check_partition_values(v)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_absent(handler(self), ("spec_id", "partition"))

    @model_validator(mode="after")
    def _row_groups_cover_file(self) -> SegmentFile:
        expected = 0
        for rg in self.row_groups:
            if rg.first_row != expected:
                raise ValueError(f"row group offsets are not contiguous at row {expected}")
            expected += rg.num_rows
        if self.row_groups and expected != self.num_rows:
            raise ValueError(f"row groups hold {expected} rows, segment says {self.num_rows}")
        return self


class MetadataAction(_Model):
    kind: Literal["metadata"] = "metadata"
    table_id: _Id
    table_schema: dict[str, Any]
    properties: dict[str, str] = Field(default_factory=dict)
    # The primary key's columns, set when the table is created; None on a later metadata action
    # means "unchanged" (and on the first one: no key). A later one may only rename them with
    # their columns (the same field ids, see ``schema_ids.key_follows_ids``).
    primary_key: tuple[Annotated[str, Field(min_length=1)], ...] | None = None
    # The schema's id (raised by every schema change) and the highest field id ever assigned
    # (never reused, even once its column is dropped). None: a table from before field ids,
    # or a metadata action that leaves them as they were.
    schema_id: int | None = Field(default=None, ge=0)
    last_field_id: int | None = Field(default=None, ge=0)
    # Every partition spec the table has (spec 0, unpartitioned, is implicit) and the one new
    # writes use. None: unchanged (on the first metadata action: unpartitioned). Specs are
    # never changed once recorded; partition evolution adds one and moves the default.
    partition_specs: tuple[PartitionSpec, ...] | None = None
    default_spec_id: int | None = Field(default=None, ge=0)

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_absent(handler(self), ("partition_specs", "default_spec_id"))


class AddSegment(_Model):
    """A new segment.

    With ``lineage_entry`` it joins that entry's ``segments_to`` and stays invisible until the entry
    is COMPLETED."""

    kind: Literal["add"] = "add"
    segment: SegmentFile
    lineage_entry: _Id | None = None


class RemoveSegment(_Model):
    """Logical removal: the segment leaves the snapshot but its file stays for time travel until vacuum."""

    kind: Literal["remove"] = "remove"
    segment_id: _Id


class SetDeletionVector(_Model):
    """The segment's cumulative DV from this version on (old ∪ new deletes)."""

    kind: Literal["dv"] = "dv"
    segment_id: _Id
    dv: DeletionVectorRef


class PushOwner(_Model):
    """Who runs a consistent push: enough to prove, from the same machine, that it died.

    ``machine`` identifies the kernel boot and pid namespace (not just the hostname), and
    ``start_ticks`` the process start time, so neither a reused pid nor another container
    with the same hostname passes for the owner. ``None`` fields: nothing can be proved,
    the lease decides."""

    host: str = Field(max_length=255)
    machine: str | None = Field(default=None, max_length=64)
    pid: int | None = Field(default=None, ge=0)
    start_ticks: int | None = Field(default=None, ge=0)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}" if self.pid is not None else f"a writer on {self.host}"


class LineageStart(_Model):
    """A consistent push begins.

    ``owner`` and ``lease_expires_ms`` (the first lease; the writer renews it in a lease file, not
    in the log) are absent in logs written before mvtable recorded owners."""

    kind: Literal["lineage_start"] = "lineage_start"
    entry_id: _Id
    segments_from: tuple[_Id, ...] = ()
    segments_to: tuple[_Id, ...] = ()
    owner: PushOwner | None = None
    lease_expires_ms: int | None = Field(default=None, ge=0)


class LineageEnd(_Model):
    kind: Literal["lineage_end"] = "lineage_end"
    entry_id: _Id


class LineageStage(_Model):
    """A ``publish=False`` push has written all its data.

    The entry stays IN_PROGRESS and waits for a person to publish or roll it back; it is never
    reverted automatically."""

    kind: Literal["lineage_stage"] = "lineage_stage"
    entry_id: _Id


class LineageRevert(_Model):
    """IN_PROGRESS or COMPLETED → REVERTED.

    ``reason`` says why when mvtable reverted it by itself (a dead push cleaned up by the next push
    or by vacuum)."""

    kind: Literal["lineage_revert"] = "lineage_revert"
    entry_id: _Id
    reason: str | None = Field(default=None, max_length=1000)


class PruneState(_Model):
    """Vacuum forgets what no retained version needs, so the newest snapshot stays the size of the live table.

    That holds for its checkpoint too, however long the table lives. The listed segments (removed,
    named by no lineage entry, their files deleted by the same vacuum) leave the snapshot, and so do
    history items older than ``history_before`` (versions whose log files GC removes)."""

    kind: Literal["prune"] = "prune"
    segment_ids: tuple[_Id, ...] = ()
    history_before: int | None = Field(default=None, ge=0)
    # streaming applications whose last batch is older than streamingAppRetentionPeriod:
    # their exactly-once record leaves the snapshot (a query that never runs again)
    app_ids: tuple[_Id, ...] = ()


class LineagePurge(_Model):
    """Retention dropped a finished entry from the lineage (its segments were dealt with)."""

    kind: Literal["lineage_purge"] = "lineage_purge"
    entry_id: _Id


class SetTransaction(_Model):
    """A streaming writer's progress, committed atomically with its data (Delta's ``SetTransaction``).

    Application ``app_id`` (a streaming query) has committed every micro-batch up to ``batch_id``. A
    batch replayed after a restart finds its id here and is skipped, so each batch lands exactly
    once."""

    kind: Literal["txn"] = "txn"
    app_id: _Id
    batch_id: int = Field(ge=0)


class InsertedKeys(_Model):
    """The keys a commit appends to a keyed table, as a Bloom filter (``key_filters.KeyBloom``, base64).

    A concurrent writer checks its own keys against it at commit time, so that two writers inserting
    the same new key cannot both land. Replay ignores it."""

    kind: Literal["inserted_keys"] = "inserted_keys"
    columns: tuple[Annotated[str, Field(min_length=1)], ...] = Field(min_length=1)
    count: int = Field(ge=0)
    bloom: str = Field(min_length=1)


class CompactedInput(_Model):
    """One input of a compaction and where its rows went (the row map).

    Row ``p`` of the input, unless ``dv`` deletes it, is row ``first_row + p - rank(dv, p)`` of
    ``output``. ``dv`` is the input's deletion vector at the compaction's read version, i.e. exactly
    the rows the output left out. ``output`` is None only when ``dv`` deletes every row."""

    segment_id: _Id
    output: _Id | None = None
    first_row: int = Field(default=0, ge=0)
    dv: DeletionVectorRef | None = None


class CompactSegments(_Model):
    """Compaction: the inputs leave the table and their live rows live on, in order, in outputs.

    The outputs are added by ``AddSegment`` actions earlier in the same commit. Lineage entries that
    named an input name its output instead."""

    kind: Literal["compact"] = "compact"
    inputs: tuple[CompactedInput, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> CompactSegments:
        ids = [i.segment_id for i in self.inputs]
        if len(set(ids)) != len(ids):
            raise ValueError("a compaction names an input twice")
        if {i.output for i in self.inputs if i.output is not None} & set(ids):
            raise ValueError("a compaction output cannot be one of its inputs")
        return self


class TransactionPrepare(_Model):
    """This commit prepares the lineage entry ``transaction_id`` as one participant of a multi-table transaction.

    The entry started in the same commit, staged, so its segments stay invisible and nothing
    but the transaction's own driver or recovery ends it. Every participant records where the
    one decision object lives (``decision_uri``: the coordinator table, whose
    ``_mvtable/transactions/<id>.json`` says COMMITTED or ABORTED) and who the others are, so
    that whoever finds the entry can finish the transaction. ``clones`` maps each segment
    clone a transactional delete added to the segment it replaces: the finalize merges the
    original's newer deletes into the clone. Replay keeps nothing of it (see
    ``lineage.transactions``)."""

    kind: Literal["txn_prepare"] = "txn_prepare"
    transaction_id: _Id
    participants: tuple[Annotated[str, Field(min_length=1, max_length=2000)], ...] = Field(min_length=1)
    decision_uri: str = Field(min_length=1, max_length=2000)
    clones: dict[_Id, _Id] = Field(default_factory=dict)


Action = Annotated[
    MetadataAction
    | AddSegment
    | RemoveSegment
    | SetDeletionVector
    | LineageStart
    | LineageStage
    | LineageEnd
    | LineageRevert
    | LineagePurge
    | SetTransaction
    | InsertedKeys
    | CompactSegments
    | PruneState
    | TransactionPrepare,
    Field(discriminator="kind"),
]


class Commit(_Model):
    """The content of ``_mvtable/log/<version>.json``."""

    format: int = FORMAT_VERSION
    version: int = Field(ge=0)
    read_version: int = Field(ge=-1)
    timestamp_ms: int = Field(ge=0)
    operation: Operation
    parameters: dict[str, Any] = Field(default_factory=dict)
    writer: str = ""
    metrics: dict[str, float | int] = Field(default_factory=dict)
    actions: tuple[Action, ...] = ()

    def to_json_bytes(self) -> bytes:
        """The commit file: the JSON document, sealed with its checksum (``seal``)."""
        return seal(self.model_dump_json(exclude_defaults=False).encode())


def seal(document: bytes) -> bytes:
    """A JSON object's text with the checksum member appended last.

    ``…,"crc32":"<CRC-32 of everything before the comma, 8 hex digits>"}``."""
    body = document.rstrip()
    if not body.endswith(b"}") or body.rstrip(b"} \t\r\n").endswith(b"{"):
        raise ValueError("seal() takes the text of a non-empty JSON object")
    body = body[:-1].rstrip()
    return body + b',"%s":"%08x"}' % (CHECKSUM_KEY.encode(), zlib.crc32(body))


def unseal(data: bytes, *, source: str) -> tuple[bytes, bool]:
    """(the document without its checksum member, whether it had one), the checksum verified.

    Raises:
        CorruptMetadataError: the checksum does not match the bytes before it."""
    m = _SEAL.search(data)
    if m is None:
        return data, False
    body = data[: m.start()]
    if zlib.crc32(body) != int(m.group(1), 16):
        raise CorruptMetadataError(source, "the commit fails its checksum: the file was damaged on storage or edited by hand")
    return body + b"}", True


def readable_format(doc: Any, *, checked: bool, source: str) -> int:
    """The format a commit (or its summary) must state.

    A checksum makes it ``FORMAT_VERSION``, its absence ``UNCHECKED_FORMAT_VERSION``. ``doc`` is the
    parsed document's ``format``.

    Raises:
        CorruptMetadataError: a format-2 commit without its checksum (a damaged one)."""
    if not checked and doc == FORMAT_VERSION and not isinstance(doc, bool):
        raise CorruptMetadataError(
            source, f"a format-{FORMAT_VERSION} commit without its checksum: the file was damaged or edited by hand"
        )
    return FORMAT_VERSION if checked else UNCHECKED_FORMAT_VERSION


_commit_adapter = TypeAdapter(Commit)


def check_envelope(
    data: bytes, *, source: str, what: str, version: int = FORMAT_VERSION, checked: bool | None = None
) -> dict[str, Any]:
    """The parsed document, once it passes the checks that explain why a metadata file failed schema validation.

    JSON, an object, and a format version (``version``) this code reads. Failures name the file
    (GC's light parser reads commits through it too).

    ``checked`` (a commit: whether it carried its checksum, see ``unseal``) makes the
    version the one ``readable_format`` says such a commit must state.

    Raises:
        CorruptMetadataError: The text is no JSON object.
        UnsupportedFormatError: Its format version is one this code does not read."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CorruptMetadataError(source, f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise CorruptMetadataError(source, f"a {what} must be a JSON object")
    fmt = raw.get("format")
    if checked is not None:
        version = readable_format(fmt, checked=checked, source=source)
    if fmt != version or isinstance(fmt, bool):
        raise UnsupportedFormatError(source, f"format version {fmt!r} is not supported (this mvtable reads {version})")
    return raw


def parse_commit(data: bytes, *, source: str, expected_version: int | None = None) -> Commit:
    """Parse and validate a commit file; every failure names the file.

    The checksum (format 2 on) is verified first, on the bytes. The file is parsed once:
    the envelope checks (valid JSON, an object, a readable format version) run only when
    validation fails, to say which of them it was."""
    data, checked = unseal(data, source=source)
    try:
        # strict: a hostile "version": "3" or true is an error, not silently an int
        commit = _commit_adapter.validate_json(data, strict=True)
    except ValidationError as exc:
        check_envelope(data, source=source, what="commit", checked=checked)
        raise validation_error(source, exc) from None
    fmt = readable_format(commit.format, checked=checked, source=source)
    check_identity(commit, source=source, format_version=fmt, expected_version=expected_version)
    return commit


def check_identity(doc: Any, *, source: str, format_version: int, expected_version: int | None) -> None:
    """Check the format and version a validated commit or JSON checkpoint states.

    ``doc`` is a model with ``format`` and ``version``. The format must be stated and be
    ``format_version`` — a file that omits it is not one of ours — and the version must be the one
    its name promises.

    Raises:
        UnsupportedFormatError: The format is missing or not ``format_version``.
        CorruptMetadataError: The version is not the one the file's name promises."""
    fmt = doc.format if "format" in doc.model_fields_set else None
    if fmt != format_version:
        raise UnsupportedFormatError(source, f"format version {fmt!r} is not supported (this mvtable reads {format_version})")
    check_version(doc.version, source=source, expected_version=expected_version)


def check_version(version: int, *, source: str, expected_version: int | None) -> None:
    """The version a file holds must be the one its name promises (``expected_version``; None: no promise).

    Raises:
        CorruptMetadataError: The file holds another version than its name promises."""
    if expected_version is not None and version != expected_version:
        raise CorruptMetadataError(source, f"file holds version {version}, expected {expected_version}")


def validation_error(source: str, exc: ValidationError) -> CorruptMetadataError:
    """Turn a pydantic error into our typed error, keeping unsafe paths distinguishable."""
    if any("unsafe path" in str(err.get("msg")) for err in exc.errors()):
        return UnsafePathError(source, _short(exc))
    return CorruptMetadataError(source, _short(exc))


def _short(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()))
        parts.append(f"{loc}: {err.get('msg')}")
    more = exc.error_count() - len(parts)
    return "invalid content: " + "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")


def files_named(actions: Sequence[Action]) -> list[str]:
    """The files a commit brings into the table: its new segments and the DV files of the deletion vectors it sets (each once).

    A durable commit flushes them before itself."""
    paths: dict[str, None] = {}
    for action in actions:
        if isinstance(action, AddSegment):
            paths[action.segment.path] = None
        elif isinstance(action, SetDeletionVector) and action.dv.path is not None:
            paths[action.dv.path] = None
    return list(paths)
