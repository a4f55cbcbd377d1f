"""Storage behind one small interface (as pyiceberg's ``FileIO``).

Everything mvtable persists goes through a ``FileIO``: relative paths under one table
root, whole-object reads and writes, and the one primitive the commit protocol needs,
``put_if_absent``. One backend per module:

* ``local`` — local disk: a temp file ``os.link``ed into place (atomic, fails if the name
  exists), then the folder fsynced;
* ``fsspec`` — any fsspec filesystem; on S3 one ``PutObject`` with ``If-None-Match: *``
  (``s3``);
* ``memory`` — ``memory://``, for tests: put-if-absent under a process-wide lock.

A store's refusal (a full disk, a read-only mount, missing permissions) leaves every
backend as a typed ``mvtable.errors.StorageError`` naming the path and the operation
(``oserror``), never as a bare ``OSError``.

``FileIO`` objects are not shipped to Spark executors; their ``spec()`` (URL + options)
is, and ``open_file_io`` rebuilds (and caches) one per process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from mvtable.errors import StorageLocationError

from .base import FileInfo, FileIO
from .fsspec import FsspecFileIO
from .local import LocalFileIO, check_not_a_file, is_temp_name
from .memory import MemoryFileIO

__all__ = ["FileIO", "FileInfo", "FsspecFileIO", "LocalFileIO", "MemoryFileIO", "is_temp_name", "make_root", "open_file_io"]

_cache: dict[tuple[int, str, tuple[tuple[str, str], ...]], FileIO] = {}
_cache_lock = threading.Lock()


def open_file_io(uri: str, options: Mapping[str, Any] | None = None) -> FileIO:
    """The ``FileIO`` for a table URI; one instance per (uri, options) per process.

    A location that cannot hold a table is refused here, where every caller passes: an
    empty path (it would silently mean the current folder), a local path that is a regular
    file, a protocol no installed filesystem handles (``StorageLocationError``).

    Raises:
        StorageLocationError: ``uri`` is not a string, is empty or not encodable, or is a local
            path that is (or lies under) a regular file.
        UnknownProtocolError: No installed filesystem handles the protocol of ``uri``; the
            message says what to install.
    """
    uri = _check_uri(uri)
    opts = dict(options or {})
    # keyed by pid too: a forked child must not share its parent's clients
    key = (os.getpid(), uri, tuple(sorted((k, repr(v)) for k, v in opts.items())))
    with _cache_lock:
        io = _cache.get(key)
        if io is None:
            scheme = urlparse(uri).scheme
            if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
                io = LocalFileIO(urlparse(uri).path if scheme == "file" else uri)
            elif scheme == "memory":
                io = MemoryFileIO(uri, opts)
            else:
                io = FsspecFileIO(uri, opts)
            _cache[key] = io
    if isinstance(io, LocalFileIO):  # every time: a file may have taken the folder's place
        check_not_a_file(io.root)
    return io


def make_root(io: FileIO) -> None:
    """Create the table's folder where the store has folders (local disk).

    A path that cannot hold one (``/proc/x``, a read-only mount) then fails before anything
    is written, with an error naming it. Object stores have no folders: nothing to do.

    Raises:
        StorageLocationError: The folder cannot be created (read-only, no permission), or a
            regular file is in its way.
    """
    if isinstance(io, LocalFileIO):
        io.make_root()


def _check_uri(uri: object) -> str:
    if isinstance(uri, os.PathLike):
        uri = os.fspath(uri)
    if not isinstance(uri, str):
        raise StorageLocationError(f"a table location must be a path or URL string, not {type(uri).__name__} {uri!r}")
    if not uri.strip():
        raise StorageLocationError("the table path is empty; give the table's folder or URL (use '.' for the current folder)")
    try:
        uri.encode("utf-8")
    except UnicodeEncodeError as exc:  # a name in another encoding, decoded with surrogate escapes
        raise StorageLocationError(
            f"the table path {uri!r} is not UTF-8 ({uri[exc.start : exc.end]!r} at position {exc.start}): Arrow and "
            "Parquet write UTF-8 paths only, so such a table could be created but never written. Give a path "
            "whose names are UTF-8 (rename the folder)"
        ) from None
    return uri
