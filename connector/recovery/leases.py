"""Push leases: ``_mvtable/leases/<entry>.json``, renewed while a consistent push runs.

The start of a push records its first lease in the log; renewals go to this small file
instead, so a push that runs for hours adds no commits (the log does not grow with time).
A lease's end is the later of the two. The file is overwritten in place with ``FileIO``;
a torn or foreign file is ignored (with a warning): it can only fail to *extend* a lease,
never shorten one, because the log's lease stays the floor.

``LeaseKeeper`` renews from a daemon thread every third of the lease; the Spark writer
renews at the start and end of each write task instead (executors come and go).

A writer that could not write the abort of its push (a full disk) leaves
``<entry>.gave-up`` beside the lease (``give_up``): an empty file, which a full disk still
takes. It is the writer's own word that it stopped for good, so the next push reverts the
entry at once, from any process, although the writer's process lives and its lease holds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from types import TracebackType

from mvtable.storage import FileIO

logger = logging.getLogger("mvtable.connector")

LEASE_DIR = "_mvtable/leases"
LEASE_FORMAT = 1


GAVE_UP_SUFFIX = ".gave-up"


def lease_path(entry_id: str) -> str:
    return f"{LEASE_DIR}/{entry_id}.json"


def gave_up_path(entry_id: str) -> str:
    return f"{LEASE_DIR}/{entry_id}{GAVE_UP_SUFFIX}"


def entry_of(name: str) -> str | None:
    """The entry id a file of the lease folder belongs to (lease or gave-up marker)."""
    for suffix in (".json", GAVE_UP_SUFFIX):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def give_up(io: FileIO, entry_id: str) -> bool:
    """Record that this push's writer stopped for good without reverting it.

    ``False`` (and a warning) when even that cannot be written: then its lease must run out."""
    try:
        io.write(gave_up_path(entry_id), b"")
        return True
    except Exception as exc:
        logger.warning("could not mark push %s as given up (%s): it blocks other pushes until its lease ends", entry_id, exc)
        return False


def gave_up(io: FileIO, entry_id: str) -> bool:
    """Whether the writer of ``entry_id`` gave up on it (``give_up``)."""
    return io.exists(gave_up_path(entry_id))


def now_ms() -> int:
    return int(time.time() * 1000)


def renew(io: FileIO, entry_id: str, *, lease_ms: int, owner: str = "") -> int:
    """Extend the lease of ``entry_id`` to ``lease_ms`` from now; returns its new end."""
    expires = now_ms() + lease_ms
    doc = {"format": LEASE_FORMAT, "entry_id": entry_id, "expires_ms": expires, "owner": owner}
    io.write(lease_path(entry_id), json.dumps(doc).encode())
    return expires


def read_lease(io: FileIO, entry_id: str) -> int | None:
    """The lease end the file records, or ``None`` (no file, or one that is not ours)."""
    path = lease_path(entry_id)
    try:
        raw = io.read(path)
    except FileNotFoundError:
        return None
    try:
        doc = json.loads(raw)
        ok = (
            isinstance(doc, dict)
            and doc.get("format") == LEASE_FORMAT
            and doc.get("entry_id") == entry_id
            and type(doc.get("expires_ms")) is int
            and doc["expires_ms"] >= 0
        )
    except (ValueError, UnicodeDecodeError, RecursionError):
        ok = False
    if not ok:
        logger.warning("ignoring lease file %s/%s: not a lease of entry %s", io.uri, path, entry_id)
        return None
    return int(doc["expires_ms"])


def drop(io: FileIO, entry_id: str) -> None:
    """Remove the lease file (and gave-up marker) of a push that ended.

    Best effort: vacuum removes leftovers."""
    try:
        io.delete([lease_path(entry_id), gave_up_path(entry_id)])
    except Exception as exc:  # the push itself is done; a leftover file is harmless
        logger.warning("could not remove lease file of %s: %s", entry_id, exc)


class LeaseKeeper:
    """``with LeaseKeeper(io, entry_id, lease_ms=…):`` renews the lease until the block ends."""

    def __init__(self, io: FileIO, entry_id: str, *, lease_ms: int, owner: str = "") -> None:
        self.io = io
        self.entry_id = entry_id
        self.lease_ms = lease_ms
        self.owner = owner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mvtable-lease-{entry_id}", daemon=True)

    def _renew(self) -> None:
        try:
            renew(self.io, self.entry_id, lease_ms=self.lease_ms, owner=self.owner)
        except Exception as exc:  # keep trying: a failed renewal only lets the lease run out
            logger.warning("could not renew the lease of push %s: %s", self.entry_id, exc)

    def _run(self) -> None:
        interval = max(0.05, self.lease_ms / 3000)
        while not self._stop.wait(interval):
            self._renew()

    def __enter__(self) -> LeaseKeeper:
        self._renew()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
