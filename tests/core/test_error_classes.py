"""Every mvtable error carries a stable error class at the start of its message, so it can be
recognised after Spark has wrapped it in its own exceptions (from_spark; the Spark side is
tested in tests/connector/test_spark_errors.py)."""

from __future__ import annotations

import pytest

from mvtable import errors
from mvtable.errors import MvTableError, VersionNotFoundError, all_error_classes, error_class_of, from_spark

# what callers match on: a class may be renamed, its error class may not change
STABLE = {
    "InvalidInputError": "MVTABLE_INVALID_INPUT",
    "InvalidOptionError": "MVTABLE_INVALID_OPTION",
    "InvalidFilterError": "MVTABLE_INVALID_FILTER",
    "SettingsError": "MVTABLE_SETTINGS",
    "SchemaMismatchError": "MVTABLE_SCHEMA_MISMATCH",
    "SchemaEvolutionError": "MVTABLE_SCHEMA_EVOLUTION",
    "PartitionSpecError": "MVTABLE_PARTITION_SPEC",
    "ReplaceWhereViolationError": "MVTABLE_REPLACE_WHERE_VIOLATION",
    "UnsupportedTypeError": "MVTABLE_UNSUPPORTED_TYPE",
    "InvalidRowAddressError": "MVTABLE_INVALID_ROW_ADDRESS",
    "RetentionTooShortError": "MVTABLE_RETENTION_TOO_SHORT",
    "InvalidLineageTransitionError": "MVTABLE_INVALID_LINEAGE_TRANSITION",
    "SegmentInUseError": "MVTABLE_SEGMENT_IN_USE",
    "PushBlockedError": "MVTABLE_PUSH_BLOCKED",
    "PushInProgressError": "MVTABLE_PUSH_IN_PROGRESS",
    "StagedPushError": "MVTABLE_STAGED_PUSH",
    "TableAlreadyExistsError": "MVTABLE_TABLE_ALREADY_EXISTS",
    "StorageLocationError": "MVTABLE_STORAGE_LOCATION",
    "UnknownProtocolError": "MVTABLE_UNKNOWN_PROTOCOL",
    "PrimaryKeyError": "MVTABLE_PRIMARY_KEY",
    "DuplicateKeyError": "MVTABLE_DUPLICATE_KEY",
    "NonKeyColumnError": "MVTABLE_NON_KEY_COLUMN",
    "NullKeyError": "MVTABLE_NULL_KEY",
    "KeyColumnMissingError": "MVTABLE_KEY_COLUMN_MISSING",
    "KeyTypeMismatchError": "MVTABLE_KEY_TYPE_MISMATCH",
    "UnsupportedKeyTypeError": "MVTABLE_UNSUPPORTED_KEY_TYPE",
    "NoPrimaryKeyError": "MVTABLE_NO_PRIMARY_KEY",
    "NotFoundError": "MVTABLE_NOT_FOUND",
    "TableNotFoundError": "MVTABLE_TABLE_NOT_FOUND",
    "VersionNotFoundError": "MVTABLE_VERSION_NOT_FOUND",
    "FilesMissingError": "MVTABLE_FILES_MISSING",
    "DeletionVectorNotFoundError": "MVTABLE_DELETION_VECTOR_NOT_FOUND",
    "PinError": "MVTABLE_PIN",
    "PinNotFoundError": "MVTABLE_PIN_NOT_FOUND",
    "PinExpiredError": "MVTABLE_PIN_EXPIRED",
    "CorruptionError": "MVTABLE_CORRUPTION",
    "CorruptMetadataError": "MVTABLE_CORRUPT_METADATA",
    "UnsafePathError": "MVTABLE_UNSAFE_PATH",
    "UnsupportedFormatError": "MVTABLE_UNSUPPORTED_FORMAT",
    "CorruptDeletionVectorError": "MVTABLE_CORRUPT_DELETION_VECTOR",
    "CorruptSegmentError": "MVTABLE_CORRUPT_SEGMENT",
    "CorruptKeyIndexError": "MVTABLE_CORRUPT_KEY_INDEX",
    "CorruptPinError": "MVTABLE_CORRUPT_PIN",
    "CommitError": "MVTABLE_COMMIT",
    "CommitConflictError": "MVTABLE_COMMIT_CONFLICT",
    "ConcurrentReplaceError": "MVTABLE_CONCURRENT_REPLACE",
    "ConcurrentCompactionError": "MVTABLE_CONCURRENT_COMPACTION",
    "ConcurrentLineageError": "MVTABLE_CONCURRENT_LINEAGE",
    "ConcurrentMetadataError": "MVTABLE_CONCURRENT_METADATA",
    "ConcurrentSchemaChangeError": "MVTABLE_CONCURRENT_SCHEMA_CHANGE",
    "ConcurrentKeyError": "MVTABLE_CONCURRENT_KEY",
    "TransactionConflictError": "MVTABLE_TRANSACTION_CONFLICT",
    "TransactionAbortedError": "MVTABLE_TRANSACTION_ABORTED",
    "TransactionNotFoundError": "MVTABLE_TRANSACTION_NOT_FOUND",
    "TransactionRollbackError": "MVTABLE_TRANSACTION_ROLLBACK",
    "TooManyRetriesError": "MVTABLE_TOO_MANY_RETRIES",
    "CommitStateUnknownError": "MVTABLE_COMMIT_STATE_UNKNOWN",
    "NothingToCommit": "MVTABLE_NOTHING_TO_COMMIT",
    "ExportError": "MVTABLE_EXPORT",
    "UnsupportedExportTypeError": "MVTABLE_UNSUPPORTED_EXPORT_TYPE",
    "ExportPathNotWritableError": "MVTABLE_EXPORT_PATH_NOT_WRITABLE",
    "ExportConflictError": "MVTABLE_EXPORT_CONFLICT",
    "ForeignExportMetadataError": "MVTABLE_FOREIGN_EXPORT_METADATA",
    "ExportOfAnotherTableError": "MVTABLE_EXPORT_OF_ANOTHER_TABLE",
    "StreamingError": "MVTABLE_STREAMING",
    "ChangeCommitInStreamError": "MVTABLE_CHANGE_COMMIT_IN_STREAM",
    "StreamTableReplacedError": "MVTABLE_STREAM_TABLE_REPLACED",
    "InvalidStreamOffsetError": "MVTABLE_INVALID_STREAM_OFFSET",
    "StreamSchemaChangedError": "MVTABLE_STREAM_SCHEMA_CHANGED",
    "JvmMaskUnavailableError": "MVTABLE_JVM_MASK_UNAVAILABLE",
}


