"""Errors of the log and lineage layer.

The hierarchy separates what a caller can do about a failure:

* ``CommitConflictError`` — someone else committed something incompatible; nothing of ours
  landed, re-read and decide again.
* ``CommitStateUnknownError`` — we cannot tell whether our commit landed (e.g. the store
  failed after the write was sent); the caller must look at the log before retrying.
* ``CorruptMetadataError`` — a log file or checkpoint is not what we wrote; never guessed around.
* ``InvalidLineageTransitionError`` — a start/end/revert that the state machine forbids.
"""

from __future__ import annotations


from mvtable.conf.errors import MvTableError  # noqa: F401  (the shared root, re-exported)


class NothingToCommit(MvTableError):
    """Raised by a commit builder when the newest snapshot already is what the caller asked
    for (a retried rollback, a restore that raced an identical one): no commit is made."""


class TableNotFoundError(MvTableError):
    """No mvtable table exists at the location."""


class TableAlreadyExistsError(MvTableError):
    """Creating a table where one exists already."""


class VersionNotFoundError(MvTableError):
    """A version or timestamp that the log does not (or no longer) hold."""


class CorruptMetadataError(MvTableError):
    """A metadata file failed validation. Names the file and the problem."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class UnsafePathError(CorruptMetadataError):
    """A path stored in metadata escapes the table root (``..``, absolute, other scheme)."""


class UnsupportedFormatError(CorruptMetadataError):
    """A metadata file declares a format version this code cannot read."""


class CommitError(MvTableError):
    """Base of everything that can go wrong while committing."""


class CommitConflictError(CommitError):
    """A concurrent commit makes ours invalid; nothing of ours landed."""


class ConcurrentReplaceError(CommitConflictError):
    """Segments we replace or delete from were replaced or removed by a concurrent commit."""


class ConcurrentLineageError(CommitConflictError):
    """The lineage entry we act on changed state concurrently."""


class ConcurrentMetadataError(CommitConflictError):
    """The schema or table properties changed concurrently."""


class TooManyRetriesError(CommitConflictError):
    """Every retry lost the race for the next version."""


class CommitStateUnknownError(CommitError):
    """The store failed in a way that leaves open whether our commit landed."""


class InvalidLineageTransitionError(MvTableError):
    """A lineage operation that the state machine forbids (DESIGN.md §5)."""


class SegmentInUseError(InvalidLineageTransitionError):
    """A segment is held by a live lineage entry and may not be removed another way."""
