"""Write intents: ``_mvtable/intents/<id>.json`` announces a writer whose files are not committed yet.

It says "a writer is producing files whose names start with ``<id>-`` and will commit them before
its lease ends".

Vacuum removes data and DV files that no commit names once they are older than
``orphanGracePeriod``: an uncommitted file cannot be told from a file a writer is about to
commit. A short grace period therefore took the segments of an append between their write
and its commit, and the commit then named lost bytes. An intent closes that gap the way a
reader pin protects a version and a push lease a consistent push: the writer takes one
before it writes a file, names every file it writes after the intent (``new_id``), renews
it while it works (``IntentKeeper``; a Spark task renews while it runs) and removes it once
its commit landed or it gave up. Vacuum and GC read the intents *after* listing the files
they might delete (a file in their listing was written after its intent was stored, so the
intent is seen) and never take a file a live intent covers.

An intent is live until its lease ends, judged by the earlier of the caller's clock and
the wall clock (a vacuum run with a clock set ahead for a test still honours the writers
of now), unless its owner is provably dead (same machine, the process is gone:
``recovery.owner.probe``, the rule of push leases). A file that cannot be read protects
every orphan until it is older than ``writeIntentTtl``.

A lapsed intent is never renewed: once vacuum may have seen it expired, the files it
covered may be gone, so the writer stops with ``WriteIntentExpiredError`` instead of
committing. A renewal also refuses when less than ``RENEW_MARGIN`` of the lease is left,
so that a renewal racing a vacuum's read of the intent cannot be missed by that vacuum.
What an intent cannot cover (writers of an older mvtable, the temp file of a commit being
written) is why ``orphanGracePeriod`` below ``MIN_ORPHAN_GRACE_S`` needs ``force``.

Who takes one: ``writes.begin_write`` (Python and Spark writes; the Spark planner takes it
for the driver, executors name their files after it and renew it while their task runs),
a streaming batch's tasks (each its own: the batch is planned without side effects; the
commit finds them by the files' names, ``intents_naming``), deletes, upserts and
compaction batches (``IntentScope``) and a restore, whose intent lists the existing files it
brings back (``paths``; vacuum reads the intents again before each delete batch for it).
The commit itself checks that every file it names exists just before its put
(``CommitLog.commit``); the intent is what keeps them there until the put. A writer frozen
between that check and its put for longer than its lease is the one case left open, as
with any lease without fencing.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mvtable.conf import connector_settings
from mvtable.errors import CommitStateUnknownError, OrphanGraceTooShortError, WriteIntentExpiredError
from mvtable.lineage.actions import PushOwner
from mvtable.paths import DATA_DIR
from mvtable.storage import FileIO
from mvtable.visibility.files import DV_DIR

from .recovery.owner import probe, process_owner

logger = logging.getLogger("mvtable.connector")

__all__ = [
    "INTENT_DIR",
    "MIN_ORPHAN_GRACE_S",
    "IntentKeeper",
    "IntentScan",
    "IntentScope",
    "WriteIntent",
    "check_grace",
    "keep",
    "release",
    "renew",
    "scan_intents",
    "take",
]

INTENT_DIR = "_mvtable/intents"
INTENT_FORMAT: Final = 1
# Below this orphanGracePeriod vacuum and GC need ``force``: what no intent covers (a commit
# file's temp file, a writer of an older mvtable) must live at least this long. The shipped
# consistent-push lease (``pushLeasePeriod``), the longest a writer may go unseen elsewhere.
MIN_ORPHAN_GRACE_S = 300.0
RENEW_MARGIN = 0.25  # a renewal needs at least this share of the lease left
_ID_HEX = 12
_INTENT_ID = re.compile(r"[0-9a-f]{12}")
_MAX_INTENT_BYTES = 64 * 1024


class _IntentFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    format: Literal[1]
    id: str = Field(pattern=r"^[0-9a-f]{12}$")
    operation: str = Field(max_length=100)
    created_ms: int = Field(ge=0)
    expires_ms: int = Field(ge=0)
    owner: PushOwner | None = None
    prefixes: tuple[str, ...] = ()  # table-relative: every file whose path starts with one
    paths: tuple[str, ...] = ()  # table-relative: files that exist already (a restore re-adds them)


@dataclass(frozen=True)
class WriteIntent:
    """A write intent as its writer holds it.

    Small and picklable (a Spark plan carries it to executors, which name their files after it and
    renew it)."""

    id: str
    ttl_ms: int

    @property
    def path(self) -> str:
        return intent_path(self.id)

    def new_id(self) -> str:
        """A fresh name for a file of this write (a segment id, a DV file's stem)."""
        return f"{self.id}-{uuid.uuid4().hex[:20]}"


def intents_naming(names: Iterable[str]) -> list[WriteIntent]:
    """The intents files named ``names`` (segment ids, file names) were written under.

    Their writer's driver renews them (``writeIntentTtl``): a streaming batch's tasks each take one,
    and the commit, elsewhere, finds them by the files' names."""
    ids = {n.partition("-")[0] for n in names if "-" in n}
    return [WriteIntent(i, ttl_ms()) for i in sorted(ids) if _INTENT_ID.fullmatch(i)]


def intent_path(intent_id: str) -> str:
    return f"{INTENT_DIR}/{intent_id}.json"


def prefixes_of(intent_id: str) -> tuple[str, ...]:
    """The table-relative path prefixes of the files a write under ``intent_id`` produces.

    Segments and their key indexes in ``data/``, DV files in ``_mvtable/dv/``."""
    return (f"{DATA_DIR}/{intent_id}-", f"{DV_DIR}/{intent_id}-")


def new_id(intent: WriteIntent | None) -> str:
    """A file name stem: the intent's when there is one, else a plain random id."""
    return intent.new_id() if intent is not None else uuid.uuid4().hex


def _wall_ms() -> int:
    return int(time.time() * 1000)


def ttl_ms(ttl_s: float | None = None) -> int:
    """``ttl_s``, or the connector's ``writeIntentTtl``, in milliseconds."""
    seconds = connector_settings().write_intent_ttl_s if ttl_s is None else float(ttl_s)
    return max(1, int(round(seconds * 1000)))


def _encode(doc: _IntentFile) -> bytes:
    return doc.model_dump_json().encode()


def _parse(data: bytes, intent_id: str) -> _IntentFile:
    if len(data) > _MAX_INTENT_BYTES:
        raise ValueError(f"{len(data)} bytes is too large for an intent")
    raw = json.loads(data)
    if not isinstance(raw, dict) or raw.get("format") != INTENT_FORMAT:
        raise ValueError(f"not a write intent of format {INTENT_FORMAT}")
    if isinstance(raw.get("owner"), dict):
        raw["owner"] = PushOwner.model_validate(raw["owner"])
    for name in ("prefixes", "paths"):
        if isinstance(raw.get(name), list):
            raw[name] = tuple(raw[name])
    doc = _IntentFile.model_validate(raw)
    if doc.id != intent_id:
        raise ValueError(f"the file holds intent {doc.id}")
    return doc


# -- the writer's side ------------------------------------------------------------------
# Lease ends this process wrote, by intent id: a renewal less than a third of a lease after
# the last one (a write's commit right after its files) needs no I/O.
_written: dict[str, int] = {}
_WRITTEN_MAX = 4096


def take(
    io: FileIO,
    *,
    operation: str,
    owner: PushOwner | None = None,
    ttl_s: float | None = None,
    paths: Sequence[str] = (),
) -> WriteIntent:
    """Store a new intent before the first file of a write; its files are then named with ``WriteIntent.new_id``.

    ``owner`` is who commits (this process by default; a Spark planner passes the driver JVM).
    ``paths`` are existing files the commit will name again (a restore), protected as long as the
    intent lives."""
    intent = WriteIntent(uuid.uuid4().hex[:_ID_HEX], ttl_ms(ttl_s))
    now = _wall_ms()
    doc = _IntentFile(
        format=INTENT_FORMAT,
        id=intent.id,
        operation=str(operation)[:100],
        created_ms=now,
        expires_ms=now + intent.ttl_ms,
        owner=owner or process_owner(),
        prefixes=prefixes_of(intent.id),
        paths=tuple(paths),
    )
    io.write(intent.path, _encode(doc))
    _written[intent.id] = doc.expires_ms
    return intent


def renew(io: FileIO, intent: WriteIntent) -> int:
    """Extend the intent's lease to ``ttl`` from now; returns its new end.

    Nothing to do when this process renewed it less than a third of a lease ago.

    Raises ``WriteIntentExpiredError`` when the intent is gone, unreadable, expired or
    within ``RENEW_MARGIN`` of its end: vacuum may have taken its files, so the write must
    not commit them."""
    now = _wall_ms()
    known = _written.get(intent.id)
    if known is not None and known - now > intent.ttl_ms * 2 // 3:
        return known
    try:
        doc = _parse(io.read(intent.path), intent.id)
    except FileNotFoundError:
        raise _lapsed(intent, "its intent file is gone (removed by vacuum after it expired, or by hand)") from None
    except (ValueError, ValidationError, UnicodeDecodeError, RecursionError) as exc:
        raise _lapsed(intent, f"its intent file is unreadable ({exc})") from None
    left = doc.expires_ms - now
    if left < RENEW_MARGIN * intent.ttl_ms:
        state = "expired" if left <= 0 else f"was {left} ms from expiring"
        raise _lapsed(intent, f"its lease {state} when it was renewed")
    expires = max(doc.expires_ms, now + intent.ttl_ms)
    io.write(intent.path, _encode(doc.model_copy(update={"expires_ms": expires})))
    _written[intent.id] = expires
    while len(_written) > _WRITTEN_MAX:
        _written.pop(next(iter(_written)))
    return expires


def _lapsed(intent: WriteIntent, why: str) -> WriteIntentExpiredError:
    return WriteIntentExpiredError(
        f"write intent {intent.id} no longer protects this write's files: {why}. Vacuum may have removed "
        "files of this write, so it was not committed; nothing was written to the table. Run the write again "
        "(a write that pauses longer than writeIntentTtl between renewals loses its intent)"
    )


def release(io: FileIO, intent: WriteIntent | None) -> None:
    """Remove the intent of a write that committed or gave up.

    Best effort: vacuum removes an intent file that outlived its lease."""
    if intent is None:
        return
    _written.pop(intent.id, None)
    try:
        io.delete([intent.path])
    except Exception as exc:  # the write itself is done; a leftover intent only delays orphan removal
        logger.warning("could not remove write intent %s: %s", intent.path, exc)


class IntentKeeper:
    """``with IntentKeeper(io, intent):`` renews the intent now, then every third of the lease until the block ends.

    Several intents work too (a streaming batch's task intents). It raises if one lapsed;
    ``renew_first=False`` skips the first renewal for an intent just taken. ``check()`` raises if a
    renewal found one lapsed meanwhile (a process paused longer than the lease)."""

    def __init__(self, io: FileIO, intent: WriteIntent | Sequence[WriteIntent], *, renew_first: bool = True) -> None:
        self.io = io
        self.intents = (intent,) if isinstance(intent, WriteIntent) else tuple(intent)
        self.renew_first = renew_first
        self.lapsed: WriteIntentExpiredError | None = None
        self._stop = threading.Event()
        name = self.intents[0].id if self.intents else "none"
        self._thread = threading.Thread(target=self._run, name=f"mvtable-intent-{name}", daemon=True)

    def _renew_all(self) -> None:
        for intent in self.intents:
            renew(self.io, intent)

    def _run(self) -> None:
        interval = max(0.01, min((i.ttl_ms for i in self.intents), default=3000) / 3000)
        while not self._stop.wait(interval):
            try:
                self._renew_all()
            except WriteIntentExpiredError as exc:
                self.lapsed = exc
                return
            except Exception as exc:  # keep trying: a failed renewal only brings the end closer
                logger.warning("could not renew write intent(s) %s: %s", [i.id for i in self.intents], exc)

    def check(self) -> None:
        if self.lapsed is not None:
            raise self.lapsed

    def __enter__(self) -> IntentKeeper:
        if self.renew_first:
            self._renew_all()
        if self.intents:
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def keep(io: FileIO, intent: WriteIntent | None) -> AbstractContextManager[object]:
    """Renew ``intent`` while the block runs (nothing for a write without one)."""
    return nullcontext() if intent is None else IntentKeeper(io, intent)


class IntentScope:
    """The intent of one step that writes files on this machine and commits them.

    A delete (its DV files), a compaction batch, an upsert's DVs. ``with IntentScope(io,
    operation=…) as scope:`` takes an intent the first time ``get``/``new_id`` is called (a delete
    whose DVs all fit in the log writes no file and takes none), renews it while the block runs and
    removes it at the end. Given an ``intent`` (a write's plan holds one), it renews that one and
    leaves its removal to the write."""

    def __init__(self, io: FileIO, *, operation: str, intent: WriteIntent | None = None) -> None:
        self.io = io
        self.operation = operation
        self.intent = intent
        self.owned = intent is None
        self._keeper: IntentKeeper | None = None
        self._lock = threading.Lock()

    def get(self) -> WriteIntent:
        with self._lock:
            if self.intent is None:
                self.intent = take(self.io, operation=self.operation)
                self._keeper = IntentKeeper(self.io, self.intent, renew_first=False).__enter__()
            return self.intent

    def new_id(self) -> str:
        """A fresh file name under this scope's intent."""
        return self.get().new_id()

    def __enter__(self) -> IntentScope:
        if self.intent is not None:
            self._keeper = IntentKeeper(self.io, self.intent).__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._keeper is not None:
            self._keeper.__exit__(None, None, None)
        # a commit whose outcome is unknown may still land naming this scope's files: the
        # intent then stays until its lease lapses, so vacuum leaves them alone meanwhile
        if self.owned and not isinstance(exc, CommitStateUnknownError):
            release(self.io, self.intent)


# -- vacuum's and GC's side -------------------------------------------------------------
@dataclass
class IntentScan:
    """The intents at one moment: what live ones protect, and the intent files vacuum may remove (lapsed, or of a dead owner).

    ``everything``: an unreadable young intent file protects every orphan."""

    live: list[str] = field(default_factory=list)  # intent ids
    prefixes: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)
    stale: list[str] = field(default_factory=list)  # intent files to remove
    everything: bool = False

    def protects(self, path: str) -> bool:
        """Whether ``path`` (table-relative) is a file of a write in flight."""
        if self.everything or path in self.paths:
            return True
        cut = path.find("-", path.rfind("/") + 1)
        return cut >= 0 and path[: cut + 1] in self.prefixes


