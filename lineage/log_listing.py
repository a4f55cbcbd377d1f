"""What a listing of the log says, and what versions missing from it mean: pure functions of names.

A listing of ``_mvtable/log/`` is not a snapshot of it. A local folder read while commits
are linked into it (``os.scandir`` on ext4 returns names in hash order, one buffer at a
time) or a paginated object-store listing can show version N without N-1. Such a gap is
never evidence of garbage collection by itself. GC (``log_retention``) removes commit files
oldest first and only at or below a checkpoint it keeps, so what it leaves is a run of
commits that ends at the newest, preceded by a checkpoint at or after the last version it
removed. Versions missing any other way are *unsettled*: the listing raced a writer (look
again), or files were lost (a real gap, which the log names as an error). The I/O that
looks again lives in ``log.CommitLog``; these rules are kept pure so that tests can feed
them any listing.
"""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Listing", "MissingKind", "explain_missing", "missing_commits", "runs", "unsettled_runs"]


@dataclass(frozen=True)
class Listing:
    """Versions of the log's commit and checkpoint files, each sorted.

    ``gaps``: runs (first, last) of versions that ``unsettled_runs`` found missing and that a
    second listing and a direct read confirmed absent (``CommitLog.listing`` fills it)."""

    commits: list[int]
    checkpoints: list[int]
    gaps: tuple[tuple[int, int], ...] = ()

    @property
    def latest(self) -> int:
        return max(self.commits[-1] if self.commits else -1, self.checkpoints[-1] if self.checkpoints else -1)


class MissingKind(enum.Enum):
    COLLECTED = "collected"  # removed by GC: an oldest-first cut down to a listed checkpoint
    GAP = "gap"  # anything else: a racing listing, or files lost


def runs(versions: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted versions as runs of consecutive ones, (first, last) each."""
    out: list[tuple[int, int]] = []
    for v in versions:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def missing_commits(listing: Listing, start: int, target: int) -> list[int]:
    """Versions ``start..target`` whose commit file the listing does not hold."""
    commits = listing.commits
    i = bisect_left(commits, start)
    j = bisect_left(commits, target + 1)
    if j - i == target - start + 1:  # all there (the common case): no set, no loop
        return []
    present = set(commits[i:j])
    return [v for v in range(start, target + 1) if v not in present]


def unsettled_runs(listing: Listing) -> list[tuple[int, int]]:
    """Runs of versions missing from the listing that GC cannot explain.

    These are holes between listed commits, and the versions before the oldest listed commit
    when no listed checkpoint is at or after the last of them. Empty for every log GC alone
    has cut."""
    commits = listing.commits
    if not commits:
        return []
    out: list[tuple[int, int]] = []
    oldest = commits[0]
    if oldest > 0 and not (listing.checkpoints and listing.checkpoints[-1] >= oldest - 1):
        out.append((0, oldest - 1))
    if commits[-1] - oldest + 1 != len(commits):  # a hole somewhere between (commits are unique)
        previous = oldest
        for v in commits[1:]:
            if v > previous + 1:
                out.append((previous + 1, v - 1))
            previous = v
    return out


def explain_missing(listing: Listing, missing: Sequence[int]) -> MissingKind:
    """Whether GC can have removed ``missing`` (versions absent from ``listing``).

    Only if every one is older than every listed commit and a listed checkpoint is at or
    after the newest of them. A hole with commits on both sides, or versions no checkpoint
    stands in for, is a ``GAP`` however it looks: GC never leaves one."""
    if not missing:
        raise ValueError("nothing is missing")
    last = max(missing)
    below = bool(listing.commits) and listing.commits[0] < last
    covered = bool(listing.checkpoints) and listing.checkpoints[-1] >= last
    return MissingKind.COLLECTED if covered and not below else MissingKind.GAP
