"""Pinning a snapshot: the one way connector code resolves the version it reads and keeps it readable while it does.

Every read and every delete (``Table.scan``, ``Table.delete`` / ``delete_rows``, the Spark
data source and Spark ``delete()``, ``read_native``, the write protocol) goes through
``pin_snapshot``: it resolves the version (the newest, a ``version``, a ``timestamp``, or a
snapshot already read), writes a reader pin (``mvtable.visibility.pins``, the storage
layer: one small file per pin) and reads the snapshot. GC and vacuum see the same pins
through ``pin_scan``. A pin protects its version from visibility GC (DV and log files) and
vacuum (data files) until it is released or ``pinTtl`` passes: pins expire so that a
reader that dies never blocks GC for long. A reader that is done for now but may read the
same version again (a Spark DataFrame between queries) cuts its pin to ``pinIdleTtl``
(``idle``) and renews it before it reads again.

Pinning is best effort where the store cannot take a pin (a read-only mount or read-only
credentials, a full disk): the read goes on unpinned (``UNPINNED``), with one warning per
table and process, because a reader that cannot pin is better than none; it is then
exposed only to a vacuum running elsewhere, which it reports as ``FilesMissingError``
rather than reading wrong rows.

Why the version is checked after pinning: GC may have planned before the pin landed. A
version that was the newest when it was resolved is safe (GC never collects what the
newest version needs, and a DV file committed after GC read the log is younger than its
grace period), so only an older version (time travel, a renewed pin that had expired)
is checked: its log must still replay and its DV files must still exist. Otherwise the
pin is removed and the typed ``NotFoundError`` says what was collected.

``SnapshotPin`` (version + pin id) is what crosses process boundaries: a Spark data source
instance, every Spark ``InputPartition``, a ``WritePlan``. Whoever holds it may ``renew``
it (extend, or pin again if it expired) and ``release`` it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from mvtable import checks
from mvtable.conf import connector_settings
from mvtable.errors import (
    DeletionVectorNotFoundError,
    FilesMissingError,
    InvalidOptionError,
    PinExpiredError,
    PinNotFoundError,
    StorageFullError,
    VersionNotFoundError,
)
from mvtable.lineage.log import CommitLog
from mvtable.lineage.snapshot import Snapshot
from mvtable.storage import FileIO
from mvtable.storage.oserror import READ_ONLY
from mvtable.visibility import pins
from mvtable.visibility.files import DV_DIR

from .timeparse import parse_timestamp_ms

__all__ = [
    "PinnedSnapshot",
    "SnapshotPin",
    "idle",
    "pin_idle_ttl_s",
    "pin_scan",
    "pin_snapshot",
    "pin_ttl_s",
    "pin_version",
    "release",
    "renew",
    "resolve_version",
]


_EXISTS_CALLS = 16

logger = logging.getLogger("mvtable.connector")

# The pin id of a read that could not pin (``SnapshotPin.pinned`` is False): releasing it
# does nothing, renewing it tries to pin again.
UNPINNED = ""
_CANNOT_PIN = (*READ_ONLY, StorageFullError)
_warned: set[str] = set()
_warned_lock = threading.Lock()


@dataclass(frozen=True)
class SnapshotPin:
    """A pinned version and the pin that holds it: small and picklable."""

    version: int
    pin_id: str

    @property
    def pinned(self) -> bool:
        return self.pin_id != UNPINNED


def pin_ttl_s(ttl_s: float | None = None) -> float:
    """``ttl_s``, or the connector's ``pinTtl`` in seconds."""
    return connector_settings().pin_ttl_s if ttl_s is None else float(ttl_s)


def pin_idle_ttl_s(ttl_s: float | None = None) -> float:
    """``ttl_s``, or the connector's ``pinIdleTtl`` in seconds."""
    return connector_settings().pin_idle_ttl_s if ttl_s is None else float(ttl_s)


def resolve_version(commit_log: CommitLog, *, version: int | None = None, timestamp: Any = None) -> int | None:
    """The version a read asks for.

    ``version``, the newest at or before ``timestamp``, or ``None`` (the newest, resolved when the
    snapshot is read).

    Raises:
        InvalidOptionError: Both a version and a timestamp were given."""
    if version is not None and timestamp is not None:
        raise InvalidOptionError("give a version or a timestamp, not both")
    if timestamp is not None:
        return commit_log.version_at(parse_timestamp_ms(timestamp))
    return None if version is None else checks.version(version)


