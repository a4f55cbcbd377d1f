"""Reader pins: ``_mvtable/pins/<pin id>.json`` says "someone is reading version v until t".

Visibility GC never removes what a live pin's version needs: the safe
version is the minimum of every live pin and the retention window. A pin is one small
JSON object, validated on read::

    {"format": 1, "version": 42, "created_ms": ..., "expires_ms": ..., "owner": "..."}

Pins expire so that a crashed reader cannot block GC forever; a long reader calls
``extend`` well before its pin runs out (an expired pin cannot be extended: GC may already
have collected what it protected).

For GC a pin file that cannot be read or validated is treated conservatively: it pins
version 0 (so nothing a reader might need is collected) until its modification time is
older than ``unreadable_ttl_s``; then it counts as expired and GC removes it. A warning is
logged each time one is seen. ``read_pin`` (an explicit read of one pin) raises
``CorruptPinError`` instead.

Storage is ``mvtable.storage.FileIO``.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mvtable.errors import CorruptPinError, PinError, PinExpiredError, PinNotFoundError

__all__ = [
    "PIN_DIR",
    "DEFAULT_UNREADABLE_TTL_S",
    "Pin",
    "PinScan",
    "PinError",
    "PinNotFoundError",
    "PinExpiredError",
    "CorruptPinError",
    "pin",
    "release",
    "extend",
    "shorten",
    "read_pin",
    "scan_pins",
    "live_pins",
    "expired_pins",
    "pin_path",
]

logger = logging.getLogger("mvtable.visibility")

PIN_DIR = "_mvtable/pins"
PIN_FORMAT: Final = 1
PIN_SUFFIX = ".json"
DEFAULT_UNREADABLE_TTL_S = 3600.0  # the connector passes its pinTtl
UNREADABLE_OWNER = "<unreadable pin file>"

_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
_PIN_NAME = re.compile(r"^([A-Za-z0-9_-]{1,128})\.json$")
_MAX_PIN_BYTES = 64 * 1024


class _PinFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: Literal[1]
    version: int = Field(ge=0)
    created_ms: int = Field(ge=0)
    expires_ms: int = Field(ge=0)
    owner: str = Field(default="", max_length=1000)


@dataclass(frozen=True)
class Pin:
    """A live (or expired) pin.

    ``readable`` is False for a stand-in made from a pin file that could not be read: it
    then pins version 0 and expires ``unreadable_ttl_s`` after the file's modification time."""

    id: str
    version: int
    created_ms: int
    expires_ms: int
    owner: str = ""
    readable: bool = True

    @property
    def path(self) -> str:
        return pin_path(self.id)

    def expired(self, now_ms: int) -> bool:
        return self.expires_ms <= now_ms


@dataclass(frozen=True)
class PinScan:
    """Everything in the pin folder at one moment.

    ``live`` pins (unreadable ones as version-0 stand-ins) and the ``expired`` files GC may
    delete (table-relative paths)."""

    live: list[Pin] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    @property
    def min_version(self) -> int | None:
        return min((p.version for p in self.live), default=None)


def pin_path(pin_id: str) -> str:
    if not isinstance(pin_id, str) or not _ID.match(pin_id):
        raise PinError(f"invalid pin id {pin_id!r}")
    return f"{PIN_DIR}/{pin_id}{PIN_SUFFIX}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ttl_ms(ttl_s: float) -> int:
    if not isinstance(ttl_s, (int, float)) or isinstance(ttl_s, bool) or ttl_s != ttl_s or ttl_s <= 0:
        raise PinError(f"a pin's ttl must be a positive number of seconds, not {ttl_s!r}")
    return int(round(ttl_s * 1000))


def _encode(doc: _PinFile) -> bytes:
    return doc.model_dump_json().encode()


