"""Segment descriptors as a snapshot keeps them in memory.

The log's wire format for a segment is the pydantic ``SegmentFile`` (validated field by
field when a commit is parsed). A snapshot, though, may hold 100,000 segments, and building
one validated pydantic object per segment and row group costs more than the whole planning
budget, so snapshots hold these plain slotted objects instead: the same attributes (``id``,
``path``, ``num_rows``, ``size_bytes``, ``row_groups`` and per row group ``num_rows``,
``first_row``, ``total_byte_size``, ``stats``), an order of magnitude cheaper to build.

Checkpoints validate their columns vectorised before building descriptors, except the
per-row-group statistics: those stay the raw JSON text the checkpoint holds and are parsed
and validated strictly the first time ``stats`` is read (only planning with a filter reads
them). A corrupt statistic then raises ``CorruptMetadataError`` naming the checkpoint file.

Descriptors are immutable by convention (nothing in mvtable assigns to them), compare equal
to a ``SegmentFile``/``RowGroupInfo`` with the same content, and pickle small (Spark ships
them to executors inside scan tasks).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pydantic import TypeAdapter, ValidationError

from mvtable.errors import CorruptMetadataError

from .actions import ColumnStats, RowGroupInfo, SegmentFile, validation_error
from .partitioning import PartitionValue

__all__ = ["RowGroupDescriptor", "SegmentDescriptor", "describe", "paused_gc", "stats_json"]

_STATS = TypeAdapter(dict[str, ColumnStats])


class RowGroupDescriptor:
    """One row group: its size, its offset in file order and its column statistics.

    ``stats`` is given parsed (from a commit) or as ``raw_stats``, the JSON text of a
    checkpoint, with ``source`` naming that file for errors."""

    __slots__ = ("num_rows", "first_row", "total_byte_size", "_stats", "_raw", "_source")

    def __init__(
        self,
        num_rows: int,
        first_row: int,
        total_byte_size: int,
        stats: Mapping[str, ColumnStats] | None = None,
        raw_stats: str | None = None,
        source: str = "",
    ) -> None:
        # Positional on purpose: a checkpoint builds one per row group with ``map``.
        self.num_rows = num_rows
        self.first_row = first_row
        self.total_byte_size = total_byte_size
        self._stats = stats if stats is not None or raw_stats is not None else {}
        self._raw = raw_stats
        self._source = source

    @property
    def stats(self) -> Mapping[str, ColumnStats]:
        """Column name → statistics; parsed and validated on first use."""
        stats = self._stats
        if stats is None:
            stats = self._stats = parse_stats(self._raw or "{}", source=self._source)
        return stats

    def stats_json(self) -> str:
        """The statistics as JSON text, without parsing them when they are still raw."""
        if self._stats is None and self._raw is not None:
            return self._raw
        return stats_json(self._stats or {})

    def to_row_group_info(self) -> RowGroupInfo:
        return RowGroupInfo(
            num_rows=self.num_rows, first_row=self.first_row, total_byte_size=self.total_byte_size, stats=dict(self.stats)
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (RowGroupDescriptor, RowGroupInfo)):
            return NotImplemented
        if (self.num_rows, self.first_row, self.total_byte_size) != (other.num_rows, other.first_row, other.total_byte_size):
            return False
        if isinstance(other, RowGroupDescriptor) and self._stats is None and other._stats is None and self._raw == other._raw:
            return True  # same text, no need to parse either
        return dict(self.stats) == dict(other.stats)

    def __hash__(self) -> int:
        return hash((self.num_rows, self.first_row, self.total_byte_size))

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.num_rows, self.first_row, self.total_byte_size, self._stats, self._raw, self._source)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.num_rows, self.first_row, self.total_byte_size, self._stats, self._raw, self._source = state

    def __repr__(self) -> str:
        stats = "<raw>" if self._stats is None else f"{len(self._stats)} columns"
        return f"RowGroupDescriptor(num_rows={self.num_rows}, first_row={self.first_row}, total_byte_size={self.total_byte_size}, stats={stats})"


class SegmentDescriptor:
    """A segment file as a snapshot knows it (see the module docstring).

    ``spec_id``/``partition``: the partition spec it was written under and its partition
    tuple (None: unpartitioned). Segments of one partition share one tuple object."""

    __slots__ = ("id", "path", "num_rows", "size_bytes", "row_groups", "footer_crc32", "spec_id", "partition")

    def __init__(
        self,
        id: str,
        path: str,
        num_rows: int,
        size_bytes: int,
        row_groups: tuple[RowGroupDescriptor, ...] = (),
        footer_crc32: int | None = None,
        spec_id: int | None = None,
        partition: tuple[PartitionValue, ...] | None = None,
    ) -> None:
        self.id = id
        self.path = path
        self.num_rows = num_rows
        self.size_bytes = size_bytes
        self.row_groups = row_groups
        self.footer_crc32 = footer_crc32
        self.spec_id = spec_id
        self.partition = partition

    def to_segment_file(self, **update: Any) -> SegmentFile:
        """A validated ``SegmentFile`` with ``update`` applied; statistics are validated on the way.

        It serves a commit that names this file again, e.g. a restore's clone."""
        fields: dict[str, Any] = {
            "id": self.id,
            "path": self.path,
            "num_rows": self.num_rows,
            "size_bytes": self.size_bytes,
            "row_groups": tuple(rg.to_row_group_info() for rg in self.row_groups),
            "footer_crc32": self.footer_crc32,
            "spec_id": self.spec_id,
            "partition": self.partition,
        }
        fields.update(update)
        return SegmentFile(**fields)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (SegmentDescriptor, SegmentFile)):
            return NotImplemented
        return (self.id, self.path, self.num_rows, self.size_bytes, self.footer_crc32, self.spec_id, self.partition) == (
            other.id,
            other.path,
            other.num_rows,
            other.size_bytes,
            other.footer_crc32,
            other.spec_id,
            other.partition,
        ) and (len(self.row_groups) == len(other.row_groups) and all(a == b for a, b in zip(self.row_groups, other.row_groups)))

    def __hash__(self) -> int:
        return hash((self.id, self.path, self.num_rows, self.size_bytes))

    def __getstate__(self) -> tuple[Any, ...]:
        if self.spec_id is None and self.partition is None:  # unpartitioned: pickles as before
            return (self.id, self.path, self.num_rows, self.size_bytes, self.row_groups, self.footer_crc32)
        return (
            self.id,
            self.path,
            self.num_rows,
            self.size_bytes,
            self.row_groups,
            self.footer_crc32,
            self.spec_id,
            self.partition,
        )

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.id, self.path, self.num_rows, self.size_bytes, self.row_groups, self.footer_crc32 = state[:6]
        self.spec_id, self.partition = state[6:] if len(state) > 6 else (None, None)

    def __repr__(self) -> str:
        part = "" if self.spec_id is None else f", spec_id={self.spec_id}, partition={self.partition!r}"
        return f"SegmentDescriptor(id={self.id!r}, path={self.path!r}, num_rows={self.num_rows}, size_bytes={self.size_bytes}, row_groups={len(self.row_groups)}{part})"


