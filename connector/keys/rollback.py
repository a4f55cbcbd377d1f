"""Rolling back a completed consistent push of a keyed table without letting a key in twice.

A rollback shows readers the segments the push replaced again, and hides the push's own.
Everything committed since the push completed stays: an append after the push may hold a key
the push had replaced (it was free in what readers saw), and bringing the replaced rows back
would then show that key twice. ``commit_rollback`` checks the live keys of the segments that
come back against every segment that stays visible, and against every commit that races the
rollback; a key found raises ``DuplicateKeyError`` with nothing committed. Rolling back a
push that is still staged, or restoring a whole version, cannot duplicate a key: the first
brings nothing back, the second shows exactly what one version showed."""

from __future__ import annotations

from typing import Any

from mvtable.errors import DuplicateKeyError
from mvtable.lineage import operations as ops
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import Builder, CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from .commit import commit_keyed, live_segment_keys, present_keys
from .validate import describe_keys, key_tuples

__all__ = ["commit_rollback"]


def commit_rollback(
    io: FileIO,
    commit_log: CommitLog,
    read: Snapshot,
    entry_id: str,
    *,
    build: Builder,
    parameters: dict[str, Any],
) -> CommitResult:
    """Commit ``build`` once no key of the rows it brings back is held by a segment that stays visible.

    ``build`` reverts ``entry_id`` of ``read``, the newest snapshot. A table without a key, or a
    rollback that brings nothing back, commits as is.

    Raises:
        DuplicateKeyError: Keys of the rows it brings back were committed since; nothing is committed."""
    returning, staying = ops.revert_effect(read, entry_id) if read.primary_key else ([], [])
    rows = live_segment_keys(io, read, returning, read.primary_key) if returning else None
    if rows is None or not len(rows.hashes):
        return commit_log.commit(read=read, operation=Operation.ROLLBACK, parameters=parameters, build=build)
    hidden = set(read.lineage[entry_id].segments_to) | set(returning)

    def refuse_duplicates(snapshot: Snapshot, segment_ids: list[str]) -> None:
        dup = present_keys(io, snapshot, rows, segment_ids=[sid for sid in segment_ids if sid not in hidden])
        if dup is not None:
            raise DuplicateKeyError(
                f"cannot roll back push {entry_id}: {dup.num_rows} key(s) of the rows it would bring back were "
                f"committed after it: {describe_keys(dup)}. Nothing was committed: delete those rows (delete by key) "
                "and roll back again, or restore the version before the push (rollback(version=…)) to drop them too",
                keys=key_tuples(dup),
            )

    refuse_duplicates(read, staying)
    return commit_keyed(
        commit_log,
        read=read,
        current=read,
        operation=Operation.ROLLBACK,
        build=build,
        rows=rows,
        record=True,  # keys this commit makes visible again: racing keyed writers probe them
        on_new_rows=refuse_duplicates,
        parameters=parameters,
    )
