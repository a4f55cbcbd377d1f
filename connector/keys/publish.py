"""Publishing a staged consistent push of a keyed table without letting a key in twice.

A staged push (``publish=False``) checks its keys when its data lands: unique among
themselves, and against what concurrent appends made visible since the push read the
table. It then waits, hidden, for a person to publish it. Publishing hides the segments it
replaces (``segments_from``) but keeps every segment appended meanwhile, so a key appended
or upserted while the push waited would be in the table twice. ``commit_publish`` therefore
runs the keyed commit check from the version the push was staged at: every commit since
then that may have made one of the push's keys visible is looked at (only the segments that
stay visible after the publish), and a key found there raises ``DuplicateKeyError`` with
nothing committed — the push stays staged, to be rolled back, or published again once
those rows are deleted. When the log of those commits is gone (GC), every segment that
stays visible is looked at instead."""

from __future__ import annotations

from typing import Any

from mvtable.errors import DuplicateKeyError, VersionNotFoundError
from mvtable.lineage.enums import Operation
from mvtable.lineage.log import Builder, CommitLog, CommitResult
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO

from .commit import commit_keyed, present_keys, segment_keys
from .validate import describe_keys, key_tuples

__all__ = ["commit_publish"]


def commit_publish(
    io: FileIO,
    commit_log: CommitLog,
    read: Snapshot,
    entry_id: str,
    *,
    build: Builder,
    parameters: dict[str, Any],
) -> CommitResult:
    """Commit ``build`` after checking the push's keys against every commit since it was staged.

    ``build`` completes the staged entry ``entry_id`` of ``read``, the newest snapshot. A table
    without a key, or a push without rows, commits as is.

    Raises:
        DuplicateKeyError: Keys of the push were committed after it was staged; it stays staged."""
    entry = read.lineage[entry_id]
    if not read.primary_key or not entry.segments_to:
        return commit_log.commit(read=read, operation=Operation.PUBLISH, parameters=parameters, build=build)
    pushed = [read.segments[sid].file for sid in entry.segments_to]
    staged_at = max(read.segments[sid].added_version for sid in entry.segments_to)
    # the staging commit checked the keys up to its own version; what it replaces leaves with
    # the publish, and its own segments cannot count against it
    leaving = set(entry.segments_from) | set(entry.segments_to)
    rows = segment_keys(io, pushed, read.primary_key)

    def on_new_rows(newer: Snapshot, segment_ids: list[str]) -> None:
        staying = [sid for sid in segment_ids if sid not in leaving]
        dup = present_keys(io, newer, rows, segment_ids=staying)
        if dup is not None:
            raise DuplicateKeyError(
                f"cannot publish staged push {entry_id}: {dup.num_rows} of its key(s) were committed to the table "
                f"after it was staged at version {staged_at}: {describe_keys(dup)}. Nothing was committed and the push "
                "stays staged: roll it back, or delete those rows (delete by key) and publish it again",
                keys=key_tuples(dup),
            )

    since = read
    if staged_at < read.version:
        try:
            since = commit_log.snapshot(staged_at)
        except VersionNotFoundError:
            # the log of the commits since the push was staged was garbage-collected: look at
            # every segment that stays visible instead, then check only what comes after
            on_new_rows(read, [sid for sid in read.visible_segment_ids() if sid not in leaving])
    return commit_keyed(
        commit_log,
        read=read,
        current=read,
        since=since,
        operation=Operation.PUBLISH,
        build=build,
        rows=rows,
        record=True,  # the keys this commit makes visible: racing keyed writers probe them instead of reading
        on_new_rows=on_new_rows,
        parameters=parameters,
    )
