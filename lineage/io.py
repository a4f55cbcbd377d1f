"""Storage behind a small interface (as pyiceberg's ``FileIO``).

Everything mvtable persists goes through ``FileIO``: relative paths under one table root,
whole-object reads and writes, and the one primitive the commit protocol needs —
``put_if_absent``. Local disk uses a temp file and ``os.link`` (atomic, fails if the name
exists); other fsspec filesystems use a conditional write (``mode="xb"``, on S3 an
``If-None-Match: *`` PUT); ``memory://`` uses a process-wide lock.

``FileIO`` objects are not shipped to Spark executors; their ``spec()`` (URL + options) is,
and ``open_file_io`` rebuilds (and caches) one per process.
"""

from __future__ import annotations

import errno
import os
import threading
import uuid
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from collections.abc import Iterable, Mapping
from urllib.parse import urlparse

import fsspec
import pyarrow.fs as pafs

from .errors import CommitError, CommitStateUnknownError


@dataclass(frozen=True)
class FileInfo:
    name: str  # base name inside the listed folder
    size: int
    mtime: float | None


@runtime_checkable
class FileIO(Protocol):
    """What every storage backend offers. Paths are relative to ``uri`` and use ``/``."""

    uri: str

    def read(self, path: str) -> bytes: ...
    def read_range(self, path: str, offset: int, size: int) -> bytes: ...
    def write(self, path: str, data: bytes) -> None: ...
    def put_if_absent(self, path: str, data: bytes) -> bool: ...
    def exists(self, path: str) -> bool: ...
    def list(self, folder: str) -> list[FileInfo]: ...
    def delete(self, paths: Iterable[str]) -> None: ...
    def arrow(self) -> tuple[pafs.FileSystem, str]: ...
    def spec(self) -> dict[str, Any]: ...
    # Optional: ``list_names(folder) -> list[str]``, the names of the files ``list`` would
    # return without their sizes and times. Callers fall back to ``list`` without it.


