"""What the ``Table`` API's writes and maintenance calls return: frozen values, one per call.

Every result ends in ``Result`` and says what the call did, with the version it committed
(``None`` where nothing was committed). They are values: frozen, compared by their fields,
with tuples where a tally had lists, so a caller can keep, hash and share one without
changing the table or another caller's copy. The internal tallies that compaction, vacuum
and GC fill while they run are converted here, at the API's edge (``of``).

``append`` and ``overwrite`` returned the commit log's internal ``CommitResult`` before
``WriteResult``: its ``commit`` and ``snapshot`` still answer for one release, with a
``DeprecationWarning`` (the snapshot read-only, as ``Table.snapshot()`` gives it).

``delete`` returned an ``int`` before ``DeleteResult``: for one release a ``DeleteResult``
still compares, adds and converts like that number, with a ``DeprecationWarning``; read
``deleted_rows`` instead. This follows delta-rs, whose ``DeltaTable.delete`` returns the
operation's metrics (``num_deleted_rows`` …) rather than a bare count."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from mvtable.lineage.enums import Operation
from mvtable.lineage.log import CommitResult

from .holds import Hold
from .snapshot_view import read_only

if TYPE_CHECKING:
    from mvtable.lineage.actions import Commit
    from mvtable.lineage.snapshot import Snapshot

__all__ = [
    "CompactionResult",
    "DeleteResult",
    "DroppedBin",
    "GCResult",
    "TransactionResult",
    "UpsertResult",
    "VacuumResult",
    "WriteResult",
]

_R = TypeVar("_R", bound="_FromTally")


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated and goes away in the next release; use {new}", DeprecationWarning, stacklevel=3)


class _FromTally:
    """A frozen result built from the mutable tally of the same fields (lists become tuples)."""

    @classmethod
    def of(cls: type[_R], tally: Any) -> _R:
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            value = getattr(tally, f.name)
            values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)


@dataclass(frozen=True)
class WriteResult:
    """What ``append``/``overwrite``/``write`` committed.

    The new ``version`` (read at ``read_version``; ``attempts`` > 1 when concurrent commits made it
    retry), the rows, segments and bytes it added, and for a consistent push its lineage ``entry``."""

    version: int
    read_version: int
    operation: Operation
    added_rows: int = 0
    added_segments: int = 0
    added_bytes: int = 0
    attempts: int = 1
    entry: str | None = None
    # for the deprecated ``commit``/``snapshot`` only: attributes, not fields, so that
    # ``asdict``, ``repr`` and ``==`` see the result's values and nothing internal
    _commit: ClassVar[Commit | None] = None
    _snapshot: ClassVar[Snapshot | None] = None

    @classmethod
    def of(cls, result: CommitResult) -> WriteResult:
        """From the commit log's result (kept for the deprecated ``commit``/``snapshot``)."""
        c = result.commit
        metrics = c.metrics
        entry = c.parameters.get("entry")
        written = cls(
            version=c.version,
            read_version=c.read_version,
            operation=c.operation,
            added_rows=int(metrics.get("added_rows", 0)),
            added_segments=int(metrics.get("added_segments", 0)),
            added_bytes=int(metrics.get("added_bytes", 0)),
            attempts=result.attempts,
            entry=entry if isinstance(entry, str) else None,
        )
        object.__setattr__(written, "_commit", c)  # frozen: set past __setattr__, as dataclasses do
        object.__setattr__(written, "_snapshot", result.snapshot)
        return written

    @property
    def commit(self) -> Commit:
        """Deprecated: the internal commit record; use ``version``, ``read_version``, ``operation``."""
        _deprecated("WriteResult.commit", "WriteResult.version / read_version / operation")
        assert self._commit is not None
        return self._commit

    @property
    def snapshot(self) -> Snapshot:
        """Deprecated: the table's read-only snapshot after the write; use ``Table.snapshot()``."""
        _deprecated("WriteResult.snapshot", "Table.snapshot()")
        assert self._snapshot is not None
        return read_only(self._snapshot)  # made here, not on every write


