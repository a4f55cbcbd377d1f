"""Every error mvtable raises, in one small hierarchy under ``MvTableError``.

The branches separate what a caller can do about a failure:

* ``InvalidInputError`` — the call itself was wrong (an option, a schema, a row address, a
  lineage transition the state machine forbids). Fix the call.
* ``NotFoundError`` — a table, version, file or pin that does not (or no longer) exist.
* ``CorruptionError`` — a file is not what mvtable wrote (log, checkpoint, deletion vector,
  data file, pin). Never guessed around: a wrong answer is worse than an error.
* ``CommitConflictError`` — someone else committed something incompatible; nothing of ours
  landed. Re-read and decide again (the CLI exits 3).
* ``CommitStateUnknownError`` — the store failed so that we cannot tell whether our commit
  landed; look at the log before retrying.

``lineage`` and ``visibility`` may not import each other, so this module lives in the
root package that both may import; it imports nothing of mvtable.
"""

from __future__ import annotations


class MvTableError(Exception):
    """Base of every mvtable error."""


# -- the call was wrong ------------------------------------------------------------------
class InvalidInputError(MvTableError, ValueError):
    """Bad input from a caller: fix the call, nothing was changed."""


class InvalidOptionError(InvalidInputError):
    """An option or argument that is unknown, malformed, or conflicts with another."""


class InvalidFilterError(InvalidOptionError):
    """A scan or delete filter (a ``pyarrow.compute`` expression or a ``Predicate``) that
    does not fit the table: an unknown column, an operator or literal its column's type has
    no comparison for, a non-boolean result. The message names the filter and the columns."""


class SettingsError(InvalidOptionError):
    """A table property or connector setting with a value of the wrong form."""


class SchemaMismatchError(InvalidInputError):
    """Data whose columns do not match the table's. The message names the columns."""


class UnsupportedTypeError(InvalidInputError, TypeError):
    """An Arrow type that Spark SQL cannot hold (unsigned ints, float16, time, …)."""


class InvalidRowAddressError(InvalidInputError):
    """A delete addressed a row that does not exist (unknown segment, position past the end)."""


class RetentionTooShortError(InvalidInputError):
    """A vacuum retention shorter than the table's, without ``force``."""


class OrphanGraceTooShortError(RetentionTooShortError):
    """A vacuum or GC of a table whose ``orphanGracePeriod`` is below the safe minimum
    (``write_intents.MIN_ORPHAN_GRACE_S``), without ``force``: files of writers that take
    no write intent (an older mvtable) and temp files of commits in flight would be taken."""


class InvalidLineageTransitionError(InvalidInputError):
    """A start/end/revert/publish that the lineage state machine forbids."""


class SegmentInUseError(InvalidLineageTransitionError):
    """A segment is held by a live lineage entry and may not be removed another way."""


class PushBlockedError(InvalidLineageTransitionError):
    """A consistent push cannot start: another IN_PROGRESS push over the same segments may
    not be cleaned up automatically. ``entry_id`` names it."""

    def __init__(self, message: str, *, entry_id: str) -> None:
        super().__init__(message)
        self.entry_id = entry_id


class PushInProgressError(PushBlockedError):
    """Another push over the same segments is alive: its owner still runs (or cannot be
    checked) and its lease holds. Carries the owner and the end of the lease
    (``lease_expires_ms``, epoch milliseconds): retry after it, or roll the entry back if you
    know its writer is gone."""

    def __init__(self, message: str, *, entry_id: str, owner: str, lease_expires_ms: int | None) -> None:
        super().__init__(message, entry_id=entry_id)
        self.owner = owner
        self.lease_expires_ms = lease_expires_ms


class StagedPushError(PushBlockedError):
    """A staged push (``publish=False``) holds the same segments. It finished writing and
    waits for a person, so it is never reverted automatically: publish or roll it back."""


class TableAlreadyExistsError(InvalidInputError):
    """Creating a table where one exists already."""


class StorageLocationError(InvalidInputError):
    """A table location that cannot hold a table: an empty path, a regular file where the
    table's folder should be, a folder that cannot be created. The message names the path."""


class UnknownProtocolError(StorageLocationError):
    """A URL whose protocol (``foo://``) no installed filesystem handles. ``protocol``
    names it; the message says which protocols work and what to install for the others."""

    def __init__(self, message: str, *, protocol: str) -> None:
        super().__init__(message)
        self.protocol = protocol


