"""Log retention planning (pure): the safe version and which log files may go."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mvtable.lineage.log import Listing, checkpoint_path, commit_path
from mvtable.lineage.log_retention import plan_log_retention, retention_version, safe_version

HOUR_MS = 3_600_000


def history(n: int, *, step_ms: int = 60_000, t0: int = 1_000_000_000_000) -> dict[int, int]:
    return {v: t0 + v * step_ms for v in range(n)}


def test_retention_version_is_the_version_current_at_the_window_start():
    h = history(10)  # versions one minute apart
    t9 = h[9]
    assert retention_version(h, latest=9, now_ms=t9, retention_s=0) == 9
    # window starts 2.5 minutes before version 9: version 6 was current then
    assert retention_version(h, latest=9, now_ms=t9, retention_s=150) == 6
    # a window start exactly at a commit keeps that commit
    assert retention_version(h, latest=9, now_ms=t9, retention_s=180) == 6
    # every commit inside the window: keep them all
    assert retention_version(h, latest=9, now_ms=t9, retention_s=10 * 86400) == 0
    # long after the last commit: only the latest
    assert retention_version(h, latest=9, now_ms=t9 + 7 * 86400_000, retention_s=3600) == 9


def test_retention_version_with_sparse_history():
    h = {0: 0, 1: 1 * 86400_000, 2: 10 * 86400_000}
    # 7-day window ending at day 10.5 starts at day 3.5: version 1 was current then,
    # and timestampAsOf(day 5) must still resolve to a readable version 1.
    assert retention_version(h, latest=2, now_ms=int(10.5 * 86400_000), retention_s=7 * 86400) == 1
    assert retention_version({}, latest=5, now_ms=0, retention_s=0) == 5


def test_safe_version_is_the_minimum_of_pins_and_retention_but_never_past_latest():
    h = history(10)
    assert safe_version(h, latest=9, now_ms=h[9], retention_s=0) == 9
    assert safe_version(h, latest=9, now_ms=h[9], retention_s=0, pinned_versions=[7, 4]) == 4
    assert safe_version(h, latest=9, now_ms=h[9], retention_s=150, pinned_versions=[8]) == 6
    assert safe_version(h, latest=9, now_ms=h[9], retention_s=0, pinned_versions=[42]) == 9


def test_the_log_is_cut_at_the_newest_checkpoint_at_or_below_safe():
    listing = Listing(commits=list(range(13)), checkpoints=[3, 6, 9, 12])
    h = history(13)
    plan = plan_log_retention(listing, h, now_ms=h[12], retention_s=0, pinned_versions=[10])
    assert plan.safe_version == 10 and plan.pinned_version == 10 and plan.retention_version == 12
    assert plan.checkpoint == 9
    assert plan.delete_commits == tuple(range(10))
    assert plan.delete_checkpoints == (3, 6)
    paths = plan.paths
    assert paths[0] == commit_path(0)
    assert paths.index(commit_path(3)) < paths.index(checkpoint_path(3)) < paths.index(commit_path(4))
    assert checkpoint_path(9) not in paths and commit_path(10) not in paths
    assert len(paths) == 12


def test_the_latest_commit_file_is_never_deleted():
    listing = Listing(commits=list(range(10)), checkpoints=[3, 6, 9])
    h = history(10)
    plan = plan_log_retention(listing, h, now_ms=h[9], retention_s=0)
    assert plan.checkpoint == 9 and plan.safe_version == 9
    assert plan.delete_commits == tuple(range(9))
    assert plan.delete_checkpoints == (3, 6)


def test_nothing_goes_without_a_checkpoint_at_or_below_safe():
    listing = Listing(commits=list(range(10)), checkpoints=[5])
    h = history(10)
    plan = plan_log_retention(listing, h, now_ms=h[9], retention_s=0, pinned_versions=[4])
    assert plan.checkpoint is None and plan.paths == []
    plan = plan_log_retention(Listing(list(range(10)), []), h, now_ms=h[9], retention_s=0)
    assert plan.paths == []
    empty = plan_log_retention(Listing([], []), {}, now_ms=0, retention_s=0)
    assert empty.paths == [] and empty.safe_version == -1


def test_an_already_cut_log_is_cut_again_from_where_it_starts():
    listing = Listing(commits=[10, 11, 12, 13, 14, 15, 16], checkpoints=[9, 12, 15])
    h = history(17)
    plan = plan_log_retention(listing, h, now_ms=h[16], retention_s=0)
    assert plan.checkpoint == 15
    assert plan.delete_commits == (10, 11, 12, 13, 14, 15)
    assert plan.delete_checkpoints == (9, 12)


def readable(commits: set[int], checkpoints: set[int], v: int) -> bool:
    """What CommitLog.snapshot can rebuild: the newest checkpoint <= v (or nothing) plus every
    commit after it up to v."""
    base = max((c for c in checkpoints if c <= v), default=-1)
    return all(x in commits for x in range(base + 1, v + 1))


@given(
    n=st.integers(min_value=1, max_value=40),
    interval=st.integers(min_value=1, max_value=7),
    cut=st.integers(min_value=0, max_value=40),
    pins=st.lists(st.integers(min_value=0, max_value=45), max_size=3),
    retention_steps=st.integers(min_value=0, max_value=45),
    stop_after=st.integers(min_value=0, max_value=80),
)
def test_every_version_from_safe_on_stays_readable_at_every_step(n, interval, cut, pins, retention_steps, stop_after):
    """Whatever prefix of the plan a killed GC managed to delete, every version at or above
    the safe version can still be rebuilt; the latest commit file is always there."""
    latest = n - 1
    checkpoints = {v for v in range(1, n) if v % interval == 0}
    commits = set(range(n))
    # an earlier GC already cut the log at some checkpoint
    earlier = max((c for c in checkpoints if c <= min(cut, latest)), default=None)
    if earlier is not None:
        commits -= {v for v in range(earlier + 1) if v != latest}
        checkpoints -= {c for c in checkpoints if c < earlier}
    h = history(n)
    now = h[latest]
    plan = plan_log_retention(
        Listing(sorted(commits), sorted(checkpoints)), h, now_ms=now, retention_s=retention_steps * 60, pinned_versions=pins
    )
    assert plan.safe_version <= latest
    assert plan.safe_version <= min(pins, default=latest)
    must_read = [v for v in range(plan.safe_version, n) if readable(commits, checkpoints, v)]
    for path in plan.paths[:stop_after]:
        name = path.rsplit("/", 1)[-1]
        v = int(name[:20])
        (checkpoints if name.endswith(".checkpoint.parquet") else commits).discard(v)
        assert latest in commits
        for w in must_read:
            assert readable(commits, checkpoints, w), (w, sorted(commits), sorted(checkpoints))
