"""The storage boundary's typed errors: errno to class, what they carry, that they cross
process boundaries, that handlers for the builtin ``OSError`` subclasses still match,
and the location checks of a table under a regular file."""

from __future__ import annotations

import errno
import os
import pickle
from pathlib import Path

import pyarrow as pa
import pytest

from mvtable import Table, errors
from mvtable.storage import LocalFileIO, is_temp_name, open_file_io
from mvtable.storage.oserror import translated, typed


@pytest.mark.parametrize(
    ("code", "kind", "builtin"),
    [
        (errno.ENOSPC, errors.StorageFullError, OSError),
        (errno.EDQUOT, errors.StorageFullError, OSError),
        (errno.EACCES, errors.StoragePermissionError, PermissionError),
        (errno.EPERM, errors.StoragePermissionError, PermissionError),
        (errno.EROFS, errors.StorageReadOnlyError, PermissionError),
        (errno.ENOTDIR, errors.StorageNotADirectoryError, NotADirectoryError),
        (errno.EISDIR, errors.StorageIsADirectoryError, IsADirectoryError),
    ],
)
def test_each_errno_has_its_typed_error(code: int, kind: type[errors.StorageError], builtin: type[OSError]) -> None:
    err = typed(OSError(code, os.strerror(code)), operation="write", path="/t/data/x.parquet")
    assert type(err) is kind
    assert isinstance(err, errors.StorageError) and isinstance(err, errors.MvTableError) and isinstance(err, builtin)
    assert (err.errno, err.path, err.filename, err.operation) == (code, "/t/data/x.parquet", "/t/data/x.parquet", "write")
    assert str(err).startswith(f"cannot write /t/data/x.parquet: {os.strerror(code)}; ")
    back = pickle.loads(pickle.dumps(err))  # Spark ships a task's error to the driver
    assert type(back) is kind and (back.errno, back.path, back.operation, str(back)) == (code, err.path, "write", str(err))


def test_answers_stay_as_they_are() -> None:
    """``FileNotFoundError`` and ``FileExistsError`` are answers the log and the readers
    rely on; an errno without a typed error is left alone."""
    for exc in (FileNotFoundError(errno.ENOENT, "x"), FileExistsError(errno.EEXIST, "x"), OSError(errno.EIO, "x")):
        assert typed(exc, operation="read", path="p") is exc
    with pytest.raises(FileNotFoundError), translated("read", "p"):
        raise FileNotFoundError(errno.ENOENT, "gone")


def test_an_object_store_refusal_without_errno_is_a_permission_error() -> None:
    err = typed(PermissionError("Access Denied"), operation="create", path="s3://b/t/_mvtable/log/0.json")
    assert type(err) is errors.StoragePermissionError and err.errno == errno.EACCES


def test_a_failed_local_write_removes_its_temp_file(tmp_path: Path) -> None:
    io = LocalFileIO(str(tmp_path))
    (tmp_path / "target").mkdir()  # os.replace of a file onto a folder fails after the temp file is written
    with pytest.raises(errors.StorageIsADirectoryError) as info:
        io.write("target", b"data")
    assert info.value.path == str(tmp_path / "target")
    assert [p.name for p in tmp_path.iterdir()] == ["target"]


def test_temp_names() -> None:
    hexid = "0123456789abcdef0123456789abcdef"
    assert is_temp_name(f"lease.json.{hexid}.tmp") and is_temp_name(f".00000000000000000001.json.{hexid}.tmp")
    assert not is_temp_name("x.tmp") and not is_temp_name(f"x.{hexid}.json") and not is_temp_name("a.parquet")


def test_a_table_under_a_regular_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("not a folder")
    for uri in (tmp_path / "f" / "t", tmp_path / "f" / "a" / "b"):
        with pytest.raises(errors.StorageLocationError, match="is a file, so no table can live under it"):
            Table.create(str(uri), schema=pa.schema([("a", pa.int64())]))
        with pytest.raises(errors.StorageLocationError):
            Table.open(str(uri))
        with pytest.raises(errors.StorageLocationError):
            open_file_io(str(uri))
    assert (tmp_path / "f").read_text() == "not a folder"