@dataclass(frozen=True, eq=False)
class DeleteResult:
    """What a delete did: ``deleted_rows`` in ``segments`` segments, committed as ``version``.

    ``version`` is ``None`` when nothing changed: no row matched, or every addressed row was deleted
    already. ``remapped_rows``: rows addressed in segments that a compaction rewrote after the read,
    deleted in its outputs instead."""

    deleted_rows: int
    version: int | None
    segments: int
    remapped_rows: int = 0

    def _fields(self) -> tuple[int, int | None, int, int]:
        return (self.deleted_rows, self.version, self.segments, self.remapped_rows)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DeleteResult):
            return self._fields() == other._fields()
        if isinstance(other, int) and not isinstance(other, bool):
            _deprecated("comparing a DeleteResult with an int", "DeleteResult.deleted_rows")
            return self.deleted_rows == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._fields())

    # the int that Table.delete returned before, for one release
    def _count(self, what: str) -> int:
        warnings.warn(
            f"{what} of a DeleteResult (Table.delete returned an int before) is deprecated and goes away in "
            "the next release; use DeleteResult.deleted_rows",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.deleted_rows

    def __int__(self) -> int:
        return self._count("int()")

    def __index__(self) -> int:
        return self._count("using as an index")

    def __lt__(self, other: int) -> bool:
        return self._count("ordering") < other

    def __le__(self, other: int) -> bool:
        return self._count("ordering") <= other

    def __gt__(self, other: int) -> bool:
        return self._count("ordering") > other

    def __ge__(self, other: int) -> bool:
        return self._count("ordering") >= other

    def __add__(self, other: int) -> int:
        return self._count("arithmetic") + int(other)

    def __radd__(self, other: int) -> int:
        return int(other) + self._count("arithmetic")


@dataclass(frozen=True)
class UpsertResult:
    """What an upsert did: rows inserted and updated, and the version it committed.

    Rows of the data whose key was new count as ``inserted_rows``; those that replaced a row of the
    table as ``updated_rows``."""

    inserted_rows: int
    updated_rows: int
    version: int


@dataclass(frozen=True)
class DroppedBin:
    """A bin a compaction left as it was, and why (a concurrent push replaced its segments)."""

    segments: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class CompactionResult(_FromTally):
    """What a compaction did (``dry_run``: would do).

    ``complete`` is False when bins were dropped; running it again picks up what is left."""

    dry_run: bool
    bins: int = 0  # planned
    committed_bins: int = 0
    input_segments: int = 0
    output_segments: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    rows_dropped: int = 0  # deleted rows purged from storage
    deletes_remapped: int = 0  # rows deleted during the compaction, carried onto outputs
    commits: tuple[int, ...] = ()
    dropped: tuple[DroppedBin, ...] = ()
    reasons: tuple[str, ...] = ()  # why there was nothing to compact

    @property
    def complete(self) -> bool:
        return not self.dropped

    @property
    def changed(self) -> bool:
        return bool(self.commits)

    def as_dict(self) -> dict[str, Any]:
        """Every field (sequences as lists), plus ``complete`` and ``changed`` (for JSON output)."""
        fields = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}
        return {**fields, "complete": self.complete, "changed": self.changed}

    def summary(self) -> str:
        """One line for people."""
        if not self.bins:
            return "nothing to compact" + (": " + "; ".join(self.reasons) if self.reasons else "")
        verb = "would rewrite" if self.dry_run else "rewrote"
        bins = self.bins if self.dry_run else self.committed_bins
        text = (
            f"{verb} {self.input_segments} segment(s) in {bins} bin(s)"
            + ("" if self.dry_run else f" into {self.output_segments}, {len(self.commits)} commit(s)")
            + f"; {self.rows_dropped} deleted row(s) purged"
        )
        if self.deletes_remapped:
            text += f", {self.deletes_remapped} concurrent delete(s) carried over"
        if self.dropped:
            text += f"; {len(self.dropped)} bin(s) dropped (a concurrent push replaced them): run again later"
        return text


@dataclass(frozen=True)
class VacuumResult(_FromTally):
    """What a vacuum removed (``dry_run``: would remove).

    ``complete`` is False when the time budget ran out; run it again to go on. ``safe_version`` is
    the oldest version every retained reader can still open."""

    dry_run: bool
    retention_s: float
    safe_version: int
    files: tuple[str, ...] = ()  # data, DV and log files removed (or that would be)
    bytes: int = 0
    segments_expired: int = 0  # segments retention removed from the table (logically)
    entries_purged: int = 0
    orphans: int = 0
    complete: bool = True
    batches: int = 0
    retention_commits: tuple[int, ...] = ()
    segments_pruned: int = 0  # removed segments the newest snapshot forgets
    held_back: tuple[Hold, ...] = ()  # why files stayed: pins, retention, grace
    partitions_dropped: tuple[str, ...] = ()  # partitionRetention: partitions dropped (dry run: that would be)
    partition_drop_version: int | None = None  # the DROP_PARTITIONS commit


@dataclass(frozen=True)
class PartitioningResult:
    """What ``update_partitioning`` did: the default spec now, and the commit (None when it already was)."""

    spec_id: int
    fields: tuple[str, ...]  # each field as ``transform(column)``, e.g. ``day(ts)``
    version: int | None
    changed: bool


@dataclass(frozen=True)
class GCResult(_FromTally):
    """What one visibility GC run did (``dry_run``: would do).

    ``complete`` is False when the run stopped early (time budget, or pins kept moving); run GC
    again to finish. ``deleted`` lists the table-relative paths removed."""

    safe_version: int
    dv_files_deleted: int = 0
    log_files_deleted: int = 0
    pins_expired: int = 0
    bytes_freed: int = 0
    complete: bool = True
    batches: int = 0
    dry_run: bool = False
    retention_version: int | None = None
    pinned_version: int | None = None
    log_checkpoint: int | None = None  # the checkpoint the log now starts at
    dv_files_in_grace: int = 0  # unreferenced DV files kept: younger than orphanGracePeriod
    replans: int = 0
    deleted: tuple[str, ...] = ()
    held_back: tuple[Hold, ...] = ()  # why files stayed: pins, retention, grace, checkpoints


@dataclass(frozen=True)
class TransactionResult:
    """What a multi-table transaction did: its id and, per table (by URI), the version that made its writes visible.

    A version is None where the table's finalize was left to the next reader or writer (the
    transaction is committed all the same: ``consistent_versions`` finishes it). ``outcome``
    is ``COMMITTED`` for a transaction's commit, ``ROLLED_BACK`` for ``rollback_transaction``;
    ``changed`` lists the tables this call committed to (a repeated rollback changes none)."""

    transaction_id: str
    versions: tuple[tuple[str, int | None], ...]
    outcome: str
    changed: tuple[str, ...] = ()

    def version_of(self, uri: str) -> int | None:
        """The finalized version of the table at ``uri``; None when it is not finalized yet.

        Raises:
            KeyError: The transaction did not write ``uri``."""
        for table, version in self.versions:
            if table == uri or table.rstrip("/") == uri.rstrip("/"):
                return version
        raise KeyError(uri)
