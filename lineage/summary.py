"""A table as visibility GC sees it.

Version, properties, history and the deletion-vector file each segment points at — no segment
descriptors, no statistics.

GC reads every commit file it may delete and the snapshots at both ends of the retention
window. Parsing those into full ``Snapshot``s builds descriptors and per-row-group statistics
for every segment, so a large table needs a lot of memory for what is, to GC, a map from
segment id to DV path. This module replays *summaries* instead. Pure: bytes in,
summaries out; ``mvtable.connector.gc`` does the reading.

A commit summary is validated only as far as GC relies on it (the envelope, versions,
timestamps, the fields of the actions it uses, and every stored path); everything else
in the file is skipped, not trusted: GC never builds a snapshot from a summary, and readers keep parsing commits
strictly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from mvtable.dvref import DeletionVectorRef
from mvtable.errors import CorruptMetadataError
from mvtable.ids import ID_RE as _ID
from mvtable.paths import check_relative_path

from .actions import (
    AddSegment,
    CompactSegments,
    MetadataAction,
    RemoveSegment,
    SetDeletionVector,
    check_envelope,
    check_version,
    unseal,
    validation_error,
)
from .enums import Operation
from .snapshot import HistoryItem, Snapshot

__all__ = ["CommitSummary", "TableSummary", "apply_summary", "parse_commit_summary", "summarize"]


@dataclass(frozen=True)
class CommitSummary:
    version: int
    timestamp_ms: int
    operation: Operation
    properties: dict[str, str] | None  # set by a metadata action
    set_dvs: tuple[tuple[str, str | None], ...]  # (segment id, DV file path or None when inline)
    removed: tuple[str, ...]  # segments whose DV stops applying (RemoveSegment, compacted inputs)
    # DV files a compaction's row map names: a delete that read before the compaction and
    # commits after it maps its rows through them, so they live as long as the commit does
    row_map_dvs: tuple[str, ...] = ()

    @property
    def dv_paths(self) -> set[str]:
        return {path for _, path in self.set_dvs if path} | set(self.row_map_dvs)


@dataclass
class TableSummary:
    version: int = -1
    timestamp_ms: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    history: list[HistoryItem] = field(default_factory=list)
    dvs: dict[str, str | None] = field(default_factory=dict)  # segment id -> DV file path (None: inline)

    @property
    def dv_paths(self) -> set[str]:
        return {path for path in self.dvs.values() if path}

    def copy(self) -> TableSummary:
        return TableSummary(self.version, self.timestamp_ms, dict(self.properties), list(self.history), dict(self.dvs))


def summarize(snapshot: Snapshot) -> TableSummary:
    return TableSummary(
        version=snapshot.version,
        timestamp_ms=snapshot.timestamp_ms,
        properties=dict(snapshot.properties),
        history=list(snapshot.history),
        dvs={sid: ref.path for sid, ref in snapshot.dvs.items()},
    )


def apply_summary(state: TableSummary, commit: CommitSummary) -> None:
    """``state`` advanced by one commit, as ``snapshot.apply_commit`` would move the parts a summary keeps.

    A removed segment's DV stops applying; a metadata action replaces the properties.

    Raises:
        CorruptMetadataError: ``commit`` does not follow ``state``'s version."""
    if commit.version != state.version + 1:
        raise CorruptMetadataError(f"log version {commit.version}", f"does not follow version {state.version}")
    if commit.properties is not None:
        state.properties = dict(commit.properties)
    for sid, path in commit.set_dvs:
        state.dvs[sid] = path
    for sid in commit.removed:
        state.dvs.pop(sid, None)
    state.version = commit.version
    state.timestamp_ms = commit.timestamp_ms
    state.history.append(HistoryItem(commit.version, commit.timestamp_ms, commit.operation))


def parse_commit_summary(data: bytes, *, source: str, expected_version: int | None = None) -> CommitSummary:
    """The parts of a commit file GC uses.

    Failures name the file, with the same error types as ``actions.parse_commit``, whose checksum,
    envelope and version checks it shares."""
    data, checked = unseal(data, source=source)
    doc = check_envelope(data, source=source, what="commit", checked=checked)
    version = _int(doc, "version", source)
    check_version(version, source=source, expected_version=expected_version)
    timestamp_ms = _int(doc, "timestamp_ms", source)
    operation, actions = _operation_and_actions(doc, source)
    parts = _ActionParts(source)
    for i, action in enumerate(actions):
        parts.add(i, action)
    return CommitSummary(
        version, timestamp_ms, operation, parts.properties, tuple(parts.set_dvs), tuple(parts.removed), tuple(parts.row_map_dvs)
    )


