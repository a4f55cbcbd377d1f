"""Keyed commits: duplicate-free appends, upsert and delete by key, each one commit.

Every keyed write looks its keys up in the snapshot it read (``lookup``), then commits
through ``commit_keyed``: on each attempt the builder checks its key hashes against every
commit since the snapshot it last looked at (``lineage.key_filters``, pure). A commit that
may have made one of its keys visible sends it back to look again, at the rows those
commits made visible only; then an append raises ``DuplicateKeyError`` (or retries, when
the filter said "maybe" falsely), and an upsert or a delete by key also deletes the rows
it finds there and retries. So two writers inserting the same new key can never both land.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from mvtable.errors import ConcurrentKeyError, DuplicateKeyError
from mvtable.lineage.actions import Action, Commit, SegmentFile
from mvtable.lineage.descriptors import SegmentDescriptor
from mvtable.lineage.enums import LineageState, Operation
from mvtable.lineage.key_filters import inserted_keys, key_effects, possible_conflicts
from mvtable.lineage.log import Builder, CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot
from mvtable.lineage.transactions import is_transaction
from mvtable.storage import FileIO
from mvtable.visibility import bitmap_from_array

from ..deletes import DeleteAttempt
from ..key_hashing import hash_keys
from ..key_index import index_path
from ..scan import ScanTask, task_masks
from ..schema import schema_from_json
from ..segments import open_parquet
from .lookup import KeyMatches, find_keys
from .validate import check_unique, describe_keys, key_table, key_tuples

__all__ = [
    "KeyedDeletes",
    "KeyedRows",
    "check_absent",
    "commit_keyed",
    "held_keys",
    "keyed_rows",
    "live_segment_keys",
    "lookup",
    "present_keys",
]

# How many times a keyed commit looks again after concurrent commits touched its keys.
MAX_KEY_RECHECKS = 20


@dataclass
class KeyedRows:
    """The keys a write carries: their hashes, and their values cast to the table's key types.

    A Spark driver that only got hashes from its tasks loads the values on demand from the segments
    the tasks wrote."""

    columns: tuple[str, ...]
    hashes: np.ndarray
    values: pa.Table | None = None
    load: Callable[[], pa.Table] | None = field(default=None, repr=False)

    @property
    def keys(self) -> pa.Table:
        if self.values is None:
            assert self.load is not None, "KeyedRows without values needs a loader"
            self.values = self.load()
        return self.values


def keyed_rows(schema: pa.Schema, columns: Sequence[str], data: pa.Table, *, unique: bool = True) -> KeyedRows:
    """Validate and hash the keys of ``data``.

    Missing, mistyped or null key columns get typed errors; a key repeated inside ``data`` is a
    ``DuplicateKeyError`` when ``unique``."""
    keys = key_table(data, schema, columns)
    hashes = hash_keys(keys, columns)
    if unique:
        check_unique(keys, hashes)
    return KeyedRows(tuple(columns), hashes, keys)


def segment_keys(
    io: FileIO, segments: Sequence[SegmentFile | SegmentDescriptor], columns: Sequence[str], *, hashes: np.ndarray | None = None
) -> KeyedRows:
    """The keys of segments a write has just written.

    With ``hashes`` (from the tasks that wrote them) the values are read only if needed: when two
    hashes collide (then the values decide whether a key repeats) or when a concurrent commit makes
    the keys worth a look."""
    columns = tuple(columns)

    def load() -> pa.Table:
        parts = [open_parquet(io, s.path, footer_crc32=s.footer_crc32).read(columns=list(columns)) for s in segments]
        return pa.concat_tables(parts)

    if hashes is None:
        values = load()
        rows = KeyedRows(columns, hash_keys(values, columns), values)
    else:
        rows = KeyedRows(columns, hashes, load=load)
    sorted_h = np.sort(rows.hashes)  # a repeated hash (rare) makes the values worth loading
    if (sorted_h[1:] == sorted_h[:-1]).any():
        check_unique(rows.keys, rows.hashes)
    return rows


def live_segment_keys(io: FileIO, snapshot: Snapshot, segment_ids: Sequence[str], columns: Sequence[str]) -> KeyedRows:
    """The keys of the live rows of segments that a commit would make visible again.

    Deletion vectors of ``snapshot`` applied; e.g. a rolled-back push's replaced segments."""
    columns = tuple(columns)
    schema = schema_from_json(snapshot.table_schema)  # old segments: key columns by field id
    parts = []
    for sid in segment_ids:
        seg = snapshot.segments[sid].file
        keys = open_parquet(io, seg.path, footer_crc32=seg.footer_crc32, schema=schema).read(columns=list(columns))
        masks = task_masks(io, ScanTask(seg, (), snapshot.dvs.get(sid)))
        keep = masks.keep_mask(0, keys.num_rows) if masks is not None else None
        parts.append(keys.filter(pa.array(keep)) if keep is not None else keys)
    values = pa.concat_tables(parts) if parts else pa.table({c: [] for c in columns})
    return KeyedRows(columns, hash_keys(values, columns), values)


