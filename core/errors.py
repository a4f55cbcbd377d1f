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
* ``StorageError`` — the store refused an operation (full, read-only, no permission, a file
  in a folder's way), with the errno, the path and the operation. Nothing committed is
  lost; free space, fix permissions, or read where writes are not possible.

``lineage`` and ``visibility`` may not import each other, so this module lives in the
root package that both may import; it imports nothing of mvtable.
"""

from __future__ import annotations

import inspect
import re
from typing import ClassVar


def error_class_of(name: str) -> str:
    """The error class a class named ``name`` gets unless it sets one.

    It is ``MVTABLE_`` and the name in upper snake case without its ``Error`` suffix
    (``VersionNotFoundError`` -> ``MVTABLE_VERSION_NOT_FOUND``), so a class added later has
    one without anyone thinking of it."""
    stem = name[: -len("Error")] if name.endswith("Error") and name != "Error" else name
    return "MVTABLE_" + re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", stem).upper()


class MvTableError(Exception):
    """Base of every mvtable error.

    Every error's message starts with its ``error_class`` in brackets
    (``[MVTABLE_VERSION_NOT_FOUND] version 99 does not exist``), as Spark's and Delta's
    errors do: the one part of the text that survives Spark wrapping it in its own
    exceptions, so a caller of Spark can tell which error it was (``from_spark``) and a
    person can search for it. The class is stable: renaming a class keeps its error class."""

    error_class: ClassVar[str] = "MVTABLE_ERROR"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "error_class" not in cls.__dict__:
            cls.error_class = error_class_of(cls.__name__)

    def __str__(self) -> str:
        return f"[{self.error_class}] {self.message}"

    @property
    def message(self) -> str:
        """The message without the error class.

        A message taken from another mvtable error keeps only this error's class."""
        text = super().__str__()
        tag = _LEADING_TAG.match(text)
        return text[tag.end() :] if tag else text


_LEADING_TAG = re.compile(r"\[MVTABLE_[A-Z0-9_]+\] ")


# -- the call was wrong ------------------------------------------------------------------
class InvalidInputError(MvTableError, ValueError):
    """Bad input from a caller: fix the call, nothing was changed."""


class InvalidOptionError(InvalidInputError):
    """An option or argument that is unknown, malformed, or conflicts with another."""


class InvalidFilterError(InvalidOptionError):
    """A scan or delete filter (a ``pyarrow.compute`` expression or a ``Predicate``) that does not fit the table.

    An unknown column, an operator or literal its column's type has no comparison for, a
    non-boolean result. The message names the filter and the columns."""


class SettingsError(InvalidOptionError):
    """A table property or connector setting with a value of the wrong form."""


class SchemaMismatchError(InvalidInputError):
    """Data whose columns do not match the table's. The message names the columns."""


class SchemaEvolutionError(InvalidInputError):
    """A schema change that breaks a rule of schema evolution (a narrowing, a name clash, a key column dropped …).

    The message names the column and the rule; nothing was committed."""


class PartitionSpecError(InvalidInputError):
    """A partition spec that cannot be built: an unknown or nested column, a transform on a type it does not take, a field given twice, a bad width.

    The message names the field; nothing was created or changed."""


class ReplaceWhereViolationError(InvalidInputError):
    """A scoped push's data holds a row outside its ``replace_where`` predicate (or outside the partitions it replaces).

    The message names the row; nothing was committed."""


class UnsupportedTypeError(InvalidInputError, TypeError):
    """An Arrow type that Spark SQL cannot hold (unsigned ints, float16, time, …)."""


class InvalidRowAddressError(InvalidInputError):
    """A delete addressed a row that does not exist (unknown segment, position past the end)."""


class RetentionTooShortError(InvalidInputError):
    """A vacuum retention shorter than the table's, without ``force``."""


class OrphanGraceTooShortError(RetentionTooShortError):
    """A vacuum or GC of a table whose ``orphanGracePeriod`` is below the safe minimum, without ``force``.

    The minimum is ``write_intents.MIN_ORPHAN_GRACE_S``: below it, files of writers that take no
    write intent (an older mvtable) and temp files of commits in flight would be taken."""


class InvalidLineageTransitionError(InvalidInputError):
    """A start/end/revert/publish that the lineage state machine forbids."""


class SegmentInUseError(InvalidLineageTransitionError):
    """A segment is held by a live lineage entry and may not be removed another way."""


class PushBlockedError(InvalidLineageTransitionError):
    """A consistent push cannot start: another IN_PROGRESS push over the same segments may not be cleaned up.

    It may not be cleaned up automatically; ``entry_id`` names it."""

    def __init__(self, message: str, *, entry_id: str) -> None:
        super().__init__(message)
        self.entry_id = entry_id


class PushInProgressError(PushBlockedError):
    """Another push over the same segments is alive: its owner still runs (or cannot be checked) and its lease holds.

    Carries the owner and the end of the lease (``lease_expires_ms``, epoch milliseconds):
    retry after it, or roll the entry back if you know its writer is gone."""

    def __init__(self, message: str, *, entry_id: str, owner: str, lease_expires_ms: int | None) -> None:
        super().__init__(message, entry_id=entry_id)
        self.owner = owner
        self.lease_expires_ms = lease_expires_ms


class StagedPushError(PushBlockedError):
    """A staged push (``publish=False``) holds the same segments.

    It finished writing and waits for a person, so it is never reverted automatically:
    publish or roll it back."""


class TableAlreadyExistsError(InvalidInputError):
    """Creating a table where one exists already."""


class StorageLocationError(InvalidInputError):
    """A table location that cannot hold a table.

    An empty path, a regular file where the table's folder should be, a folder that cannot
    be created. The message names the path."""


class UnknownProtocolError(StorageLocationError):
    """A URL whose protocol (``foo://``) no installed filesystem handles.

    ``protocol`` names it; the message says which protocols work and what to install for the
    others."""

    def __init__(self, message: str, *, protocol: str) -> None:
        super().__init__(message)
        self.protocol = protocol


# -- primary keys: every one raised before anything is written ------------------------------
class PrimaryKeyError(InvalidInputError):
    """Base of the errors about a table's primary key and keyed writes."""


class DuplicateKeyError(PrimaryKeyError):
    """A key repeats inside the data, or is already in the table.

    Already in the table means visible, or inserted by a commit that won the race. ``keys``
    holds up to ten of them, as tuples of key values."""

    def __init__(self, message: str, *, keys: list[tuple[object, ...]] | None = None) -> None:
        super().__init__(message)
        self.keys = list(keys or [])


class NonKeyColumnError(PrimaryKeyError, SchemaMismatchError):
    """The keys of a delete by key hold a column that is not part of the primary key.

    A delete matches on the key only, so such a column would be silently ignored."""


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


class CorruptCommitError(CorruptMetadataError):
    """A commit file that cannot be read as the commit its name promises (not JSON, not a commit, another version).

    The message names the file and says what to do: restore it from a backup, or move it
    out of the log if mvtable did not write it."""

    def __init__(self, source: str, problem: str, *, version: int) -> None:
        super().__init__(source, problem)
        self.version = version


class LogGapError(CorruptMetadataError):
    """Commit files missing from the log while later ones are there, confirmed by a second listing and a direct read.

    This is not garbage collection, which removes the oldest commits first and only below a
    checkpoint it keeps. ``source`` names the first missing file; ``missing`` is the
    (first, last) run of versions."""

    def __init__(self, source: str, problem: str, *, missing: tuple[int, int]) -> None:
        super().__init__(source, problem)
        self.missing = missing


class StrayLogFileError(CorruptMetadataError):
    """A file or directory in ``_mvtable/log/`` named like a commit or checkpoint that is not one of this table's.

    A directory, or an unreadable file after missing versions. ``source`` names it; moving
    it out of the log is the fix the message gives."""


class CorruptDeletionVectorError(CorruptionError):
    """A deletion vector (or the descriptor pointing at it) is not what we wrote.

    A DV that decodes "almost" right would silently resurrect or hide rows."""


class CorruptSegmentError(CorruptionError, ValueError):
    """A data file disagrees with what the log says about it (row counts, row groups).

    It was replaced or damaged outside mvtable."""


class CorruptKeyIndexError(CorruptionError):
    """A segment's key index (``*.keys.bloom``) or a commit's key filter is not what we wrote."""


class CorruptPinError(PinError, CorruptionError):
    """A pin file that is not what ``pins.pin`` writes."""


# -- the store refused an operation --------------------------------------------------------
class StorageError(MvTableError, OSError):
    """The store refused a read, write or delete.

    It is full, the credentials or mount do not allow it, a file stands where a folder
    belongs. ``errno``, ``path`` (also ``filename``) and ``operation`` say which; nothing the
    table had committed is lost. Each subclass also derives from the builtin ``OSError``
    subclass of its errno (``PermissionError``, ``NotADirectoryError``, …), so handlers
    written for those still match."""

    def __init__(self, message: str, *, path: str, operation: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno
        self.strerror = message
        self.filename = path
        self.path = path
        self.operation = operation

    def __str__(self) -> str:
        return str(self.strerror)

    def __reduce__(self) -> tuple[object, ...]:  # crosses process boundaries (Spark tasks)
        return _rebuild_storage_error, (type(self), self.strerror, self.path, self.operation, self.errno)


def _rebuild_storage_error(cls: type[StorageError], message: str, path: str, operation: str, errno: int | None) -> StorageError:
    return cls(message, path=path, operation=operation, errno=errno)


class StorageFullError(StorageError):
    """The store has no room left (``ENOSPC``, ``EDQUOT``).

    Whatever the failed operation wrote half is removed or unreferenced; free space
    (``vacuum`` can, even on a full disk) and run it again."""


class StoragePermissionError(StorageError, PermissionError):
    """The credentials or the mount do not allow the operation (``EACCES``, ``EPERM``)."""


class StorageReadOnlyError(StoragePermissionError):
    """The store is read-only (``EROFS``: a read-only mount, a snapshot, a replica).

    Reads work there; pins are skipped with a warning; every write raises this."""


class StorageNotADirectoryError(StorageError, NotADirectoryError):
    """A file stands where the path needs a folder (``ENOTDIR``).

    A table created under a regular file, or a file named like one of the table's folders."""


class StorageIsADirectoryError(StorageError, IsADirectoryError):
    """A folder stands where the path needs a file (``EISDIR``)."""


# -- committing --------------------------------------------------------------------------
class CommitError(MvTableError):
    """Base of everything that can go wrong while committing."""


class CommitConflictError(CommitError):
    """A concurrent commit makes ours invalid; nothing of ours landed."""


class ConcurrentReplaceError(CommitConflictError):
    """Segments we replace or delete from were replaced or removed by a concurrent commit."""


class ConcurrentCompactionError(ConcurrentReplaceError):
    """Segments an overwrite or consistent push replaces were rewritten by a concurrent compaction.

    Same rows, new segments. Nothing of ours landed: run the write again."""


class ConcurrentLineageError(CommitConflictError):
    """The lineage entry we act on changed state concurrently."""


class ConcurrentMetadataError(CommitConflictError):
    """The schema or table properties changed concurrently."""


class ConcurrentSchemaChangeError(ConcurrentMetadataError):
    """The table's schema changed after this write read it, in a way its files or schema change cannot follow.

    A rename, drop or type change since the read (or any change, for a write that changes the
    schema itself); nothing of ours landed. Run the write again against the new schema."""


class ConcurrentKeyError(CommitConflictError):
    """Concurrent commits kept inserting keys this write also writes, on every retry.

    They inserted the keys or replaced the rows that hold them; nothing of ours landed. Run
    the write again."""


class TooManyRetriesError(CommitConflictError):
    """Every retry lost the race for the next version."""


class TransactionConflictError(CommitConflictError):
    """A participant of a multi-table transaction conflicted with a concurrent commit, so the whole transaction aborted.

    ``table`` names the participant (its URI); the cause is chained. Nothing of the
    transaction is visible in any table: run it again."""

    def __init__(self, message: str, *, table: str | None = None) -> None:
        super().__init__(message)
        self.table = table


class TransactionAbortedError(CommitConflictError):
    """A multi-table transaction was decided ABORTED before its owner could decide COMMITTED.

    Another writer found it prepared with its owner gone or its lease run out and aborted
    it. Nothing of it is visible in any table: run it again."""


class CommitStateUnknownError(CommitError):
    """The store failed in a way that leaves open whether our commit landed.

    ``txn`` is the commit's transaction id (``parameters["txn"]`` of the commit file) and
    ``version`` the first version it may have landed at, when known:
    ``CommitLog.find_commit(txn, since=version)`` reads the log and tells."""

    def __init__(self, message: str, *, version: int | None = None, txn: str | None = None) -> None:
        super().__init__(message)
        self.version = version
        self.txn = txn


class CommitFilesMissingError(CommitError, FilesMissingError):
    """A file the commit would name (a new segment, a DV file) is gone before the commit landed.

    Vacuum took it or it was deleted by hand. Nothing was committed; write again. ``paths`` lists
    the missing files (table-relative)."""

    def __init__(self, message: str, paths: list[str]) -> None:
        super().__init__(message)
        self.paths = paths


class WriteIntentExpiredError(CommitError):
    """The write intent that protected a write's files from vacuum lapsed, so the write may not commit.

    Nothing renewed it for ``writeIntentTtl``, or it was removed: vacuum may have taken its files.
    Nothing was committed; write again."""


class TransactionNotFoundError(NotFoundError):
    """No participant table given holds an entry of that multi-table transaction.

    Pass the tables it wrote (``tables=…``); ``mvtable lineage`` lists transaction ids."""


class TransactionRollbackError(InvalidLineageTransitionError):
    """A multi-table transaction cannot be rolled back as one.

    It did not commit, or a participant's part was since replaced by another push (roll that
    back first) or is past retention. Nothing was rolled back."""


class NothingToCommit(MvTableError):
    """Not a failure: the newest snapshot already is what the caller asked for, so no commit is made.

    Raised by a commit builder (a retried rollback, a restore that raced an identical one),
    so the commit loop makes no commit. Callers report "nothing changed"."""


# -- exporting to other formats ----------------------------------------------------------
class ExportError(MvTableError):
    """An Iceberg or Delta export could not be written.

    Exports write only their own metadata (``metadata/``, ``_delta_log/``), so the mvtable
    table is unchanged."""


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
    """The export folder (``metadata/`` or ``_delta_log/``) holds something an export cannot continue.

    Files mvtable did not write, or damaged ones. Exports only append to their own metadata,
    so nothing is overwritten; move the folder away to export afresh."""


class ExportOfAnotherTableError(ForeignExportMetadataError):
    """The export folder holds the export of another mvtable table.

    The table was deleted and created again at the same location, so the old export's
    versions (and files) are not this table's. Move the folder away to export afresh."""


# -- streaming ---------------------------------------------------------------------------
class StreamingError(MvTableError):
    """Base of the errors a streaming read or write stops with."""


class ChangeCommitInStreamError(StreamingError):
    """A streaming source met a commit that deletes or replaces rows.

    A delete, overwrite, consistent push, rollback or restore: a stream of appended rows
    cannot express it. ``version`` is the commit, ``option`` the read option that lets the
    stream go on."""

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
    """The table a stream's checkpoint follows was deleted and created again at the same location.

    Its versions mean something else now."""


class StreamSchemaChangedError(StreamingError):
    """A streaming source met a schema change that is more than an addition (a rename, drop or type change).

    The stream's columns were fixed when it started. ``version`` is the commit; restarting the
    query continues from it with the new schema, no row lost or repeated."""

    def __init__(self, version: int, change: str) -> None:
        super().__init__(
            f"version {version} of the source table changed its schema ({change}); a running stream keeps the columns "
            f"it started with: restart the query to continue from version {version} with the new schema"
        )
        self.version = version
        self.change = change


class InvalidStreamOffsetError(StreamingError):
    """A stream offset (from a query's checkpoint) that mvtable did not write."""


# -- Spark's own Parquet reader ----------------------------------------------------------
class JvmMaskUnavailableError(MvTableError):
    """mvtable's JVM deletion mask (``connector/spark/jvm/``) cannot be built or loaded here.

    No JDK, or a failed compile; ``read_native`` falls back to the expression mask."""


# -- writing through Spark's DataFrameWriter ----------------------------------------------
class PartitioningNotSupportedError(InvalidOptionError):
    """A write asked for Hive-style partitions (Spark's ``DataFrameWriter.partitionBy``), which mvtable does not take.

    A table's partition spec is the ``partitionBy`` option of the write that creates it
    (``.option("partitionBy", "day(ts),region")``), with Iceberg's transforms."""


class CatalogTableNotSupportedError(InvalidOptionError):
    """A write or statement that would make a Spark catalog table: mvtable tables live at a path.

    ``saveAsTable`` and ``CREATE TABLE … USING mvtable`` are such writes."""


# -- stable error classes ------------------------------------------------------------------
# The classes every error had when error classes were introduced, spelled out so that renaming
# a class keeps what callers match on (tests/core/test_error_classes.py checks the list).
_STABLE_ERROR_CLASSES: dict[type[MvTableError], str] = {
    InvalidInputError: "MVTABLE_INVALID_INPUT",
    InvalidOptionError: "MVTABLE_INVALID_OPTION",
    InvalidFilterError: "MVTABLE_INVALID_FILTER",
    SettingsError: "MVTABLE_SETTINGS",
    SchemaMismatchError: "MVTABLE_SCHEMA_MISMATCH",
    UnsupportedTypeError: "MVTABLE_UNSUPPORTED_TYPE",
    InvalidRowAddressError: "MVTABLE_INVALID_ROW_ADDRESS",
    RetentionTooShortError: "MVTABLE_RETENTION_TOO_SHORT",
    InvalidLineageTransitionError: "MVTABLE_INVALID_LINEAGE_TRANSITION",
    SegmentInUseError: "MVTABLE_SEGMENT_IN_USE",
    PushBlockedError: "MVTABLE_PUSH_BLOCKED",
    PushInProgressError: "MVTABLE_PUSH_IN_PROGRESS",
    StagedPushError: "MVTABLE_STAGED_PUSH",
    TableAlreadyExistsError: "MVTABLE_TABLE_ALREADY_EXISTS",
    StorageLocationError: "MVTABLE_STORAGE_LOCATION",
    UnknownProtocolError: "MVTABLE_UNKNOWN_PROTOCOL",
    PrimaryKeyError: "MVTABLE_PRIMARY_KEY",
    DuplicateKeyError: "MVTABLE_DUPLICATE_KEY",
    NonKeyColumnError: "MVTABLE_NON_KEY_COLUMN",
    NullKeyError: "MVTABLE_NULL_KEY",
    KeyColumnMissingError: "MVTABLE_KEY_COLUMN_MISSING",
    KeyTypeMismatchError: "MVTABLE_KEY_TYPE_MISMATCH",
    UnsupportedKeyTypeError: "MVTABLE_UNSUPPORTED_KEY_TYPE",
    NoPrimaryKeyError: "MVTABLE_NO_PRIMARY_KEY",
    NotFoundError: "MVTABLE_NOT_FOUND",
    TableNotFoundError: "MVTABLE_TABLE_NOT_FOUND",
    VersionNotFoundError: "MVTABLE_VERSION_NOT_FOUND",
    FilesMissingError: "MVTABLE_FILES_MISSING",
    DeletionVectorNotFoundError: "MVTABLE_DELETION_VECTOR_NOT_FOUND",
    PinError: "MVTABLE_PIN",
    PinNotFoundError: "MVTABLE_PIN_NOT_FOUND",
    PinExpiredError: "MVTABLE_PIN_EXPIRED",
    CorruptionError: "MVTABLE_CORRUPTION",
    CorruptMetadataError: "MVTABLE_CORRUPT_METADATA",
    UnsafePathError: "MVTABLE_UNSAFE_PATH",
    UnsupportedFormatError: "MVTABLE_UNSUPPORTED_FORMAT",
    CorruptDeletionVectorError: "MVTABLE_CORRUPT_DELETION_VECTOR",
    CorruptSegmentError: "MVTABLE_CORRUPT_SEGMENT",
    CorruptKeyIndexError: "MVTABLE_CORRUPT_KEY_INDEX",
    CorruptPinError: "MVTABLE_CORRUPT_PIN",
    CommitError: "MVTABLE_COMMIT",
    CommitConflictError: "MVTABLE_COMMIT_CONFLICT",
    ConcurrentReplaceError: "MVTABLE_CONCURRENT_REPLACE",
    ConcurrentCompactionError: "MVTABLE_CONCURRENT_COMPACTION",
    ConcurrentLineageError: "MVTABLE_CONCURRENT_LINEAGE",
    ConcurrentMetadataError: "MVTABLE_CONCURRENT_METADATA",
    ConcurrentKeyError: "MVTABLE_CONCURRENT_KEY",
    TooManyRetriesError: "MVTABLE_TOO_MANY_RETRIES",
    CommitStateUnknownError: "MVTABLE_COMMIT_STATE_UNKNOWN",
    NothingToCommit: "MVTABLE_NOTHING_TO_COMMIT",
    ExportError: "MVTABLE_EXPORT",
    UnsupportedExportTypeError: "MVTABLE_UNSUPPORTED_EXPORT_TYPE",
    ExportPathNotWritableError: "MVTABLE_EXPORT_PATH_NOT_WRITABLE",
    ExportConflictError: "MVTABLE_EXPORT_CONFLICT",
    ForeignExportMetadataError: "MVTABLE_FOREIGN_EXPORT_METADATA",
    ExportOfAnotherTableError: "MVTABLE_EXPORT_OF_ANOTHER_TABLE",
    StreamingError: "MVTABLE_STREAMING",
    ChangeCommitInStreamError: "MVTABLE_CHANGE_COMMIT_IN_STREAM",
    StreamTableReplacedError: "MVTABLE_STREAM_TABLE_REPLACED",
    InvalidStreamOffsetError: "MVTABLE_INVALID_STREAM_OFFSET",
    JvmMaskUnavailableError: "MVTABLE_JVM_MASK_UNAVAILABLE",
}
for _cls, _name in _STABLE_ERROR_CLASSES.items():
    _cls.error_class = _name


def all_error_classes() -> dict[str, type[MvTableError]]:
    """Every mvtable error class by its ``error_class`` (subclasses defined anywhere)."""
    found: dict[str, type[MvTableError]] = {MvTableError.error_class: MvTableError}
    todo = [MvTableError]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.setdefault(sub.error_class, sub)
            todo.append(sub)
    return found


# the line a Python traceback ends with for an mvtable error: ``module.Class: [MVTABLE_X] text``
_RAISED = re.compile(r"^[\w.]*?(?P<name>\w+): \[(?P<cls>MVTABLE_[A-Z0-9_]+)\] (?P<text>.*)$", re.M)
_TAGGED = re.compile(r"\[(?P<cls>MVTABLE_[A-Z0-9_]+)\] (?P<text>[^\n]*)")
_SPARK_TAIL = re.compile(r"\s*SQLSTATE: \w+\s*$")


def from_spark(exc: BaseException) -> MvTableError | None:
    """The mvtable error inside a Spark exception, or None when it holds none.

    Spark wraps an error raised in a data source or a table function in its own exceptions
    (``AnalysisException [PYTHON_DATA_SOURCE_ERROR]``, ``PythonException``, their Spark
    Connect twins) whose message carries the Python traceback as text: this finds the
    error's class by the ``[MVTABLE_…]`` tag its message starts with and builds one of that
    class with the same message, so ``except VersionNotFoundError`` works across Spark::

        try:
            spark.read.format("mvtable").option("versionAsOf", 99).load(path).count()
        except Exception as exc:
            if (err := mvtable.errors.from_spark(exc)) is None:
                raise
            raise err from exc

    The error is rebuilt from text: its message is the original's, attributes the class
    sets from arguments (``entry_id``, ``version``, …) are None, and ``spark_exception`` (and
    ``__cause__``) is the Spark exception with the full traceback. An ``MvTableError`` passed in
    is returned as it is.

    It never raises: an exception that holds no mvtable error gives None, so the caller
    re-raises the original."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, MvTableError):
            return current
        seen.add(id(current))
        found = _error_in_text(_spark_text(current), exc)
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


def _spark_text(exc: BaseException) -> str:
    parts = [str(exc)]
    for attr in ("desc", "message", "_message"):  # pyspark's exceptions keep the text here too
        value = getattr(exc, attr, None)
        if isinstance(value, str) and value not in parts[0]:
            parts.append(value)
    return "\n".join(parts)


def _error_in_text(text: str, exc: BaseException) -> MvTableError | None:
    known = all_error_classes()
    raised = [m for m in _RAISED.finditer(text) if m.group("cls") in known]
    match = raised[-1] if raised else next((m for m in _TAGGED.finditer(text) if m.group("cls") in known), None)
    if match is None:
        return None
    cls = known[match.group("cls")]
    message = _SPARK_TAIL.sub("", match.group("text")).strip()
    err = cls.__new__(cls)
    Exception.__init__(err, f"[{cls.error_class}] {message}")
    for name in _init_attributes(cls):
        if not hasattr(err, name):
            setattr(err, name, None)
    err.spark_exception = exc  # type: ignore[attr-defined]
    err.__cause__ = exc
    return err


def _init_attributes(cls: type[MvTableError]) -> list[str]:
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return []
    return [n for n in params if n not in ("self", "message", "args", "kwargs")]