class PinnedSnapshot:
    """A snapshot and the pin that keeps it readable.

    A context manager: the pin is released when the block ends (``release`` may also be called
    directly, twice is fine). Without ``release`` the pin expires after its ttl."""

    def __init__(self, io: FileIO, commit_log: CommitLog, snapshot: Snapshot, pin: SnapshotPin, *, owner: str) -> None:
        self.io = io
        self.commit_log = commit_log
        self.snapshot = snapshot
        self.pin: SnapshotPin = pin
        self.owner = owner
        self.released = False

    @property
    def version(self) -> int:
        return self.pin.version

    def release(self) -> None:
        """Remove the pin now; releasing it twice is fine.

        Raises:
            StorageError: The store refused or failed to delete the pin file; the pin still
                expires by itself.
        """
        if not self.released:
            release(self.io, self.pin)
            self.released = True

    def renew(self, *, ttl_s: float | None = None) -> None:
        """Keep the version readable for ``ttl_s`` more seconds.

        Extend the pin, or pin again (checking the version is still readable) if it was released or
        expired.

        Raises:
            VersionNotFoundError: The pin lapsed and the version is no longer in the log.
            DeletionVectorNotFoundError: The pin lapsed and the version's deletion vectors were
                collected meanwhile; read a newer version.
            CorruptMetadataError: A log file or checkpoint is damaged; the message names it.
            StorageError: The store refused or failed a read or write (permissions, network).
        """
        if self.released:
            self.pin = _repin(self.io, self.commit_log, self.version, ttl_s=ttl_s, owner=self.owner)
            self.released = False
        else:
            self.pin = renew(self.io, self.pin, commit_log=self.commit_log, ttl_s=ttl_s, owner=self.owner)

    def __enter__(self) -> PinnedSnapshot:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "released" if self.released else f"pin {self.pin.pin_id}"
        return f"PinnedSnapshot(version={self.version}, {state})"


def pin_snapshot(
    io: FileIO,
    commit_log: CommitLog,
    *,
    version: int | None = None,
    timestamp: Any = None,
    snapshot: Snapshot | None = None,
    ttl_s: float | None = None,
    owner: str = "reader",
) -> PinnedSnapshot:
    """Resolve the version, pin it for ``ttl_s`` (default ``pinTtl``) and read its snapshot.

    The version is ``snapshot`` (already read), ``version``, ``timestamp``, or the newest.

    Raises ``VersionNotFoundError`` / ``DeletionVectorNotFoundError`` (and leaves no pin)
    when an older version was collected before the pin landed.

    Raises:
        VersionNotFoundError: The version does not exist.
        InvalidOptionError: A snapshot already read came with a version or timestamp."""
    label = f"{owner} (pid {os.getpid()})"
    ttl = pin_ttl_s(ttl_s)
    if snapshot is not None:
        if version is not None or timestamp is not None:
            raise InvalidOptionError("pin a snapshot already read, or a version/timestamp, not both")
        return PinnedSnapshot(io, commit_log, snapshot, pin_version(io, snapshot.version, ttl_s=ttl, owner=owner), owner=owner)
    wanted = resolve_version(commit_log, version=version, timestamp=timestamp)
    if wanted is None:
        read = commit_log.snapshot()  # the newest: safe to pin after reading
        pin_id = try_pin(io, read.version, ttl_s=ttl, owner=label)
        return PinnedSnapshot(io, commit_log, read, SnapshotPin(read.version, pin_id), owner=owner)
    if wanted < 0:
        raise VersionNotFoundError(f"version {wanted} does not exist; versions start at 0")
    pin_id = try_pin(io, wanted, ttl_s=ttl, owner=label)
    try:
        listing = commit_log.listing()  # after the pin: GC planning from now on sees it
        read = commit_log.snapshot(wanted, listing=listing)
        if wanted < listing.latest:
            check_files(io, read)
    except BaseException:
        _release_id(io, pin_id)
        raise
    return PinnedSnapshot(io, commit_log, read, SnapshotPin(wanted, pin_id), owner=owner)


