"""Log checkpoints: the whole snapshot at one version, so planning reads one file plus the
commits after it instead of the whole log. Pure (bytes in, snapshot out)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .actions import FORMAT_VERSION, DeletionVectorRef, SegmentFile, check_envelope, validation_error
from .errors import CorruptMetadataError
from .snapshot import COMPLETED, IN_PROGRESS, REVERTED, HistoryItem, LineageEntry, SegmentState, Snapshot


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Segment(_Model):
    file: SegmentFile
    added_version: int = Field(ge=0)
    removed_version: int | None = Field(default=None, ge=0)
    lineage_entry: str | None = None


class _Entry(_Model):
    id: str
    segments_from: tuple[str, ...]
    segments_to: tuple[str, ...]
    state: str = Field(pattern=f"^({IN_PROGRESS}|{COMPLETED}|{REVERTED})$")
    timestamp_ms: int
    started_version: int
    state_version: int


class CheckpointFile(_Model):
    format: int = FORMAT_VERSION
    version: int = Field(ge=0)
    timestamp_ms: int = Field(ge=0)
    table_id: str
    table_schema: dict[str, Any]
    properties: dict[str, str]
    segments: tuple[_Segment, ...]
    lineage: tuple[_Entry, ...]
    dvs: dict[str, DeletionVectorRef]
    history: tuple[tuple[int, int, str], ...]


def checkpoint_bytes(s: Snapshot) -> bytes:
    doc = CheckpointFile(
        version=s.version,
        timestamp_ms=s.timestamp_ms,
        table_id=s.table_id,
        table_schema=s.table_schema,
        properties=s.properties,
        segments=tuple(
            _Segment(file=seg.file, added_version=seg.added_version, removed_version=seg.removed_version, lineage_entry=seg.lineage_entry)
            for seg in s.segments.values()
        ),
        lineage=tuple(_Entry(**vars(e)) for e in s.lineage.values()),
        dvs=s.dvs,
        history=tuple((h.version, h.timestamp_ms, h.operation) for h in s.history),
    )
    return doc.model_dump_json().encode()


def parse_checkpoint(data: bytes, *, source: str, expected_version: int | None = None) -> Snapshot:
    check_envelope(data, source=source, what="checkpoint")
    try:
        doc = CheckpointFile.model_validate_json(data, strict=True)
    except ValidationError as exc:
        raise validation_error(source, exc) from None
    if expected_version is not None and doc.version != expected_version:
        raise CorruptMetadataError(source, f"file holds version {doc.version}, expected {expected_version}")
    segments = {
        seg.file.id: SegmentState(seg.file, seg.added_version, seg.removed_version, seg.lineage_entry) for seg in doc.segments
    }
    lineage = {e.id: LineageEntry(**e.model_dump()) for e in doc.lineage}
    for e in lineage.values():
        # A push may declare segments_to that it uploads later; only a COMPLETED entry must have them all.
        named = (*e.segments_from, *e.segments_to) if e.state == COMPLETED else e.segments_from
        unknown = [sid for sid in named if sid not in segments]
        if unknown:
            raise CorruptMetadataError(source, f"lineage entry {e.id} names unknown segments {unknown[:3]}")
    unknown_dv = [sid for sid in doc.dvs if sid not in segments]
    if unknown_dv:
        raise CorruptMetadataError(source, f"deletion vectors for unknown segments {unknown_dv[:3]}")
    return Snapshot(
        version=doc.version,
        timestamp_ms=doc.timestamp_ms,
        table_id=doc.table_id,
        table_schema=doc.table_schema,
        properties=dict(doc.properties),
        segments=segments,
        lineage=lineage,
        dvs=dict(doc.dvs),
        history=[HistoryItem(v, ts, op) for v, ts, op in doc.history],
    )