def lookup(io: FileIO, snapshot: Snapshot, rows: KeyedRows, *, segment_ids: Sequence[str] | None = None) -> KeyMatches:
    """Where ``rows``' keys live in ``snapshot`` (its visible segments, or ``segment_ids``)."""

    def masks_for(sid: str) -> Any:
        seg = snapshot.segments[sid]
        return task_masks(io, ScanTask(seg.file, (), snapshot.dvs.get(sid)))

    return find_keys(io, snapshot, rows.keys, rows.hashes, segment_ids=segment_ids, masks_for=masks_for)


def present_keys(io: FileIO, snapshot: Snapshot, rows: KeyedRows, *, segment_ids: Sequence[str] | None = None) -> pa.Table | None:
    """The keys of ``rows`` that live rows of ``snapshot`` (or of its ``segment_ids``) hold, or ``None`` when there are none."""
    if not snapshot.exists or not len(rows.hashes):
        return None
    found = lookup(io, snapshot, rows, segment_ids=segment_ids)
    return rows.keys.filter(pa.array(found.matched)) if found.matched.any() else None


def check_absent(io: FileIO, snapshot: Snapshot, rows: KeyedRows, *, segment_ids: Sequence[str] | None = None) -> None:
    """``DuplicateKeyError`` naming up to ten keys of ``rows`` that ``snapshot`` holds.

    Raises:
        DuplicateKeyError: A key is in the table already; use upsert to replace those rows."""
    dup = present_keys(io, snapshot, rows, segment_ids=segment_ids)
    if dup is not None:
        raise DuplicateKeyError(
            f"{dup.num_rows} key(s) already in the table at version {snapshot.version}: {describe_keys(dup)}; "
            "use upsert to replace those rows",
            keys=key_tuples(dup),
        )


def write_keyed(
    io: FileIO,
    read: Snapshot,
    schema: pa.Schema,
    key: Sequence[str],
    data: pa.Table,
    *,
    replace: bool,
    write: Callable[[], list[SegmentFile]],
) -> tuple[KeyedRows, list[SegmentFile]]:
    """The checks of a keyed append or overwrite, and ``write()`` of the segments.

    An append (``replace=False``) lets no key repeat in ``data`` or be in ``read`` already. An
    overwrite or consistent push (``replace=True``) replaces what was read with ``data``, so its
    keys need only be unique among themselves.

    The key errors of ``data`` itself (nulls, types, repeats) are raised before anything is
    written. The lookup in ``read`` then runs while the segments are written (the files do
    not depend on what it finds: encoding overlaps the probes), and a ``DuplicateKeyError``
    removes the files again, so nothing of a refused append stays."""
    rows = keyed_rows(schema, key, data)
    if replace:
        return rows, write()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="mvtable-append") as pool:
        writing = pool.submit(write)
        try:
            check_absent(io, read, rows)
        except BaseException:
            try:
                written = writing.result()
            except BaseException:
                written = []  # the write failed too; the key error is the one to report
            io.delete([p for s in written for p in (s.path, index_path(s.path))])
            raise
        return rows, writing.result()