# -- primary keys: every one raised before anything is written ------------------------------
class PrimaryKeyError(InvalidInputError):
    """Base of the errors about a table's primary key and keyed writes."""


class DuplicateKeyError(PrimaryKeyError):
    """A key repeats inside the data, or is already in the table (visible, or inserted by a
    commit that won the race). ``keys`` holds up to ten of them, as tuples of key values."""

    def __init__(self, message: str, *, keys: list[tuple[object, ...]] | None = None) -> None:
        super().__init__(message)
        self.keys = list(keys or [])


class NonKeyColumnError(PrimaryKeyError, SchemaMismatchError):
    """The keys of a delete by key hold a column that is not part of the primary key: a
    delete matches on the key only, so such a column would be silently ignored."""


class NullKeyError(PrimaryKeyError):
    """A key column holds nulls; keys may not be null."""


class KeyColumnMissingError(PrimaryKeyError, SchemaMismatchError):
    """A key column is not in the schema of the table (at creation) or of the data."""


class KeyTypeMismatchError(PrimaryKeyError, SchemaMismatchError):
    """A key column of the data has a type that does not fit the table's key column."""


class UnsupportedKeyTypeError(PrimaryKeyError, UnsupportedTypeError):
    """A column type that cannot be part of a key (floats, binary, booleans, nested)."""


class NoPrimaryKeyError(PrimaryKeyError):
    """An upsert or delete by key on a table created without a primary key."""


# -- something is not there --------------------------------------------------------------
class NotFoundError(MvTableError):
    """A table, version, file or pin that does not (or no longer) exist."""


class TableNotFoundError(NotFoundError):
    """No mvtable table exists at the location."""


class VersionNotFoundError(NotFoundError):
    """A version or timestamp that the log does not (or no longer) hold."""


class FilesMissingError(NotFoundError):
    """Files a version needs are gone (vacuumed or deleted by hand)."""


class DeletionVectorNotFoundError(NotFoundError):
    """The DV file a descriptor names does not exist (e.g. removed by an over-eager vacuum)."""

    def __init__(self, path: str, detail: str = "") -> None:
        super().__init__(f"{path}: deletion vector file not found" + (f" ({detail})" if detail else ""))
        self.path = path
        self.detail = detail


class PinError(MvTableError):
    """Base of the reader-pin errors."""


class PinNotFoundError(PinError, NotFoundError):
    """No pin with that id (released, or removed by GC after it expired)."""


class PinExpiredError(PinError):
    """The pin has expired; what it protected may have been collected already."""


# -- a file is not what we wrote ---------------------------------------------------------
class CorruptionError(MvTableError):
    """A stored file failed validation. ``source`` names it, ``problem`` says what is wrong."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"{source}: {problem}")
        self.source = source
        self.problem = problem

    @property
    def path(self) -> str:
        return self.source


class CorruptMetadataError(CorruptionError):
    """A log file or checkpoint failed validation."""


class UnsafePathError(CorruptMetadataError):
    """A path stored in metadata escapes the table root (``..``, absolute, other scheme)."""


class UnsupportedFormatError(CorruptMetadataError):
    """A metadata file declares a format version this code cannot read."""


class CorruptDeletionVectorError(CorruptionError):
    """A deletion vector (or the descriptor pointing at it) is not what we wrote: a DV that
    decodes "almost" right would silently resurrect or hide rows."""


class CorruptSegmentError(CorruptionError, ValueError):
    """A data file disagrees with what the log says about it (row counts, row groups): it
    was replaced or damaged outside mvtable."""


class CorruptKeyIndexError(CorruptionError):
    """A segment's key index (``*.keys.bloom``) or a commit's key filter is not what we wrote."""


class CorruptPinError(PinError, CorruptionError):
    """A pin file that is not what ``pins.pin`` writes."""


# -- committing --------------------------------------------------------------------------
class CommitError(MvTableError):
    """Base of everything that can go wrong while committing."""


class CommitConflictError(CommitError):
    """A concurrent commit makes ours invalid; nothing of ours landed."""


class ConcurrentReplaceError(CommitConflictError):
    """Segments we replace or delete from were replaced or removed by a concurrent commit."""


class ConcurrentCompactionError(ConcurrentReplaceError):
    """Segments an overwrite or consistent push replaces were rewritten by a concurrent
    compaction (same rows, new segments). Nothing of ours landed: run the write again."""


class ConcurrentLineageError(CommitConflictError):
    """The lineage entry we act on changed state concurrently."""


class ConcurrentMetadataError(CommitConflictError):
    """The schema or table properties changed concurrently."""


class ConcurrentKeyError(CommitConflictError):
    """Concurrent commits kept inserting keys this write also writes (or replacing the rows
    that hold them) on every retry; nothing of ours landed. Run the write again."""


class TooManyRetriesError(CommitConflictError):
    """Every retry lost the race for the next version."""


class CommitStateUnknownError(CommitError):
    """The store failed in a way that leaves open whether our commit landed."""


class CommitFilesMissingError(CommitError, FilesMissingError):
    """A file the commit would name (a new segment, a DV file) is gone before the commit
    landed: vacuum took it or it was deleted by hand. Nothing was committed; write again.
    ``paths`` lists the missing files (table-relative)."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths


