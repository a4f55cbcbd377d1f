"""Where a table may live: ``open_file_io`` refuses what cannot hold a table with a typed
error naming the location, before any storage library raises something bare."""

from __future__ import annotations

import os

import pytest

from mvtable.errors import StorageLocationError, UnknownProtocolError
from mvtable.storage import LocalFileIO, make_root, open_file_io


def test_an_unknown_protocol_is_named_with_what_works() -> None:
    with pytest.raises(UnknownProtocolError, match=r"unknown storage protocol 'foo'.*s3://") as caught:
        open_file_io("foo://bar")
    assert caught.value.protocol == "foo"


@pytest.mark.parametrize("uri", ["", "   "])
def test_an_empty_path_is_refused(uri: str) -> None:
    with pytest.raises(StorageLocationError, match="the table path is empty"):
        open_file_io(uri)


def test_a_path_object_is_a_path_and_other_types_are_refused(tmp_path) -> None:
    assert isinstance(open_file_io(tmp_path / "t"), LocalFileIO)  # type: ignore[arg-type]
    with pytest.raises(StorageLocationError, match="path or URL string"):
        open_file_io(42)  # type: ignore[arg-type]


def test_a_regular_file_is_not_a_table_directory(tmp_path) -> None:
    path = tmp_path / "f.txt"
    path.write_text("x")
    with pytest.raises(StorageLocationError, match=r"f.txt is a file, not a table directory"):
        open_file_io(str(path))


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_folder_that_cannot_be_made_is_named() -> None:
    with pytest.raises(StorageLocationError, match=r"cannot create the table folder /proc/mvtable-nope"):
        make_root(open_file_io("/proc/mvtable-nope"))