def pin_version(io: FileIO, version: int, *, ttl_s: float | None = None, owner: str = "reader") -> SnapshotPin:
    """Pin ``version`` without reading its snapshot, for a caller that read it already.

    E.g. a compaction batch, or a stream moving from version to version. Like pinning a snapshot
    given, no file check: the caller read the version while it was there."""
    return SnapshotPin(version, try_pin(io, version, ttl_s=pin_ttl_s(ttl_s), owner=f"{owner} (pid {os.getpid()})"))


def try_pin(io: FileIO, version: int, *, ttl_s: float, owner: str) -> str:
    """Write a pin of ``version``.

    ``UNPINNED`` (and one warning per table and process) when the store cannot take it: read-only,
    no write permission, no space."""
    try:
        return pins.pin(io, version, ttl_s=ttl_s, owner=owner)
    except _CANNOT_PIN as exc:
        with _warned_lock:
            first = io.uri not in _warned
            _warned.add(io.uri)
        if first:
            logger.warning(
                "reading %s without a reader pin: %s. Reads work; a vacuum run elsewhere meanwhile may remove files "
                "this read needs (it then fails with FilesMissingError, never wrong rows)",
                io.uri,
                exc,
            )
        return UNPINNED


def _release_id(io: FileIO, pin_id: str) -> None:
    if pin_id != UNPINNED:
        pins.release(io, pin_id)


def renew(
    io: FileIO, pin: SnapshotPin, *, commit_log: CommitLog | None = None, ttl_s: float | None = None, owner: str = "reader"
) -> SnapshotPin:
    """Extend ``pin`` by ``ttl_s`` (default ``pinTtl``).

    If it expired or was removed, pin the version again and check it is still readable (needs
    ``log``); otherwise raise ``PinExpiredError`` naming the version. A read that could not pin
    tries again.

    Raises:
        PinExpiredError: The pin is gone and could not be made again; read the table again."""
    if not pin.pinned:
        return SnapshotPin(pin.version, try_pin(io, pin.version, ttl_s=pin_ttl_s(ttl_s), owner=f"{owner} (pid {os.getpid()})"))
    try:
        pins.extend(io, pin.pin_id, pin_ttl_s(ttl_s))
        return pin
    except _CANNOT_PIN as exc:  # the pin holds until it expires; the read goes on
        logger.warning("could not extend the pin of version %s of %s: %s", pin.version, io.uri, exc)
        return pin
    except (PinExpiredError, PinNotFoundError) as exc:
        if commit_log is None:
            raise PinExpiredError(f"the pin of version {pin.version} is gone ({exc}); read the table again") from exc
        return _repin(io, commit_log, pin.version, ttl_s=ttl_s, owner=owner)


# This process's renewals of pins planned elsewhere: pin id → (when, the pin now holding the
# version). A Spark task renews at most once per half ttl per worker process, not per task.
_RENEWED: dict[str, tuple[float, SnapshotPin]] = {}
_RENEWED_MAX = 1024


def renew_when_due(
    io: FileIO, pin: SnapshotPin, *, renewed_at: float, commit_log: CommitLog, now: float | None = None, owner: str = "reader"
) -> SnapshotPin:
    """The pin to read ``pin``'s version under, renewed (``renew``) once half of ``pinTtl`` has passed.

    Half of ``pinTtl`` counts from the last renewal, at ``renewed_at`` (epoch seconds, by whoever
    planned the read) or by this process. Spark keeps a DataFrame's planned partitions and runs them
    again on every action, without asking the planner, so a read executed an hour after it was
    planned would otherwise run under an expired pin while GC may collect its files; the task that
    reads renews it instead. A pin that expired meanwhile is made again if the version is still
    whole, else the ``renew`` error says so."""
    now = time.time() if now is None else now
    last, current = _RENEWED.get(pin.pin_id, (renewed_at, pin))
    if now - max(last, renewed_at) < pin_ttl_s() / 2:
        return current
    current = renew(io, current, commit_log=commit_log, owner=owner)
    _RENEWED[pin.pin_id] = (now, current)
    while len(_RENEWED) > _RENEWED_MAX:
        _RENEWED.pop(next(iter(_RENEWED)))
    return current


