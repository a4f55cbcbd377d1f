"""Retention planning for the commit log: the safe version and the log files that may go.

Pure: a ``Listing``, the history and the pins in; a ``LogRetentionPlan`` out. The connector
does the I/O (``mvtable.connector.gc``).

**Safe version** = min(oldest pinned version, retention version), never above the latest.
The retention version is the version that was current at ``now - retention``: the newest
version committed at or before that instant (``timestampAsOf`` anywhere in the window
resolves to it or to something newer), or the oldest version when every commit is inside
the window. With a retention of ``0s`` it is the latest version.

**Log files that may go**: let ``K`` be the newest checkpoint at or below the safe version.
Every version ``>= K`` is rebuilt from checkpoint ``K`` plus the commits after it, so
checkpoints older than ``K`` and commit files up to and including ``K`` may go, except the
latest commit file (it keeps a slow writer's put-if-absent of that version failing).
Without a checkpoint at or below the safe version nothing may go. The files are returned
oldest version first, so a pass cut short leaves a log whose readable part still starts at
a checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .log import Listing, checkpoint_path, commit_path

__all__ = ["LogRetentionPlan", "retention_version", "safe_version", "plan_log_retention"]


@dataclass(frozen=True)
class LogRetentionPlan:
    latest: int
    retention_version: int
    pinned_version: int | None  # oldest live pin, if any
    safe_version: int
    checkpoint: int | None  # newest checkpoint <= safe_version: the log's new start
    delete_commits: tuple[int, ...]
    delete_checkpoints: tuple[int, ...]

    @property
    def paths(self) -> list[str]:
        """Table-relative paths to delete, oldest version first.

        A commit comes before the checkpoint of the same version."""
        items = [(v, 0, commit_path(v)) for v in self.delete_commits]
        items += [(v, 1, checkpoint_path(v)) for v in self.delete_checkpoints]
        return [p for _, _, p in sorted(items)]


def retention_version(history: Mapping[int, int], *, latest: int, now_ms: int, retention_s: float) -> int:
    """The oldest version the retention window keeps readable (see the module doc)."""
    if retention_s < 0:
        raise ValueError(f"a retention period cannot be negative ({retention_s})")
    known = sorted((v, ts) for v, ts in history.items() if 0 <= v <= latest)
    if not known:
        return latest
    cutoff = now_ms - int(round(retention_s * 1000))
    before = [v for v, ts in known if ts <= cutoff]
    return min(max(before) if before else known[0][0], latest)


def safe_version(
    history: Mapping[int, int],
    *,
    latest: int,
    now_ms: int,
    retention_s: float,
    pinned_versions: Iterable[int] = (),
) -> int:
    keep = retention_version(history, latest=latest, now_ms=now_ms, retention_s=retention_s)
    pins = [int(v) for v in pinned_versions]
    return min([keep, *pins, latest]) if latest >= 0 else latest


def plan_log_retention(
    listing: Listing,
    history: Mapping[int, int],
    *,
    now_ms: int,
    retention_s: float,
    pinned_versions: Iterable[int] = (),
) -> LogRetentionPlan:
    latest = listing.latest
    pins = [int(v) for v in pinned_versions]
    keep = retention_version(history, latest=latest, now_ms=now_ms, retention_s=retention_s) if latest >= 0 else latest
    safe = min([keep, *pins, latest]) if latest >= 0 else latest
    pinned = min(pins) if pins else None
    checkpoint = max((c for c in listing.checkpoints if c <= safe), default=None)
    if checkpoint is None or latest < 0:
        return LogRetentionPlan(latest, keep, pinned, safe, checkpoint, (), ())
    newest_commit = max(listing.commits, default=None)
    commits = tuple(v for v in sorted(listing.commits) if v <= checkpoint and v != newest_commit)
    checkpoints = tuple(c for c in sorted(listing.checkpoints) if c < checkpoint)
    return LogRetentionPlan(latest, keep, pinned, safe, checkpoint, commits, checkpoints)
