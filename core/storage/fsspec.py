"""Any fsspec filesystem (``s3://`` through s3fs, ``gs://``, …).

On S3 the conditional write is ``s3.put_if_absent``; elsewhere fsspec's ``xb`` mode (a
zero-byte ``xb`` write is not conditional in s3fs, and unknown elsewhere, so it is
refused). s3fs caches listings, so everything that could be answered from that cache
(``exists``, ``list``) asks the server again.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlparse

import fsspec
import pyarrow.fs as pafs

from mvtable.errors import CommitError, CommitStateUnknownError, UnknownProtocolError

from . import s3
from .base import FileInfo
from .oserror import translated, typed


class FsspecFileIO:
    def __init__(self, uri: str, options: Mapping[str, Any] | None = None) -> None:
        self.uri = uri.rstrip("/")
        self.options = dict(options or {})
        self._fs, base = _filesystem(self.uri, self.options)
        self._pid = os.getpid()
        self.base: str = base.rstrip("/")
        self.protocol = urlparse(self.uri).scheme
        protocols = self._fs.protocol if isinstance(self._fs.protocol, (tuple, list)) else (self._fs.protocol,)
        self._s3 = "s3" in protocols and hasattr(self._fs, "call_s3")

    @property
    def fs(self) -> Any:
        """The fsspec filesystem, rebuilt in a forked child.

        Async filesystems such as s3fs are not fork-safe ("This class is not fork-safe"), and
        ``open_file_io`` hands a forked child (a forking Spark Python worker, say) the
        parent's cached instance."""
        if self._pid != os.getpid():
            self._fs = _filesystem(self.uri, self.options)[0]
            self._pid = os.getpid()
        return self._fs

    def _p(self, path: str) -> str:
        return f"{self.base}/{path}" if path else self.base

    def _where(self, path: str) -> str:
        return f"{self.uri}/{path}" if path else self.uri

    def read(self, path: str) -> bytes:
        with translated("read", self._where(path)):
            return bytes(self.fs.cat_file(self._p(path)))

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""
        with translated("read", self._where(path)):
            return bytes(self.fs.cat_file(self._p(path), start=offset, end=offset + size))

    def write(self, path: str, data: bytes) -> None:
        with translated("write", self._where(path)):
            self.fs.pipe_file(self._p(path), data)

    def sync(self, paths: Iterable[str]) -> None:
        """Nothing to do: an object store's put is durable once acknowledged."""

    def put_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        """Create ``path`` with ``data`` unless it exists.

        ``durable`` is ignored: a store that acknowledged the write keeps it. ``True``: the
        object now holds ``data`` and this call created it (or an identical copy: two writers
        of the very same bytes both get ``True``); ``False``: it held something else already.

        Raises:
            CommitStateUnknownError: The store's answers do not tell whether the write landed.
            CommitError: The store refused the conditional write (or ``data`` is empty).
            StorageError: The store refused access (a typed subclass by errno)."""
        target = self._p(path)
        if self._s3:
            with translated("create", self._where(path)):
                return s3.put_if_absent(self.fs, target, bytes(data))
        if not data:
            raise CommitError(f"refusing a zero-byte conditional write to {path}")
        try:
            with self.fs.open(target, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if s3.looks_like_precondition(exc):
                return False
            refused = typed(exc, operation="create", path=self._where(path))
            if refused is not exc:
                raise refused from exc
            raise CommitStateUnknownError(f"conditional write of {target} failed: {exc}") from exc
        except Exception as exc:  # network errors: the PUT may or may not have landed
            raise CommitStateUnknownError(f"conditional write of {target} failed: {exc}") from exc

    def exists(self, path: str) -> bool:
        target = self._p(path)
        self.fs.invalidate_cache(target)  # s3fs answers from a cached parent listing
        with translated("look up", self._where(path)):
            return bool(self.fs.exists(target))

    def _ls(self, folder: str) -> list[dict[str, Any]]:
        return list(self.fs.ls(self._p(folder), detail=True, refresh=True))

    def list(self, folder: str) -> list[FileInfo]:
        try:
            with translated("list", self._where(folder)):
                entries = self._ls(folder)
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            if e.get("type") == "file":
                name = e["name"].rstrip("/").rsplit("/", 1)[-1]
                mtime = e.get("mtime") or e.get("LastModified") or e.get("created")
                out.append(FileInfo(name, int(e.get("size") or 0), _as_epoch(mtime)))
        return out

    def list_names(self, folder: str) -> builtins.list[str]:  # `list` here is the method above
        """The names of the files in ``folder``.

        Object stores return sizes with the listing anyway; this skips building
        ``FileInfo``s and parsing their times."""
        return [info.name for info in self.list(folder)]

    def delete(self, paths: Iterable[str]) -> None:
        paths = builtins.list(paths)
        with translated("delete", self._where(paths[0]) if len(paths) == 1 else f"{len(paths)} files under {self.uri}"):
            self._delete(paths)

    def _delete(self, paths: builtins.list[str]) -> None:
        targets = [self._p(p) for p in paths]
        if not targets:
            return
        if self._s3:
            s3.delete_objects(self.fs, targets)
            return
        try:
            self.fs.rm(targets)
        except FileNotFoundError:
            for t in targets:
                try:
                    self.fs.rm_file(t)
                except FileNotFoundError:
                    pass

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs)), self.base

    def spec(self) -> dict[str, Any]:
        return {"uri": self.uri, "options": dict(self.options)}


# what a user most likely meant, and what to install for it (fsspec's own list is long)
_COMMON = "local paths, file://, memory://, s3:// (pip install 'mvtable[s3]'), gs:// (gcsfs), az:// and abfs:// (adlfs)"


def _filesystem(uri: str, options: Mapping[str, Any]) -> tuple[Any, str]:
    """fsspec's filesystem for ``uri``.

    An unknown protocol (fsspec: a bare ``ValueError``) or a known one whose package is
    missing (``ImportError``) is an ``UnknownProtocolError`` naming the protocol and what
    would handle it.

    Raises:
        UnknownProtocolError: No installed filesystem handles the protocol of ``uri``."""
    protocol = urlparse(uri).scheme
    try:
        return fsspec.core.url_to_fs(uri, **options)  # type: ignore[no-any-return]
    except ImportError as exc:
        raise UnknownProtocolError(
            f"storage protocol {protocol!r} of {uri!r} needs a package that is not installed: {exc}", protocol=protocol
        ) from None
    except ValueError as exc:
        if "protocol not known" not in str(exc).lower():
            raise
        raise UnknownProtocolError(
            f"unknown storage protocol {protocol!r} in {uri!r}; mvtable tables live on {_COMMON}, "
            "or any other protocol an installed fsspec filesystem registers",
            protocol=protocol,
        ) from None


def _as_epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value.timestamp())
    except AttributeError:
        return None