def _parse(data: bytes, source: str) -> _PinFile:
    if len(data) > _MAX_PIN_BYTES:
        raise CorruptPinError(source, f"{len(data)} bytes is too large for a pin")
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptPinError(source, f"not valid JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise CorruptPinError(source, "a pin must be a JSON object")
    if raw.get("format") != PIN_FORMAT:
        raise CorruptPinError(source, f"format {raw.get('format')!r} is not supported (this mvtable reads {PIN_FORMAT})")
    try:
        doc = _PinFile.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise CorruptPinError(source, f"invalid content: {problems}") from None
    if doc.expires_ms < doc.created_ms:
        raise CorruptPinError(source, "expires before it was created")
    return doc


def _to_pin(pin_id: str, doc: _PinFile) -> Pin:
    return Pin(pin_id, doc.version, doc.created_ms, doc.expires_ms, doc.owner)


# -- the reader's side ------------------------------------------------------------------
def pin(store: Any, version: int, *, ttl_s: float, owner: str = "", now_ms: int | None = None) -> str:
    """Pin ``version`` for ``ttl_s`` seconds; returns the pin id.

    The caller must check *after* pinning that the version is still readable (GC may have
    planned before the pin existed); ``mvtable.connector.pinning.pin_snapshot`` does.

    Raises:
        PinError: ``version`` is not a non-negative integer, or ``ttl_s`` is not a positive
            number of seconds."""
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise PinError(f"a pinned version must be a non-negative integer, not {version!r}")
    now = _now_ms() if now_ms is None else int(now_ms)
    pin_id = uuid.uuid4().hex
    doc = _PinFile(format=PIN_FORMAT, version=version, created_ms=now, expires_ms=now + _ttl_ms(ttl_s), owner=str(owner)[:1000])
    store.write(pin_path(pin_id), _encode(doc))
    return pin_id


def read_pin(store: Any, pin_id: str) -> Pin:
    path = pin_path(pin_id)
    try:
        data = store.read(path)
    except FileNotFoundError:
        raise PinNotFoundError(f"no pin {pin_id} (released, or collected after it expired)") from None
    return _to_pin(pin_id, _parse(data, _where(store, path)))


def release(store: Any, pin_id: str) -> None:
    """Remove a pin. Releasing a pin that is gone already is not an error."""
    store.delete([pin_path(pin_id)])


def extend(store: Any, pin_id: str, ttl_s: float, *, now_ms: int | None = None) -> Pin:
    """Make the pin expire ``ttl_s`` seconds from now (never earlier than it did).

    Raises:
        PinExpiredError: The pin has expired already.
        PinNotFoundError: The pin is gone (released, or collected after it expired)."""
    now = _now_ms() if now_ms is None else int(now_ms)
    current = read_pin(store, pin_id)
    if current.expired(now):
        raise PinExpiredError(
            f"pin {pin_id} of version {current.version} expired at {current.expires_ms} ms (now {now} ms); "
            "GC may have collected what it protected: pin again and re-plan the read"
        )
    doc = _PinFile(
        format=PIN_FORMAT,
        version=current.version,
        created_ms=current.created_ms,
        expires_ms=max(current.expires_ms, now + _ttl_ms(ttl_s)),
        owner=current.owner,
    )
    store.write(pin_path(pin_id), _encode(doc))
    return _to_pin(pin_id, doc)


def shorten(store: Any, pin_id: str, ttl_s: float, *, now_ms: int | None = None) -> Pin | None:
    """Make the pin expire at most ``ttl_s`` seconds from now (never later than it did).

    A reader that is done for now but may come back (a Spark DataFrame between queries) keeps
    its version only briefly, so GC and vacuum need not wait a full ttl for it; ``extend``
    lengthens it again. ``None``: the pin is gone or expired already, nothing to shorten.

    Raises:
        PinError: ``ttl_s`` is not a positive number of seconds."""
    now = _now_ms() if now_ms is None else int(now_ms)
    ttl_ms = _ttl_ms(ttl_s)
    try:
        current = read_pin(store, pin_id)
    except PinNotFoundError:
        return None
    if current.expired(now):
        return None
    if current.expires_ms <= now + ttl_ms:
        return current
    doc = _PinFile(
        format=PIN_FORMAT, version=current.version, created_ms=current.created_ms, expires_ms=now + ttl_ms, owner=current.owner
    )
    store.write(pin_path(pin_id), _encode(doc))
    return _to_pin(pin_id, doc)


# -- GC's side --------------------------------------------------------------------------
def scan_pins(store: Any, *, now_ms: int | None = None, unreadable_ttl_s: float = DEFAULT_UNREADABLE_TTL_S) -> PinScan:
    """Read every pin file once and sort them into live and expired."""
    now = _now_ms() if now_ms is None else int(now_ms)
    grace_ms = int(round(max(0.0, float(unreadable_ttl_s)) * 1000))
    out = PinScan()
    for info in store.list(PIN_DIR):
        name = info.name
        path = f"{PIN_DIR}/{name}"
        mtime_ms = None if info.mtime is None else int(info.mtime * 1000)
        match = _PIN_NAME.match(name)
        if match is None:
            # Not a pin: e.g. the temp file of a pin write that died before its rename.
            # It protects nothing; tidy it up once it is old.
            if mtime_ms is not None and mtime_ms + grace_ms <= now:
                out.expired.append(path)
            continue
        pin_id = match.group(1)
        try:
            doc = _parse(store.read(path), _where(store, path))
        except FileNotFoundError:
            continue  # released while we looked
        except Exception as exc:
            out.unreadable.append(path)
            if mtime_ms is not None and mtime_ms + grace_ms <= now:
                logger.warning(
                    "pin file %s is unreadable (%s) and older than %.0f s: treating it as expired", path, exc, unreadable_ttl_s
                )
                out.expired.append(path)
            else:
                logger.warning("pin file %s is unreadable (%s): treating it as a pin of version 0 until it is old", path, exc)
                created = mtime_ms if mtime_ms is not None else now
                expires = created + grace_ms if mtime_ms is not None else 2**62  # no mtime: never expires by age
                out.live.append(Pin(pin_id, 0, created, max(expires, now + 1), UNREADABLE_OWNER, readable=False))
            continue
        p = _to_pin(pin_id, doc)
        if p.expired(now):
            out.expired.append(path)
        else:
            out.live.append(p)
    out.live.sort(key=lambda p: (p.version, p.id))
    out.expired.sort()
    return out


def live_pins(store: Any, *, now_ms: int | None = None, unreadable_ttl_s: float = DEFAULT_UNREADABLE_TTL_S) -> list[Pin]:
    """Pins that have not expired at ``now_ms``, oldest version first.

    An unreadable pin file appears as a version-0 stand-in (``readable=False``) until it is
    old."""
    return scan_pins(store, now_ms=now_ms, unreadable_ttl_s=unreadable_ttl_s).live


def expired_pins(store: Any, *, now_ms: int | None = None, unreadable_ttl_s: float = DEFAULT_UNREADABLE_TTL_S) -> list[str]:
    """Table-relative paths of pin files GC may delete at ``now_ms``.

    They are expired pins, unreadable pin files and stray temp files older than
    ``unreadable_ttl_s``."""
    return scan_pins(store, now_ms=now_ms, unreadable_ttl_s=unreadable_ttl_s).expired


def _where(store: Any, path: str) -> str:
    uri = getattr(store, "uri", None)
    return f"{uri}/{path}" if uri else path