def describe(segment: SegmentFile | SegmentDescriptor) -> SegmentDescriptor:
    """The descriptor of a validated ``SegmentFile`` (a commit's ``AddSegment``)."""
    if isinstance(segment, SegmentDescriptor):
        return segment
    return SegmentDescriptor(
        segment.id,
        segment.path,
        segment.num_rows,
        segment.size_bytes,
        tuple(RowGroupDescriptor(rg.num_rows, rg.first_row, rg.total_byte_size, rg.stats) for rg in segment.row_groups),
        segment.footer_crc32,
        segment.spec_id,
        segment.partition,
    )


def parse_stats(raw: str, *, source: str) -> dict[str, ColumnStats]:
    """Row group statistics from their JSON text, as strictly as a commit's are.

    Raises:
        CorruptMetadataError: The text is not valid statistics; the error names ``source``."""
    try:
        return _STATS.validate_json(raw, strict=True)
    except ValidationError as exc:
        err = validation_error(source, exc)
        raise type(err)(source, f"row group statistics: {err.problem}") from None
    except (TypeError, ValueError) as exc:  # not text at all
        raise CorruptMetadataError(source, f"row group statistics: {exc}") from None


def stats_json(stats: Mapping[str, ColumnStats]) -> str:
    """Canonical JSON text of parsed statistics (what ``parse_stats`` reads back)."""
    return _STATS.dump_json(dict(stats)).decode()


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while building many small objects.

    A 10,000-segment snapshot allocates ~40,000 container objects; every 700 allocations
    start a collection, and the older generations' ones traverse everything built so far,
    which costs a large share of building the snapshot. None of these objects form cycles, so
    deferring collection loses nothing. Re-enables only what it disabled."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