def idle(io: FileIO, pin: SnapshotPin, *, ttl_s: float | None = None) -> None:
    """Let ``pin`` lapse ``ttl_s`` (default ``pinIdleTtl``) from now unless it is renewed first.

    For a reader that is done for now but may read its version again (a Spark DataFrame
    between two queries): GC and vacuum then wait at most ``ttl_s`` for it, and its next
    ``renew`` extends the pin again, or pins the version again if it lapsed and is still
    whole. A pin already gone, or one the store cannot rewrite, is left as it is."""
    if not pin.pinned:
        return
    try:
        pins.shorten(io, pin.pin_id, pin_idle_ttl_s(ttl_s))
    except _CANNOT_PIN as exc:  # it keeps its longer expiry: held back longer, never wrong
        logger.warning("could not shorten the pin of version %s of %s: %s", pin.version, io.uri, exc)


def _repin(io: FileIO, commit_log: CommitLog, version: int, *, ttl_s: float | None, owner: str) -> SnapshotPin:
    """Pin ``version`` again after its pin lapsed, and check it is still whole.

    Its log must replay and its DV and segment files must exist: while it was unpinned a
    vacuum may have removed them, and the reader should hear it here, typed, rather than as
    a missing file halfway through a read."""
    pin_id = try_pin(io, version, ttl_s=pin_ttl_s(ttl_s), owner=f"{owner} (pid {os.getpid()})")
    try:
        snapshot = commit_log.snapshot(version)
        check_files(io, snapshot)
        check_segment_files(io, snapshot)
    except BaseException:
        _release_id(io, pin_id)
        raise
    return SnapshotPin(version, pin_id)


def release(io: FileIO, pin: SnapshotPin | None) -> None:
    """Remove ``pin`` (``None`` or a pin already gone: nothing to do)."""
    if pin is not None:
        _release_id(io, pin.pin_id)


def check_files(io: FileIO, snapshot: Snapshot) -> None:
    """Raise ``DeletionVectorNotFoundError`` if a DV file ``snapshot`` needs is gone.

    Raises:
        DeletionVectorNotFoundError: A DV file of the version was collected before it was pinned."""
    wanted = {ref.path for ref in snapshot.dvs.values() if ref.path}
    if not wanted:
        return
    if len(wanted) <= _EXISTS_CALLS:  # a few lookups cost less than listing every DV file
        missing = sorted(p for p in wanted if not io.exists(p))
    else:
        present = {f"{DV_DIR}/{i.name}" for i in io.list(DV_DIR)}
        missing = sorted(p for p in wanted if p not in present and not io.exists(p))
    if missing:
        raise DeletionVectorNotFoundError(missing[0], f"version {snapshot.version} was garbage-collected before it was pinned")


def check_segment_files(io: FileIO, snapshot: Snapshot) -> None:
    """Raise ``FilesMissingError`` if a segment file ``snapshot`` reads is gone.

    Raises:
        FilesMissingError: Vacuum removed a segment file of the version (or it was deleted by hand)."""
    wanted = sorted({seg.file.path for seg in snapshot.visible_segments()})
    if len(wanted) <= _EXISTS_CALLS:
        missing = [p for p in wanted if not io.exists(p)]
    else:
        present: set[str] = set()
        for folder in sorted({p.rsplit("/", 1)[0] if "/" in p else "" for p in wanted}):
            present.update(f"{folder}/{n}" if folder else n for n in io.list_names(folder))
        missing = [p for p in wanted if p not in present and not io.exists(p)]
    if missing:
        raise FilesMissingError(
            f"segment file {missing[0]} of version {snapshot.version} of {io.uri} is gone"
            + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else "")
            + ": vacuum removed it while the version was not pinned; read the table again"
        )


def pin_scan(io: FileIO, *, now_ms: int | None = None) -> pins.PinScan:
    """GC's and vacuum's view of the pins.

    Live (unreadable pin files count as pins of version 0 for ``pinTtl`` after they were written)
    and expired."""
    return pins.scan_pins(io, now_ms=now_ms, unreadable_ttl_s=pin_ttl_s())
