"""The streaming source: offsets are versions, micro-batches are the rows new versions added.

A position names the next piece of the table still to emit: ``(version, index)`` is the
``index``-th unit (one segment, see ``changes.ChangeUnit``) of what commit ``version``
changed; ``initial`` marks the units of the table as it was at ``version`` when the query
started without ``startingVersion`` (Delta's initial snapshot). The offset Spark stores is
that position plus the table id, so a table deleted and created again at the same place is
noticed instead of silently followed.

Each version is classified once (``versions.advance``): appended segments are emitted;
data-neutral commits (compaction, pushes still staged, retention) are skipped silently; a
commit that deletes or replaces rows stops the stream with ``ChangeCommitInStreamError``
unless ``skipChangeCommits`` (ignore it) or ``readChangeFeed`` (emit its changes) is set.

A micro-batch admits whole units up to ``maxRowsPerTrigger`` / ``maxBytesPerTrigger``,
always at least one, so a segment larger than the limit still makes progress. The source
pins the version it will diff against next (``pins``), extending the pin on every trigger, so
GC and vacuum keep the log and files the stream still has to read; ``close`` (Spark's
``stop()`` when the query ends) releases it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mvtable.conf import connector_settings, parse_period
from mvtable.errors import (
    ChangeCommitInStreamError,
    InvalidStreamOffsetError,
    MvTableError,
    PinError,
    StreamSchemaChangedError,
    StreamTableReplacedError,
    VersionNotFoundError,
)
from mvtable.lineage.schema_ids import breaking_change
from mvtable.storage import FileIO

from ..pinning import SnapshotPin, pin_version, release, renew
from ..post_commit import open_log
from .changes import ChangeUnit, units_of
from .versions import ChangeKind, CommitKind, SegmentChange, normalized_dv
from .walker import VersionWalker, check_readable, first_version_since

logger = logging.getLogger("mvtable.connector")


@dataclass(frozen=True, order=True)
class Position:
    """The next unit to emit.

    Ordered: an initial snapshot at ``v`` comes before the changes of version ``v + 1``."""

    version: int
    phase: int = 1  # 0: the initial snapshot at ``version``; 1: the changes of commit ``version``
    index: int = 0

    @property
    def initial(self) -> bool:
        return self.phase == 0

    def to_offset(self, table_id: str) -> dict[str, Any]:
        return {"tableId": table_id, "version": self.version, "index": self.index, "initial": self.initial}


def parse_offset(offset: Mapping[str, Any], *, table_id: str) -> Position:
    """The position of an offset this source wrote.

    Raises:
        InvalidStreamOffsetError: The offset is not one this source wrote.
        StreamTableReplacedError: The offset is of a table since deleted and created again."""
    try:
        version, index, initial, owner = offset["version"], offset["index"], offset["initial"], offset["tableId"]
    except (KeyError, TypeError):
        raise InvalidStreamOffsetError(f"stream offset {offset!r} is not an mvtable offset") from None
    if not (_count(version) and _count(index) and isinstance(initial, bool) and isinstance(owner, str)):
        raise InvalidStreamOffsetError(f"stream offset {offset!r} is not an mvtable offset")
    if owner != table_id:
        raise StreamTableReplacedError(
            f"the stream's checkpoint follows table {owner}, but the table at this location is now {table_id} "
            "(it was deleted and created again); start the query with a new checkpointLocation"
        )
    return Position(version, 0 if initial else 1, index)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class SourceOptions:
    starting_version: int | None = None
    starting_latest: bool = False
    starting_timestamp_ms: int | None = None
    max_rows: int | None = None
    max_bytes: int | None = None
    skip_change_commits: bool = False
    change_feed: bool = False


class StreamSource:
    """The Spark-free logic of the streaming source; one per running query.

    Spark keeps the stream reader in one long-lived driver process."""

    def __init__(self, io: FileIO, options: SourceOptions, *, pin_ttl: str | None = None) -> None:
        self.io = io
        self.options = options
        self.commit_log = open_log(io)
        self.walker = VersionWalker(self.commit_log)
        newest = self.commit_log.snapshot()
        self.table_id = newest.table_id
        # the schema the stream runs with, fixed when it starts (as Spark fixes the stream's
        # columns): every segment is read by its field ids; a later change that is more than
        # an addition stops the stream (``StreamSchemaChangedError``), and a restart takes it up
        self.table_schema = newest.table_schema
        self.primary_key = newest.primary_key
        self.pin_ttl = pin_ttl
        self._target: int | None = None  # availableNow: the newest version to read
        self._initial: dict[int, list[ChangeUnit]] = {}
        self._pin: tuple[SnapshotPin, float] | None = None  # (pin, when last extended)

    # -- offsets -------------------------------------------------------------------------
    def initial_position(self) -> Position:
        listing = self.commit_log.listing()
        latest = listing.latest
        opts = self.options
        if opts.starting_latest:
            return Position(latest + 1)
        if opts.starting_version is not None:
            if opts.starting_version > latest:
                raise VersionNotFoundError(
                    f"startingVersion {opts.starting_version} does not exist yet; the table's versions end at {latest}"
                )
            check_readable(opts.starting_version, listing, option="startingVersion")
            return Position(opts.starting_version)
        if opts.starting_timestamp_ms is not None:
            newest = self.commit_log.snapshot(listing=listing)
            return Position(first_version_since(listing, newest, opts.starting_timestamp_ms))
        return Position(latest, phase=0)

    def prepare_available_now(self) -> None:
        """``trigger(availableNow=True)``: read up to the version that is newest now."""
        self._target = self.commit_log.latest_version()

    def latest_position(self, start: Position, *, limited: bool) -> Position:
        """Where the next micro-batch ends: after as many units as the limits admit (all when not ``limited``).

        It never goes past a change commit that must stop the stream (the rows before it
        are emitted first)."""
        self.hold(start)
        end = self._target if self._target is not None else self.commit_log.latest_version()
        max_rows = self.options.max_rows if limited else None
        max_bytes = self.options.max_bytes if limited else None
        rows = size = admitted = 0
        pos = start
        while pos.initial or pos.version <= end:
            try:
                units = self.units_at(pos)
            except (ChangeCommitInStreamError, StreamSchemaChangedError):
                if admitted:
                    return pos
                raise
            for unit in units[pos.index :]:
                over_rows = max_rows is not None and rows + unit.rows > max_rows
                over_bytes = max_bytes is not None and size + unit.bytes > max_bytes
                if admitted and (over_rows or over_bytes):
                    return pos
                rows, size, admitted = rows + unit.rows, size + unit.bytes, admitted + 1
                pos = Position(pos.version, pos.phase, pos.index + 1)
            pos = Position(pos.version + 1)
        return pos

    def units_between(self, start: Position, end: Position) -> list[ChangeUnit]:
        """The units of the micro-batch ``[start, end)``, the same ones on every call.

        A batch replayed after a restart then emits exactly what it did the first time."""
        out: list[ChangeUnit] = []
        pos = start
        while pos < end:
            units = self.units_at(pos)
            stop = end.index if (end.version, end.phase) == (pos.version, pos.phase) else len(units)
            out.extend(units[pos.index : stop])
            pos = Position(pos.version + 1)
        return out

    def committed(self, end: Position) -> None:
        """Spark has processed everything before ``end``: forget it, move the pin up."""
        self.walker.forget_before(end.version)
        for v in [v for v in self._initial if not (end.initial and v == end.version)]:
            del self._initial[v]
        self.hold(end)

    # -- what a version emits ------------------------------------------------------------
    def units_at(self, pos: Position) -> list[ChangeUnit]:
        if pos.initial:
            return self._initial_units(pos.version)
        delta = self.walker.delta(pos.version)
        if delta.schema is not None and delta.schema != self.table_schema:
            change = breaking_change(self.table_schema, delta.schema)
            if change is not None:
                raise StreamSchemaChangedError(delta.version, change)
        if delta.kind is CommitKind.NEUTRAL:
            return []
        if delta.kind is CommitKind.APPEND or self.options.change_feed:
            return units_of(delta)
        if self.options.skip_change_commits:
            return []
        raise ChangeCommitInStreamError(delta.version, delta.operation)

    def _initial_units(self, version: int) -> list[ChangeUnit]:
        units = self._initial.get(version)
        if units is None:
            snapshot = self.commit_log.snapshot(version)
            units = [
                ChangeUnit(
                    version,
                    snapshot.timestamp_ms,
                    (SegmentChange(seg.file, ChangeKind.INSERT_LIVE, dv_after=normalized_dv(snapshot.dvs.get(seg.id))),),
                )
                for seg in snapshot.visible_segments()
            ]
            self._initial[version] = units
        return units

    # -- pins ----------------------------------------------------------------------------
    def hold(self, pos: Position) -> None:
        """Pin what reading from ``pos`` needs: the snapshot the next version is diffed against.

        At the start that is the initial snapshot itself. Renewed at most every few seconds."""
        version = pos.version if pos.initial else max(pos.version - 1, 0)
        now = time.monotonic()
        if self._pin is not None and self._pin[0].version == version:
            if now - self._pin[1] < _EXTEND_EVERY_S:
                return
            try:
                self._pin = (renew(self.io, self._pin[0], ttl_s=self._ttl_s()), now)
                return
            except PinError as exc:
                logger.warning("stream pin %s could not be extended (%s); pinning version %s again", self._pin[0], exc, version)
        old = self._pin
        self._pin = (pin_version(self.io, version, ttl_s=self._ttl_s(), owner="stream"), now)
        if old is not None:
            release(self.io, old[0])

    def close(self) -> None:
        """The query has ended: release the pin now.

        Left in place, it would keep GC and vacuum from collecting what its version needs
        for ``pinTtl`` (an hour by default) although no query reads the table any more.
        Calling it twice, or on a source that never pinned, does nothing; a source used
        again pins again.

        A pin that cannot be removed (storage unreachable) is logged, not raised: the query
        is over either way, and the pin expires by itself."""
        held, self._pin = self._pin, None
        if held is None:
            return
        try:
            release(self.io, held[0])
        except (OSError, MvTableError) as exc:
            logger.warning("stream pin %s could not be released (%s); it expires by itself (pinTtl)", held[0], exc)

    def _ttl_s(self) -> float:
        return parse_period(self.pin_ttl or connector_settings().pin_ttl, name="pinTtl")


_EXTEND_EVERY_S = 10.0