def changed_segments(before: Snapshot, after: Snapshot) -> list[str]:
    """Segments visible in ``after`` that may show rows ``before`` did not.

    Newly visible ones, and those whose deletion vector changed (a restore can bring rows back)."""
    seen = set(before.visible_segment_ids()) if before.exists else set()
    return [sid for sid in after.visible_segment_ids() if sid not in seen or after.dvs.get(sid) != before.dvs.get(sid)]


def commit_keyed(
    commit_log: CommitLog,
    *,
    read: Snapshot,
    current: Snapshot | None,
    operation: Operation,
    build: Builder,
    rows: KeyedRows,
    record: bool,
    on_new_rows: Callable[[Snapshot, list[str]], None],
    parameters: dict[str, Any] | None = None,
    metrics: Mapping[str, float | int] | Callable[[], Mapping[str, float | int]] | None = None,
    since: Snapshot | None = None,
    transaction: str | None = None,
) -> CommitResult:
    """Commit ``build``'s actions once no commit since the last look may have made one of ``rows``' keys visible.

    When ``record``, the filter of ``rows``' keys is committed too.

    ``on_new_rows(snapshot, segment_ids)`` is called when some did: it looks at those
    segments of the newer snapshot and raises (an append's ``DuplicateKeyError``) or takes
    the rows it finds into account (upsert, delete by key); the attempt then builds against
    that snapshot. The look happens inside the commit's own attempts, so a keyed commit
    retries in one loop, the commit log's. ``since`` is the snapshot the keys were last
    checked against when that is older than ``read`` (a staged push is published long
    after its data was checked). Keys that a prepared multi-table transaction writes are
    held until it finishes (``held_keys``); ``transaction`` is the committing transaction's
    own id, whose rows do not count.

    Raises:
        ConcurrentKeyError: concurrent commits touched the keys too many times in a row.
    """
    keys = _KeyCheck(
        commit_log, rows, operation, on_new_rows, checked=since if since is not None else read, transaction=transaction
    )
    recorded: list[Action] = [inserted_keys(rows.columns, rows.hashes)] if record else []

    def checked_build(cur: Snapshot) -> Sequence[Action]:
        keys.look_again(cur)
        return [*build(cur), *recorded]

    return commit_log.commit(
        read=read,
        current=current,
        operation=operation,
        build=checked_build,
        parameters={**(parameters or {}), "primary_key": list(rows.columns)},
        metrics=metrics,
    )


def held_keys(io: FileIO, snapshot: Snapshot, rows: KeyedRows, *, own: str | None = None) -> tuple[str, pa.Table] | None:
    """(a prepared multi-table transaction, the keys of ``rows`` its new rows hold), or None.

    A prepared transaction's rows are invisible until its finalize, which no key check can
    stop any more (the decision is taken), so its keys are held from the prepare on: a
    concurrent write of one would be a duplicate the moment the transaction commits. Its
    new rows are the segments it adds, not the clones a delete or upsert makes of existing
    ones (those rows are visible already and checked as such)."""
    for entry in snapshot.lineage.values():
        if entry.state != LineageState.IN_PROGRESS or not is_transaction(entry.id) or entry.id == own:
            continue
        replaced = {snapshot.segments[sid].file.path for sid in entry.segments_from if sid in snapshot.segments}
        new = [sid for sid in entry.segments_to if sid in snapshot.segments and snapshot.segments[sid].file.path not in replaced]
        found = present_keys(io, snapshot, rows, segment_ids=new) if new else None
        if found is not None:
            return entry.id, found
    return None