def scan_intents(io: FileIO, *, now_ms: int | None = None) -> IntentScan:
    """Read every intent once. Call it after listing the files to be deleted."""
    wall = _wall_ms()
    now = wall if now_ms is None else min(int(now_ms), wall)
    unreadable_ms = ttl_ms()
    out = IntentScan()
    for info in io.list(INTENT_DIR):
        path = f"{INTENT_DIR}/{info.name}"
        mtime_ms = None if info.mtime is None else int(info.mtime * 1000)
        old = mtime_ms is not None and mtime_ms + unreadable_ms <= now
        if not info.name.endswith(".json") or info.name.startswith("."):
            if old:  # e.g. the temp file of an intent write that died before its rename
                out.stale.append(path)
            continue
        intent_id = info.name[: -len(".json")]
        try:
            doc = _parse(io.read(path), intent_id)
        except FileNotFoundError:
            continue  # released while we looked
        except Exception as exc:
            if old:
                logger.warning("write intent %s is unreadable (%s) and old: removing it", path, exc)
                out.stale.append(path)
            else:
                logger.warning("write intent %s is unreadable (%s): keeping every unreferenced file for now", path, exc)
                out.everything = True
            continue
        if doc.expires_ms <= now:
            out.stale.append(path)
            continue
        gone, detail = probe(doc.owner)
        if gone:
            logger.info("write intent %s of %s: %s; its files are orphans", doc.id, doc.operation, detail)
            out.stale.append(path)
            continue
        out.live.append(doc.id)
        out.prefixes.update(doc.prefixes)
        out.paths.update(doc.paths)
    return out


def unprotected(paths: Iterable[str], scan: IntentScan) -> list[str]:
    """``paths`` without those a live intent covers."""
    return [p for p in paths if not scan.protects(p)]


def check_grace(grace_s: float, *, period: str, force: bool) -> None:
    """Raise ``OrphanGraceTooShortError`` for an ``orphanGracePeriod`` below ``MIN_ORPHAN_GRACE_S`` unless ``force``.

    Raises:
        OrphanGraceTooShortError: ``orphanGracePeriod`` is below ``MIN_ORPHAN_GRACE_S`` and ``force`` is off."""
    if grace_s < MIN_ORPHAN_GRACE_S and not force:
        raise OrphanGraceTooShortError(
            f"the table's orphanGracePeriod ({period}) is shorter than {MIN_ORPHAN_GRACE_S:.0f}s: files of a writer "
            "that takes no write intent (an older mvtable) and temp files of commits in flight could be removed "
            "while they are written. Pass force=True (--force) if no such writer uses the table."
        )
