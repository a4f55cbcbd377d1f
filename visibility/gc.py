"""Visibility GC planning: which DV files may go, and how to cut deletions into batches.

Pure: no I/O. The connector gathers the inputs (``mvtable.connector.gc``):

* ``needed`` — the DV paths referenced by every version that must stay readable (the safe
  version up to the newest one the caller has seen). Never deleted.
* ``superseded`` — DV paths that a *committed* version references but that no needed version
  does (e.g. the cumulative DV a later delete replaced, before the safe version). Their
  writer finished long ago, nobody can commit a reference to them again, so they may go at
  once whatever their age.
* every other file in ``_mvtable/dv/`` is one the log never named as far as the caller
  knows: either an orphan of a failed delete, or the DV of a delete **still in flight** that
  will commit after the caller read the log. The two cannot be told apart from the listing,
  so such a file is only deleted once its modification time is older than the orphan grace
  period (and never when the store gives no modification time). A delete that takes longer
  than the grace period between writing its DV file and committing loses its DV — the
  grace period must be longer than any delete (default 1h).

``batches`` splits paths into delete batches whose summed path length (UTF-8 bytes) stays
within a bound, as CockroachDB's GC queue bounds its batches by key bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mvtable.storage import FileInfo

from .files import DV_DIR

__all__ = ["DVGCPlan", "plan_dv_gc", "batches", "path_bytes"]


@dataclass(frozen=True)
class DVGCPlan:
    delete: tuple[str, ...]  # table-relative paths, in listing-name order
    delete_bytes: int  # summed file sizes of ``delete``
    superseded: int  # how many of ``delete`` were committed and superseded
    orphans: int  # how many were never committed and are past the grace period
    kept_needed: int  # files a needed version references
    kept_in_grace: int  # unreferenced files younger than the grace period (maybe in flight)


def plan_dv_gc(
    listing: Iterable[FileInfo],
    *,
    needed: Iterable[str],
    superseded: Iterable[str] = (),
    now_ms: int,
    grace_s: float,
    folder: str = DV_DIR,
) -> DVGCPlan:
    """The DV files to delete.

    ``listing`` is the listing of ``folder`` (base names, sizes, modification times in epoch
    seconds); ``needed`` and ``superseded`` are table-relative paths as the log stores them."""
    if grace_s < 0:
        raise ValueError(f"the orphan grace period cannot be negative ({grace_s})")
    keep = set(needed)
    old = set(superseded) - keep
    cutoff_ms = now_ms - int(round(grace_s * 1000))
    delete: list[str] = []
    size = n_superseded = n_orphans = kept_needed = kept_grace = 0
    for info in sorted(listing, key=lambda i: i.name):
        path = f"{folder}/{info.name}"
        if path in keep:
            kept_needed += 1
            continue
        if path in old:
            n_superseded += 1
        elif info.mtime is not None and info.mtime * 1000 <= cutoff_ms:
            n_orphans += 1
        else:
            kept_grace += 1
            continue
        delete.append(path)
        size += int(info.size or 0)
    return DVGCPlan(tuple(delete), size, n_superseded, n_orphans, kept_needed, kept_grace)


def path_bytes(path: str) -> int:
    return len(path.encode("utf-8"))


def batches(paths: Sequence[str], *, max_bytes: int) -> list[list[str]]:
    """``paths`` in order, cut into batches whose summed path length is at most ``max_bytes``.

    A path longer than ``max_bytes`` on its own forms a batch of one (it cannot be split);
    no batch is empty."""
    if max_bytes < 1:
        raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
    out: list[list[str]] = []
    current: list[str] = []
    used = 0
    for p in paths:
        n = path_bytes(p)
        if current and used + n > max_bytes:
            out.append(current)
            current, used = [], 0
        current.append(p)
        used += n
    if current:
        out.append(current)
    return out
