"""The one place where the store's ``OSError``s become typed ``StorageError``s.

Every backend method runs inside ``translated(operation, path)``, and so do the few
places that write through pyarrow's filesystem (segments): a full disk, a read-only
mount, missing permissions or a file in a folder's way then reach the caller as
``StorageFullError`` / ``StorageReadOnlyError`` / ``StoragePermissionError`` /
``StorageNotADirectoryError`` naming the path and the operation, never as a bare
``[Errno 28]``. ``FileNotFoundError`` and ``FileExistsError`` stay as they are: the
commit protocol and every reader rely on them as answers, not failures.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

from mvtable.errors import (
    StorageError,
    StorageFullError,
    StorageIsADirectoryError,
    StorageNotADirectoryError,
    StoragePermissionError,
    StorageReadOnlyError,
)

__all__ = ["READ_ONLY", "access_denied", "translated", "typed"]

_KINDS: dict[int, type[StorageError]] = {
    errno.ENOSPC: StorageFullError,
    errno.EDQUOT: StorageFullError,
    errno.EACCES: StoragePermissionError,
    errno.EPERM: StoragePermissionError,
    errno.EROFS: StorageReadOnlyError,
    errno.ENOTDIR: StorageNotADirectoryError,
    errno.EISDIR: StorageIsADirectoryError,
}

# what the message tells a person to do, per kind
_ADVICE: dict[type[StorageError], str] = {
    StorageFullError: "free space (mvtable vacuum frees what no version needs, even on a full disk) and run it again",
    StorageReadOnlyError: "the storage is read-only: read the table here, write it where it is writable",
    StoragePermissionError: "check the credentials and the permissions of this path",
    StorageNotADirectoryError: "a file stands where a folder belongs: check the path, or move the file away",
    StorageIsADirectoryError: "a folder stands where a file belongs: move it away",
}

# the errors a write to read-only storage (a mount or credentials) ends in
READ_ONLY = (StorageReadOnlyError, StoragePermissionError)


def typed(exc: BaseException, *, operation: str, path: str) -> BaseException:
    """``exc`` as the ``StorageError`` its errno stands for, or ``exc`` itself when none does.

    ``exc`` is also returned as it is when it is typed already. pyarrow's ``OSError``s carry
    the errno too; an object store's refusal (s3fs: ``PermissionError`` without one) counts
    as ``EACCES``."""
    if isinstance(exc, StorageError) or not isinstance(exc, OSError):
        return exc
    code = exc.errno
    kind = _KINDS.get(code) if code is not None else None
    if kind is None:
        if not access_denied(exc):
            return exc
        kind, code = StoragePermissionError, errno.EACCES
    reason = os.strerror(code) if code in _KINDS else str(exc) or "access denied"
    return kind(f"cannot {operation} {path}: {reason}; {_ADVICE[kind]}", path=path, operation=operation, errno=code)


@contextmanager
def translated(operation: str, path: str) -> Iterator[None]:
    """Run a storage call; an ``OSError`` with a known cause leaves it typed (``typed``), chained to the original.

    Raises:
        StorageError: The store refused the call (the subclass its errno stands for)."""
    try:
        yield
    except OSError as exc:
        err = typed(exc, operation=operation, path=path)
        if err is exc:
            raise
        raise err from exc


def access_denied(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is the store refusing access.

    That is a ``PermissionError``, an HTTP 403, or an ``AccessDenied`` code."""
    seen: set[int] = set()
    err: BaseException | None = exc
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, PermissionError):
            return True
        response = getattr(err, "response", None)
        if isinstance(response, dict):
            code = str((response.get("Error") or {}).get("Code", ""))
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if status == 403 or code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                return True
        err = err.__cause__ or err.__context__
    return False
