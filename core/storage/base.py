"""The storage interface every backend implements.

Paths are relative to the table root and use ``/``; ``mvtable.paths`` checks the ones read
from metadata."""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import pyarrow.fs as pafs


@dataclass(frozen=True)
class FileInfo:
    name: str  # base name inside the listed folder
    size: int
    mtime: float | None


@runtime_checkable
class FileIO(Protocol):
    """What every storage backend offers. Paths are relative to ``uri`` and use ``/``.

    A store's refusal reaches the caller as the ``StorageError`` branch of ``mvtable.errors``
    (``StorageFullError``, ``StorageReadOnlyError``, ``StoragePermissionError`` …, see
    ``storage.oserror``); ``FileNotFoundError`` and ``FileExistsError`` stay as they are, as
    answers rather than failures."""

    uri: str

    def read(self, path: str) -> bytes: ...
    def read_range(self, path: str, offset: int, size: int) -> bytes: ...
    def write(self, path: str, data: bytes) -> None: ...
    def put_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        """Create ``path`` with ``data`` unless it exists (atomic either way).

        ``durable``: the file reaches stable storage before this returns (local disk:
        ``fsync``); ``False`` leaves the write-back to the OS (table property
        ``commitDurability=os``). Object stores are durable once they acknowledge a put and
        ignore it."""
        ...

    def sync(self, paths: Iterable[str]) -> None:
        """Make files already written reach stable storage, with their names.

        On local disk that is an ``fsync`` of each file and of its folder. A durable commit
        calls it for the files it names before the commit file itself, so that a power loss
        never leaves a commit naming a segment whose bytes were still in the page cache.
        Object stores are durable once they acknowledge a put: a no-op there."""
        ...

    def exists(self, path: str) -> bool: ...
    def list(self, folder: str) -> list[FileInfo]: ...
    def delete(self, paths: Iterable[str]) -> None: ...
    def arrow(self) -> tuple[pafs.FileSystem, str]: ...
    def spec(self) -> dict[str, Any]: ...
    def list_names(self, folder: str) -> builtins.list[str]:  # `list` here is the method above
        """The names ``list`` would return, without sizes and times.

        Skipping the ``stat`` per file is what keeps listing a long log cheap on local disk."""
        ...