def test_every_error_class_is_unique_and_stable():
    by_class = {cls: cls.error_class for cls in all_error_classes().values()}
    names = list(by_class.values())
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert all(n.startswith("MVTABLE_") and n == n.upper() for n in names)
    assert {cls.__name__: name for cls, name in by_class.items() if cls.__name__ in STABLE} == STABLE
    assert len(by_class) > len(STABLE)  # the new ones got one as well (PartitioningNotSupportedError, …)


def test_a_class_added_later_gets_one_without_asking():
    class NoSuchThingError(errors.NotFoundError):
        pass

    class KeepsItsOwn(errors.InvalidInputError):
        error_class = "MVTABLE_KEPT"

    try:
        assert NoSuchThingError.error_class == "MVTABLE_NO_SUCH_THING"
        assert KeepsItsOwn.error_class == "MVTABLE_KEPT"
        assert error_class_of("JvmMaskUnavailableError") == "MVTABLE_JVM_MASK_UNAVAILABLE"
        assert error_class_of("NothingToCommit") == "MVTABLE_NOTHING_TO_COMMIT"
    finally:
        del NoSuchThingError, KeepsItsOwn


def test_the_message_starts_with_the_class_once():
    err = VersionNotFoundError("version 99 does not exist (newest is 4)")
    assert str(err) == "[MVTABLE_VERSION_NOT_FOUND] version 99 does not exist (newest is 4)"
    assert str(VersionNotFoundError(str(err))) == str(err)  # re-raised with its own text: not tagged twice
    assert str(errors.CorruptMetadataError("_mvtable/log/1.json", "not JSON")).startswith(
        "[MVTABLE_CORRUPT_METADATA] _mvtable/log/1.json: "
    )
    assert isinstance(err, MvTableError) and err.args == ("version 99 does not exist (newest is 4)",)


def test_from_spark_reads_the_error_out_of_a_wrapped_traceback():
    # the text Spark 4.3 puts into AnalysisException [PYTHON_DATA_SOURCE_ERROR] (recorded from a real run)
    text = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback (most recent call last):\n"
        '  File "/x/lineage/log.py", line 206, in snapshot\n'
        '    raise VersionNotFoundError(f"version {target} does not exist")\n'
        "mvtable.errors.VersionNotFoundError: [MVTABLE_VERSION_NOT_FOUND] version 99 does not exist; the table's "
        "versions end at 0\n SQLSTATE: 38000"
    )
    wrapped = RuntimeError(text)
    err = from_spark(wrapped)
    assert type(err) is VersionNotFoundError
    assert str(err) == "[MVTABLE_VERSION_NOT_FOUND] version 99 does not exist; the table's versions end at 0"
    assert err.spark_exception is wrapped and err.__cause__ is wrapped
    assert from_spark(RuntimeError("[UNSUPPORTED_DATA_SOURCE_SAVE_MODE] nothing of ours")) is None
    mine = errors.TableNotFoundError("no table")
    assert from_spark(mine) is mine
    try:
        try:
            raise mine
        except MvTableError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        assert from_spark(outer) is mine


def test_from_spark_fills_attributes_it_cannot_know_with_none():
    text = "mvtable.errors.PushInProgressError: [MVTABLE_PUSH_IN_PROGRESS] entry push-1 is alive"
    err = from_spark(RuntimeError(text))
    assert isinstance(err, errors.PushInProgressError) and err.entry_id is None and err.owner is None
    with pytest.raises(errors.PushBlockedError, match=r"^\[MVTABLE_PUSH_IN_PROGRESS\] entry push-1 is alive$"):
        raise err
