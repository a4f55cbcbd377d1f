"""Local disk, with ``put_if_absent`` made atomic by ``os.link``.

``put_if_absent`` writes a temp file in the same folder and ``os.link``s it into place:
``link(2)`` is atomic and fails if the name exists."""

from __future__ import annotations

import builtins
import os
import re
import uuid
from collections.abc import Iterable
from typing import Any

import pyarrow.fs as pafs

from mvtable.errors import CommitError, StorageLocationError

from .base import FileInfo
from .oserror import translated, typed


class LocalFileIO:
    """Local disk. ``arrow()`` hands pyarrow its native local filesystem (fast path)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.uri = self.root

    def make_root(self) -> None:
        """Create the table's folder (see ``storage.make_root``).

        Raises:
            StorageLocationError: The folder cannot be created, or a regular file is in its way."""
        check_not_a_file(self.root)
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise StorageLocationError(
                f"cannot create the table folder {self.root}: {exc.strerror or exc}; "
                "check that the path is right and that you may write there"
            ) from None

    def _p(self, path: str) -> str:
        return os.path.join(self.root, *path.split("/")) if path else self.root

    def read(self, path: str) -> bytes:
        target = self._p(path)
        with translated("read", target), open(target, "rb") as f:
            return f.read()

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        target = self._p(path)
        with translated("read", target), open(target, "rb") as f:
            f.seek(offset)
            return f.read(size)

    def write(self, path: str, data: bytes) -> None:
        """Replace ``path`` whole (a temp file renamed into place).

        A failed write removes its temp file (``temp_name`` tells vacuum the ones a killed
        process left)."""
        target = self._p(path)
        with translated("write", target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            tmp = f"{target}.{uuid.uuid4().hex}.tmp"
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            except BaseException:
                _unlink_quietly(tmp)
                raise

    def sync(self, paths: Iterable[str]) -> None:
        folders = set()
        for path in paths:
            target = self._p(path)
            try:
                fd = os.open(target, os.O_RDONLY)
            except FileNotFoundError:
                continue  # nothing of it to flush (whether it should exist is not storage's call)
            with translated("sync", target):
                try:
                    _sync_data(fd)
                finally:
                    os.close(fd)
            folders.add(os.path.dirname(target))
        for folder in sorted(folders):
            _fsync_dir(folder)

    def put_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        """Create ``path`` with ``data`` unless it exists: atomic by ``link(2)`` either way.

        ``durable`` adds ``fdatasync`` of the file before the link and ``fsync`` of its
        folder after it (without them a power loss, not a process crash, may lose the newest
        commits: ``commitDurability=os``)."""
        target = self._p(path)
        with translated("create", target):
            return self._put_if_absent(target, data, durable=durable)

    def _put_if_absent(self, target: str, data: bytes, *, durable: bool) -> bool:
        folder = os.path.dirname(target)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    _sync_data(f.fileno())
            try:
                os.link(tmp, target)
            except FileExistsError:
                return False
            except OSError as exc:
                # link(2) is atomic: on any other failure the name was not created.
                typed_exc = typed(exc, operation="create", path=target)
                if typed_exc is not exc:
                    raise typed_exc from exc
                raise CommitError(f"could not create {target}: {exc}") from exc
            if durable:
                _fsync_dir(folder)  # the new name survives a crash once we say it landed
            return True
        finally:
            _unlink_quietly(tmp)

    def set_mtime(self, path: str, seconds: float) -> None:
        """Set a file's modification time (local disk only).

        Object stores set it on upload and cannot change it. A Delta export dates each
        commit file so, because delta-rs times a commit by its file's modification time."""
        with translated("set the time of", self._p(path)):
            os.utime(self._p(path), (seconds, seconds))

    def exists(self, path: str) -> bool:
        return os.path.exists(self._p(path))

    def list(self, folder: str) -> list[FileInfo]:
        out = []
        try:
            with translated("list", self._p(folder)), os.scandir(self._p(folder)) as it:
                for e in it:
                    try:
                        if e.is_file():
                            st = e.stat()
                            out.append(FileInfo(e.name, st.st_size, st.st_mtime))
                    except FileNotFoundError:
                        continue  # deleted while we listed (GC, vacuum): just not there
        except FileNotFoundError:
            return []
        return out

    def list_names(self, folder: str) -> builtins.list[str]:  # `list` here is the method above
        """Names of the files in ``folder``, with no ``stat`` per file.

        The directory entry type suffices, which keeps listing a long log cheap."""
        try:
            with translated("list", self._p(folder)), os.scandir(self._p(folder)) as it:
                return [e.name for e in it if e.is_file()]
        except FileNotFoundError:
            return []

    def delete(self, paths: Iterable[str]) -> None:
        for path in paths:
            target = self._p(path)
            try:
                with translated("delete", target):
                    os.unlink(target)
            except FileNotFoundError:
                pass

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        """pyarrow's local filesystem with memory-mapped input files.

        Segments are immutable once written, and decoding straight from the page cache saves
        the copy into a read buffer (see benchmarks/README.md for what it saves). Unlinking a
        mapped file (vacuum) keeps the mapping valid until the reader closes it."""
        return pafs.LocalFileSystem(use_mmap=True), self.root

    def spec(self) -> dict[str, Any]:
        return {"uri": self.root, "options": {}}


def _sync_data(fd: int) -> None:
    """Flush a new file's bytes and size to disk before it is linked into place.

    ``fdatasync`` does that without also flushing timestamps, which makes a commit cheaper;
    the name itself is made durable by the folder's ``fsync`` after the link. Platforms
    without it (macOS) use ``fsync``."""
    sync = getattr(os, "fdatasync", None) or os.fsync
    sync(fd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass  # gone already, or the store refuses: vacuum collects it once it is old


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the link is still atomic
    finally:
        os.close(fd)


_TEMP_NAME = re.compile(r"^\.?.+\.[0-9a-f]{32}\.tmp$")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is a temp file of ``write`` / ``put_if_absent``.

    Such a file is one a process killed in the middle of a write left behind (failed writes
    remove their own), for vacuum to collect once it is older than any write could take."""
    return bool(_TEMP_NAME.match(name))


def check_not_a_file(root: str) -> None:
    """Refuse a table path that is, or lies under, a regular file.

    A table is a folder: a regular file at its path, or at the path of a folder above it,
    would otherwise surface as a bare ``NotADirectoryError`` from the first listing or write.

    Raises:
        StorageLocationError: ``root`` or a folder above it is a regular file."""
    if os.path.isdir(root):
        return
    if os.path.isfile(root):
        raise StorageLocationError(f"{root} is a file, not a table directory; give the path of the table's folder")
    child, parent = root, os.path.dirname(root)
    while parent and parent != child and not os.path.isdir(parent):
        if os.path.isfile(parent):
            raise StorageLocationError(f"{parent} is a file, so no table can live under it at {root}; give a path under a folder")
        child, parent = parent, os.path.dirname(parent)
