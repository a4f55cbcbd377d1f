"""S3's conditional write, for ``FsspecFileIO`` on an s3fs filesystem.

``put_if_absent`` is one ``PutObject`` with ``If-None-Match: *`` (never a multipart
upload: SeaweedFS checks the condition of ``CompleteMultipartUpload`` outside its object
lock). A failed precondition comes back from s3fs as ``FileExistsError`` when the server
names the condition (AWS, moto) and as ``OSError(EINVAL)`` when it does not (SeaweedFS).
Because botocore and s3fs retry a PUT whose answer was lost, a 412 can also mean that our
own earlier attempt landed: the object is then read back and compared with the data.
"""

from __future__ import annotations

import errno
import random
import time
from collections.abc import Iterable
from typing import Any

from mvtable.errors import CommitError, CommitStateUnknownError

from .oserror import access_denied

# Attempts of the conditional PUT itself (s3fs and botocore retry inside each attempt).
PUT_ATTEMPTS = 4
# HTTP answers that say the PUT was not applied and may simply be sent again.
# (A bare 503 without the SlowDown code may come from a proxy after the write: unknown.)
RETRY_STATUS = frozenset({408, 409, 429})

_botocore_ok: bool | None = None


def put_if_absent(fs: Any, target: str, data: bytes) -> bool:
    """Create ``target`` (``bucket/key``) holding ``data`` unless it exists; see the module docstring.

    ``True`` also when the key already holds exactly ``data`` (our own attempt whose answer
    was lost).

    Raises:
        CommitStateUnknownError: The store's answers do not tell whether the PUT landed.
        CommitError: The PUT was refused, ``data`` is too large, or botocore cannot send
            ``If-None-Match``."""
    if len(data) >= 5 * 2**30:
        raise CommitError(f"{target}: {len(data)} bytes is too large for one conditional PUT")
    check_botocore_if_none_match()
    bucket, key, _ = fs.split_path(target)
    maybe_landed: BaseException | None = None  # an attempt whose outcome we never learned
    last: BaseException | None = None
    for attempt in range(PUT_ATTEMPTS):
        if attempt:
            time.sleep(random.uniform(0.05, 0.2) * 2 ** (attempt - 1))
        try:
            fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except Exception as exc:
            last = exc
            kind = classify_error(exc)
            if kind == "retry":  # not applied (409 conflict, throttling): send it again
                continue
            if kind == "rejected" and maybe_landed is None:
                if access_denied(exc):  # read-only credentials: a typed StoragePermissionError
                    raise PermissionError(errno.EACCES, f"access denied ({exc})") from exc
                raise CommitError(f"conditional write of {target} was refused: {exc}") from exc
            # "exists": the key is there (ours, if an earlier attempt landed unseen);
            # "unknown": the PUT may or may not have been applied. Look.
            held = _holds(fs, target, data, absent=False if kind == "exists" else None)
            if held is not None:
                return held
            if kind == "unknown":
                maybe_landed = exc
                continue  # absent (or unreadable): a conditional PUT is safe to repeat
            raise CommitStateUnknownError(
                f"conditional write of {target}: the key exists but cannot be read back ({exc})"
            ) from exc
        else:
            fs.invalidate_cache(target)
            return True
    if maybe_landed is not None:
        raise CommitStateUnknownError(
            f"conditional write of {target}: cannot tell whether it landed ({maybe_landed})"
        ) from maybe_landed
    raise CommitError(f"conditional write of {target} kept being refused ({last})") from last


def _holds(fs: Any, target: str, data: bytes, absent: bool | None) -> bool | None:
    """After a failed conditional PUT: does ``target`` hold exactly ``data``?

    ``absent`` is the answer when it does not exist; ``None`` when it cannot be read."""
    fs.invalidate_cache(target)
    try:
        existing = fs.cat_file(target)
    except FileNotFoundError:
        return absent
    except Exception:
        return None
    return bool(existing == data)


def classify_error(exc: BaseException) -> str:
    """How a failed conditional PUT failed: ``exists``, ``retry``, ``rejected`` or ``unknown``.

    ``exists`` (412: the key exists), ``retry`` (not applied, try again), ``rejected`` (not
    applied, a client error) or ``unknown`` (may have been applied)."""
    if isinstance(exc, FileExistsError) or looks_like_precondition(exc):
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
            retry_codes = ("ConditionalRequestConflict", "SlowDown", "RequestTimeout", "TooManyRequests")
            if code in retry_codes or status in RETRY_STATUS:
                return "retry"
            if isinstance(status, int) and 400 <= status < 500:
                return "rejected"
            return "unknown"
        err = err.__cause__ or err.__context__
    if isinstance(exc, (PermissionError, FileNotFoundError)):
        return "rejected"  # s3fs translated a 403 / 404 (no such bucket)
    return "unknown"


def looks_like_precondition(exc: BaseException) -> bool:
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


def check_botocore_if_none_match() -> None:
    """Refuse a botocore that cannot send ``If-None-Match`` on ``PutObject``.

    s3fs silently drops request parameters that botocore's model does not know: with a
    botocore older than 1.35.20 the PUT would lose its If-None-Match and overwrite.

    Raises:
        CommitError: The installed botocore is older than 1.35.20."""
    global _botocore_ok
    if _botocore_ok is None:
        try:
            import botocore.session

            shape = botocore.session.get_session().get_service_model("s3").operation_model("PutObject").input_shape
            _botocore_ok = "IfNoneMatch" in shape.members
        except Exception:
            _botocore_ok = False
    if not _botocore_ok:
        raise CommitError("this botocore cannot send If-None-Match on PutObject (need botocore >= 1.35.20)")


def delete_objects(fs: Any, targets: Iterable[str]) -> None:
    """``DeleteObjects`` in batches of 1000 keys; deleting a missing key is no error."""
    by_bucket: dict[str, list[str]] = {}
    for t in targets:
        bucket, key, _ = fs.split_path(t)
        by_bucket.setdefault(bucket, []).append(key)
        fs.invalidate_cache(t)
    for bucket, keys in by_bucket.items():
        for i in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[i : i + 1000]]
            out = fs.call_s3("delete_objects", Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
            errors = [e for e in out.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                e = errors[0]
                if e.get("Code") == "AccessDenied":
                    raise PermissionError(errno.EACCES, f"could not delete s3://{bucket}/{e.get('Key')}: access denied")
                raise OSError(errno.EIO, f"could not delete s3://{bucket}/{e.get('Key')}: {e.get('Code')} {e.get('Message')}")