def _operation_and_actions(doc: dict[str, Any], source: str) -> tuple[Operation, list[Any]]:
    raw_operation = doc.get("operation")
    actions = doc.get("actions", [])
    if not isinstance(raw_operation, str) or not isinstance(actions, list):
        raise CorruptMetadataError(source, "invalid content: 'operation' must be a string and 'actions' a list")
    try:
        return Operation(raw_operation), actions
    except ValueError:
        raise CorruptMetadataError(
            source, f"invalid content: operation {raw_operation!r} is not one of {[o.value for o in Operation]}"
        ) from None


@dataclass
class _ActionParts:
    """What a summary keeps of a commit's actions, read one action at a time.

    Each kind GC relies on has its reader (``_READERS``), every other kind is skipped unread."""

    source: str
    properties: dict[str, str] | None = None
    set_dvs: list[tuple[str, str | None]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    row_map_dvs: list[str] = field(default_factory=list)

    def add(self, i: int, action: Any) -> None:
        kind = action.get("kind") if isinstance(action, dict) else None
        if not isinstance(kind, str):
            raise CorruptMetadataError(self.source, f"invalid content: actions.{i} has no 'kind'")
        read = _READERS.get(kind)
        if read is not None:
            read(self, i, action)

    def set_dv(self, i: int, action: dict[str, Any]) -> None:
        sid = _id(action, "segment_id", self.source, i)
        self.set_dvs.append((sid, _dv_path(action.get("dv"), self.source)))

    def add_segment(self, i: int, action: dict[str, Any]) -> None:
        # GC never opens segment files, but a log naming a path outside the table is
        # hostile: refuse it here as every other reader of the log does.
        segment = action.get("segment")
        path = segment.get("path") if isinstance(segment, dict) else None
        if not isinstance(path, str):
            raise CorruptMetadataError(self.source, f"invalid content: actions.{i}.segment.path must be a string")
        check_relative_path(path, source=self.source)

    def remove_segment(self, i: int, action: dict[str, Any]) -> None:
        self.removed.append(_id(action, "segment_id", self.source, i))

    def compact(self, i: int, action: dict[str, Any]) -> None:
        for inp in _list(action, "inputs", self.source, i):
            self.removed.append(_id(inp, "segment_id", self.source, i))
            if inp.get("dv") is not None:
                path = _dv_path(inp.get("dv"), self.source)
                if path:
                    self.row_map_dvs.append(path)

    def metadata(self, i: int, action: dict[str, Any]) -> None:
        props = action.get("properties", {})
        if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
            raise CorruptMetadataError(self.source, f"invalid content: actions.{i}.properties must map strings to strings")
        self.properties = props


def _kind(model: type[BaseModel]) -> str:
    """The ``kind`` an action model is written with: ``actions`` spells each one once."""
    kind = model.model_fields["kind"].default
    assert isinstance(kind, str), f"{model.__name__} has no kind"
    return kind


_READERS: dict[str, Callable[[_ActionParts, int, dict[str, Any]], None]] = {
    _kind(SetDeletionVector): _ActionParts.set_dv,
    _kind(AddSegment): _ActionParts.add_segment,
    _kind(RemoveSegment): _ActionParts.remove_segment,
    _kind(CompactSegments): _ActionParts.compact,
    _kind(MetadataAction): _ActionParts.metadata,
}


def _int(doc: dict[str, Any], key: str, source: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise CorruptMetadataError(source, f"invalid content: {key} must be a non-negative integer, not {value!r}")
    return value


def _id(action: dict[str, Any], key: str, source: str, i: int) -> str:
    value = action.get(key)
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise CorruptMetadataError(source, f"invalid content: actions.{i}.{key} is not a valid id")
    return value


def _dv_path(raw: Any, source: str) -> str | None:
    try:
        return DeletionVectorRef.model_validate(raw, strict=True).path
    except ValidationError as exc:
        raise validation_error(source, exc) from None


def _list(action: dict[str, Any], key: str, source: str, i: int) -> list[dict[str, Any]]:
    value = action.get(key)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise CorruptMetadataError(source, f"invalid content: actions.{i}.{key} must be a list of objects")
    return value