@dataclass
class _KeyCheck:
    """The keys of one keyed commit and the snapshot they were last looked at in.

    They are checked again on each attempt against every commit since (their key filters, read
    once)."""

    commit_log: CommitLog
    rows: KeyedRows
    operation: Operation
    on_new_rows: Callable[[Snapshot, list[str]], None]
    checked: Snapshot
    commits: dict[int, Commit] = field(default_factory=dict)
    looks: int = 0
    transaction: str | None = None  # the committing multi-table transaction (its own rows are no conflict)

    def look_again(self, cur: Snapshot) -> None:
        """Look at the commits up to ``cur`` that may have made one of the keys visible.

        Nothing happens when there are none; else ``on_new_rows`` looks at what those commits made
        visible and ``cur`` becomes the last look. First, keys a prepared transaction writes are
        refused until it finishes (a delete by key need not wait: it removes what is visible)."""
        if self.operation != Operation.DELETE_BY_KEY:
            held = held_keys(self.commit_log.io, cur, self.rows, own=self.transaction)
            if held is not None:
                txn, keys = held
                raise ConcurrentKeyError(
                    f"{self.operation.lower()}: {keys.num_rows} key(s) ({describe_keys(keys)}) are written by multi-table "
                    f"transaction {txn}, prepared and not finished yet; run it again once that transaction commits or aborts"
                )
        if not possible_conflicts(self.rows.hashes, self._effects(cur)):
            return
        self.looks += 1
        self.on_new_rows(cur, changed_segments(self.checked, cur))
        self.checked = cur
        if self.looks >= MAX_KEY_RECHECKS:
            raise ConcurrentKeyError(
                f"{self.operation.lower()}: concurrent commits touched its keys {MAX_KEY_RECHECKS} times in a row; run it again"
            )

    def _effects(self, cur: Snapshot) -> list[tuple[int, Any]]:
        versions = range(self.checked.version + 1, cur.version + 1)
        for v in versions:
            if v not in self.commits:
                self.commits[v] = self.commit_log.read_commit(v)
        cardinality = {sid: ref.cardinality for sid, ref in self.checked.dvs.items()}
        return key_effects([self.commits[v] for v in versions], cardinality)


@dataclass
class KeyedDeletes:
    """The rows an upsert or a delete by key removes, per segment, kept current across retries.

    Rows found in segments that became visible are added, rows of segments that were since removed
    (their rows are gone, or were rewritten into segments that are then looked at) are dropped when
    the actions are built."""

    positions: dict[str, BitMap64] = field(default_factory=dict)
    attempt: DeleteAttempt = field(default_factory=DeleteAttempt)  # a retry rewrites only the DVs that changed

    def add(self, found: KeyMatches) -> None:
        for sid, pos in found.positions.items():
            bm = bitmap_from_array(pos.astype(np.uint64))
            self.positions[sid] = self.positions[sid] | bm if sid in self.positions else bm

    def actions(self, io: FileIO, current: Snapshot, *, inline_max_bytes: int) -> list[Action]:
        visible = set(current.visible_segment_ids())
        live: Mapping[str, BitMap64] = {sid: bm for sid, bm in self.positions.items() if sid in visible}
        return list(self.attempt.actions(io, current, live, inline_max_bytes=inline_max_bytes))

    @property
    def counted(self) -> dict[str, int]:
        return self.attempt.counted

    @property
    def names(self) -> Callable[[], str] | None:
        """Names a DV file after the write intent protecting it (``DeleteAttempt.names``)."""
        return self.attempt.names

    @names.setter
    def names(self, names: Callable[[], str] | None) -> None:
        self.attempt.names = names

    @property
    def deleted(self) -> int:
        return self.attempt.deleted

    def cleanup(self, io: FileIO, result: CommitResult | None) -> None:
        """Remove the DV files of attempts that did not land."""
        self.attempt.cleanup(io, result)