class LocalFileIO:
    """Local disk. ``arrow()`` hands pyarrow its native local filesystem (fast path)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.uri = self.root

    def _p(self, path: str) -> str:
        return os.path.join(self.root, *path.split("/")) if path else self.root

    def read(self, path: str) -> bytes:
        with open(self._p(path), "rb") as f:
            return f.read()

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        with open(self._p(path), "rb") as f:
            f.seek(offset)
            return f.read(size)

    def write(self, path: str, data: bytes) -> None:
        target = self._p(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, target)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        target = self._p(path)
        folder = os.path.dirname(target)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, target)
            except FileExistsError:
                return False
            except OSError as exc:
                # link(2) is atomic: on any other failure the name was not created.
                raise CommitError(f"could not create {target}: {exc}") from exc
            _fsync_dir(folder)  # the new name survives a crash once we say it landed
            return True
        finally:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass

    def exists(self, path: str) -> bool:
        return os.path.exists(self._p(path))

    def list(self, folder: str) -> list[FileInfo]:
        out = []
        try:
            with os.scandir(self._p(folder)) as it:
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

    def list_names(self, folder: str) -> list[str]:
        """Names of the files in ``folder``: no ``stat`` per file (the directory entry
        type suffices), so listing a 10,000-version log costs milliseconds, not 100."""
        try:
            with os.scandir(self._p(folder)) as it:
                return [e.name for e in it if e.is_file()]
        except FileNotFoundError:
            return []

    def delete(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                os.unlink(self._p(path))
            except FileNotFoundError:
                pass

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return pafs.LocalFileSystem(), self.root

    def spec(self) -> dict[str, Any]:
        return {"uri": self.root, "options": {}}


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


_memory_lock = threading.Lock()


class FsspecFileIO:
    """Any fsspec filesystem (``memory://``, ``s3://`` through s3fs, …).

    On S3 ``put_if_absent`` is one ``PutObject`` with ``If-None-Match: *`` (never a multipart
    upload: SeaweedFS checks the condition of ``CompleteMultipartUpload`` outside its object
    lock). A failed precondition comes back from s3fs as ``FileExistsError`` when the server
    names the condition (AWS, moto) and as ``OSError(EINVAL)`` when it does not (SeaweedFS).
    Because botocore and s3fs retry a PUT whose answer was lost, a 412 can also mean that our
    own earlier attempt landed: the object is then read back and compared with ``data``.
    s3fs caches listings, so everything that can be answered from that cache (``exists``,
    ``list``) asks the server again.
    """

    # Attempts of the conditional PUT itself (s3fs and botocore retry inside each attempt).
    _PUT_ATTEMPTS = 4
    # HTTP answers that say the PUT was not applied and may simply be sent again.
    # (A bare 503 without the SlowDown code may come from a proxy after the write: unknown.)
    _RETRY_STATUS = frozenset({408, 409, 429})

    def __init__(self, uri: str, options: Mapping[str, Any] | None = None) -> None:
        self.uri = uri.rstrip("/")
        self.options = dict(options or {})
        self._fs, self.base = fsspec.core.url_to_fs(self.uri, **self.options)
        self._pid = os.getpid()
        self.base = self.base.rstrip("/")
        self.protocol = urlparse(self.uri).scheme
        protocols = self._fs.protocol if isinstance(self._fs.protocol, (tuple, list)) else (self._fs.protocol,)
        self._s3 = "s3" in protocols and hasattr(self._fs, "call_s3")

    @property
    def fs(self) -> Any:
        """The fsspec filesystem, rebuilt in a forked child: async filesystems such as s3fs
        are not fork-safe ("This class is not fork-safe"), and ``open_file_io`` hands a
        forked child (a forking Spark Python worker, say) the parent's cached instance."""
        if self._pid != os.getpid() and self.protocol != "memory":
            self._fs = fsspec.core.url_to_fs(self.uri, **self.options)[0]
            self._pid = os.getpid()
        return self._fs

    @fs.setter
    def fs(self, value: Any) -> None:
        self._fs = value

    def _p(self, path: str) -> str:
        return f"{self.base}/{path}" if path else self.base

    def read(self, path: str) -> bytes:
        return self.fs.cat_file(self._p(path))

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        if size <= 0:
            return b""
        return self.fs.cat_file(self._p(path), start=offset, end=offset + size)

    def write(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(self._p(path), data)

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Create ``path`` with ``data`` unless it exists. ``True``: the object now holds
        ``data`` and this call created it (or an identical copy: two writers of the very same
        bytes both get ``True``); ``False``: it held something else already.
        ``CommitStateUnknownError`` only when the store's answers do not tell."""
        target = self._p(path)
        if self.protocol == "memory":
            with _memory_lock:
                if self.fs.exists(target):
                    return False
                self.fs.pipe_file(target, data)
                return True
        if self._s3:
            return self._s3_put_if_absent(target, bytes(data))
        if not data:
            # A zero-byte "xb" write is not conditional in s3fs, and unknown elsewhere.
            raise CommitError(f"refusing a zero-byte conditional write to {path}")
        try:
            with self.fs.open(target, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if _looks_like_precondition(exc):
                return False
            raise CommitStateUnknownError(f"conditional write of {target} failed: {exc}") from exc
        except Exception as exc:  # network errors: the PUT may or may not have landed
            raise CommitStateUnknownError(f"conditional write of {target} failed: {exc}") from exc

    def _s3_put_if_absent(self, target: str, data: bytes) -> bool:
        import random
        import time

        if len(data) >= 5 * 2**30:
            raise CommitError(f"{target}: {len(data)} bytes is too large for one conditional PUT")
        FsspecFileIO._check_botocore_if_none_match()
        bucket, key, _ = self.fs.split_path(target)
        maybe_landed: BaseException | None = None  # an attempt whose outcome we never learned
        last: BaseException | None = None
        for attempt in range(self._PUT_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0.05, 0.2) * 2 ** (attempt - 1))
            try:
                self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            except Exception as exc:
                last = exc
                kind = FsspecFileIO._classify_s3_error(exc)
                if kind == "retry":  # not applied (409 conflict, throttling): send it again
                    continue
                if kind == "rejected" and maybe_landed is None:
                    raise CommitError(f"conditional write of {target} was refused: {exc}") from exc
                # "exists": the key is there (ours, if an earlier attempt landed unseen);
                # "unknown": the PUT may or may not have been applied. Look.
                held = self._holds(target, data, absent=False if kind == "exists" else None)
                if held is not None:
                    return held
                if kind == "unknown":
                    maybe_landed = exc
                    continue  # absent (or unreadable): a conditional PUT is safe to repeat
                raise CommitStateUnknownError(
                    f"conditional write of {target}: the key exists but cannot be read back ({exc})"
                ) from exc
            else:
                self.fs.invalidate_cache(target)
                return True
        if maybe_landed is not None:
            raise CommitStateUnknownError(
                f"conditional write of {target}: cannot tell whether it landed ({maybe_landed})"
            ) from maybe_landed
        raise CommitError(f"conditional write of {target} kept being refused ({last})") from last

    def _holds(self, target: str, data: bytes, absent: bool | None) -> bool | None:
        """After a failed conditional PUT: does ``target`` hold exactly ``data``? ``absent``
        is the answer when it does not exist; ``None`` when it cannot be read."""
        self.fs.invalidate_cache(target)
        try:
            existing = self.fs.cat_file(target)
        except FileNotFoundError:
            return absent
        except Exception:
            return None
        return existing == data

    @staticmethod
    def _classify_s3_error(exc: BaseException) -> str:
        """``exists`` (412: the key exists), ``retry`` (not applied, try again),
        ``rejected`` (not applied, a client error) or ``unknown`` (may have been applied)."""
        if isinstance(exc, FileExistsError) or _looks_like_precondition(exc):
            return "exists"
        seen: set[int] = set()
        err: BaseException | None = exc
        while err is not None and id(err) not in seen:
            seen.add(id(err))
            name = type(err).__name__
            if name in ("ParamValidationError", "NoCredentialsError", "PartialCredentialsError"):
                return "rejected"  # raised by botocore before anything was sent
            response = getattr(err, "response", None)
            if isinstance(response, dict):
                code = str((response.get("Error") or {}).get("Code", ""))
                status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
                if code in ("ConditionalRequestConflict", "SlowDown", "RequestTimeout", "TooManyRequests") or status in FsspecFileIO._RETRY_STATUS:
                    return "retry"
                if isinstance(status, int) and 400 <= status < 500:
                    return "rejected"
                return "unknown"
            err = err.__cause__ or err.__context__
        if isinstance(exc, (PermissionError, FileNotFoundError)):
            return "rejected"  # s3fs translated a 403 / 404 (no such bucket)
        return "unknown"

    @staticmethod
    def _check_botocore_if_none_match() -> None:
        # s3fs silently drops request parameters that botocore's model does not know: with a
        # botocore older than 1.35.20 the PUT would lose its If-None-Match and overwrite.
        ok = getattr(FsspecFileIO, "_botocore_ok", None)
        if ok is None:
            try:
                import botocore.session

                shape = botocore.session.get_session().get_service_model("s3").operation_model("PutObject").input_shape
                ok = "IfNoneMatch" in shape.members
            except Exception:
                ok = False
            FsspecFileIO._botocore_ok = ok
        if not ok:
            raise CommitError("this botocore cannot send If-None-Match on PutObject (need botocore >= 1.35.20)")

    def exists(self, path: str) -> bool:
        target = self._p(path)
        if self.protocol != "memory":
            self.fs.invalidate_cache(target)  # s3fs answers from a cached parent listing
        return bool(self.fs.exists(target))

    def list(self, folder: str) -> list[FileInfo]:
        try:
            entries = self.fs.ls(self._p(folder), detail=True, refresh=True) if self.protocol != "memory" else self.fs.ls(self._p(folder), detail=True)
        except FileNotFoundError:
            return []
        out = []
        for e in entries:
            if e.get("type") == "file":
                name = e["name"].rstrip("/").rsplit("/", 1)[-1]
                mtime = e.get("mtime") or e.get("LastModified") or e.get("created")
                out.append(FileInfo(name, int(e.get("size") or 0), _as_epoch(mtime)))
        return out

    def list_names(self, folder: str) -> list[str]:
        """Names of the files in ``folder``. Object stores return sizes with the listing
        anyway; this skips building ``FileInfo``s and parsing their times."""
        return [info.name for info in self.list(folder)]

    def delete(self, paths: Iterable[str]) -> None:
        targets = [self._p(p) for p in paths]
        if not targets:
            return
        if self._s3:
            # DeleteObjects in batches of 1000 keys; deleting a missing key is no error.
            by_bucket: dict[str, list[str]] = {}
            for t in targets:
                bucket, key, _ = self.fs.split_path(t)
                by_bucket.setdefault(bucket, []).append(key)
                self.fs.invalidate_cache(t)
            for bucket, keys in by_bucket.items():
                for i in range(0, len(keys), 1000):
                    batch = [{"Key": k} for k in keys[i : i + 1000]]
                    out = self.fs.call_s3("delete_objects", Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                    errors = [e for e in out.get("Errors", []) if e.get("Code") != "NoSuchKey"]
                    if errors:
                        e = errors[0]
                        raise OSError(errno.EIO, f"could not delete s3://{bucket}/{e.get('Key')}: {e.get('Code')} {e.get('Message')}")
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


def _looks_like_precondition(exc: BaseException) -> bool:
    """Is ``exc`` a failed precondition (HTTP 412) of a conditional write?

    s3fs raises ``FileExistsError`` when the server's error names the ``If-None-Match``
    condition (AWS, moto) and ``OSError(EINVAL)`` when it does not (SeaweedFS: "At least one
    of the pre-conditions you specified did not hold"), with botocore's ``ClientError`` as
    ``__cause__``. A 409 ``ConditionalRequestConflict`` is *not* one: nothing was written
    and the key may still be absent."""
    if isinstance(exc, FileExistsError):
        return True
    seen: set[int] = set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        response = getattr(err, "response", None)
        if isinstance(response, dict):
            code = str((response.get("Error") or {}).get("Code", ""))
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            return code in ("PreconditionFailed", "412") or status == 412
        err = err.__cause__ or err.__context__
    if isinstance(exc, OSError) and exc.errno in (errno.EINVAL, errno.EEXIST, None):
        text = str(exc).lower()
        return any(w in text for w in ("precondition", "pre-condition", "already exists"))
    return False


def _as_epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return value.timestamp()
    except AttributeError:
        return None


_cache: dict[tuple[int, str, tuple[tuple[str, str], ...]], FileIO] = {}
_cache_lock = threading.Lock()


def open_file_io(uri: str, options: Mapping[str, Any] | None = None) -> FileIO:
    """The ``FileIO`` for a table URI; one instance per (uri, options) per process."""
    opts = dict(options or {})
    # keyed by pid too: a forked child must not share its parent's clients
    key = (os.getpid(), uri, tuple(sorted((k, repr(v)) for k, v in opts.items())))
    with _cache_lock:
        io = _cache.get(key)
        if io is None:
            scheme = urlparse(uri).scheme
            if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
                io = LocalFileIO(urlparse(uri).path if scheme == "file" else uri)
            else:
                io = FsspecFileIO(uri, opts)
            _cache[key] = io
        return io