class WriteIntentExpiredError(CommitError):
    """The write intent that protected a write's files from vacuum lapsed (nothing renewed
    it for ``writeIntentTtl``, or it was removed): vacuum may have taken its files, so the
    write may not commit. Nothing was committed; write again."""


class NothingToCommit(MvTableError):
    """Not a failure: raised by a commit builder when the newest snapshot already is what
    the caller asked for (a retried rollback, a restore that raced an identical one), so
    the commit loop makes no commit. Callers report "nothing changed"."""


# -- exporting to other formats ----------------------------------------------------------
class ExportError(MvTableError):
    """An Iceberg or Delta export could not be written. Exports write only their own
    metadata (``metadata/``, ``_delta_log/``), so the mvtable table is unchanged."""


class UnsupportedExportTypeError(ExportError, UnsupportedTypeError):
    """A column whose type (or name) the target format cannot hold."""

    def __init__(self, target: str, column: str, what: str) -> None:
        super().__init__(f"column {column!r}: {target} cannot hold {what}; cast, rename or drop it before exporting")
        self.target = target
        self.column = column


class ExportPathNotWritableError(ExportError):
    """The export's metadata folder cannot be written (permissions, a file in the way)."""


class ExportConflictError(ExportError):
    """Another export wrote the same metadata version at the same time; run it again."""


class ForeignExportMetadataError(ExportError):
    """The export folder (``metadata/`` or ``_delta_log/``) holds something an export cannot
    continue: files mvtable did not write, or damaged ones. Exports only append to their own
    metadata, so nothing is overwritten; move the folder away to export afresh."""


class ExportOfAnotherTableError(ForeignExportMetadataError):
    """The export folder holds the export of another mvtable table: the table was deleted and
    created again at the same location, so the old export's versions (and files) are not
    this table's. Move the folder away to export afresh."""


# -- streaming ---------------------------------------------------------------------------
class StreamingError(MvTableError):
    """Base of the errors a streaming read or write stops with."""


class ChangeCommitInStreamError(StreamingError):
    """A streaming source met a commit that deletes or replaces rows (a delete, overwrite,
    consistent push, rollback or restore), which a stream of appended rows cannot express.
    ``version`` is the commit, ``option`` the read option that lets the stream go on."""

    def __init__(self, version: int, operation: str, option: str = "skipChangeCommits") -> None:
        super().__init__(
            f"version {version} of the source table ({operation}) deletes or replaces rows, which a stream of "
            f"appended rows cannot express; restart the query with .option('{option}', 'true') to ignore such "
            "commits, or with .option('readChangeFeed', 'true') to receive inserts and deletes as changes"
        )
        self.version = version
        self.operation = operation
        self.option = option


class StreamTableReplacedError(StreamingError):
    """The table a stream's checkpoint follows was deleted and created again at the same
    location: its versions mean something else now."""


class InvalidStreamOffsetError(StreamingError):
    """A stream offset (from a query's checkpoint) that mvtable did not write."""


# -- Spark's own Parquet reader ----------------------------------------------------------
class JvmMaskUnavailableError(MvTableError):
    """mvtable's JVM deletion mask (``connector/spark/jvm/``) cannot be built or loaded
    here (no JDK, a failed compile); ``read_native`` falls back to the expression mask."""
