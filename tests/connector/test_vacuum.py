"""Vacuum: retention by commit time, orphan removal, retention checks, dry runs."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

from mvtable.connector import Table, writes
from mvtable.errors import FilesMissingError, RetentionTooShortError

DAY_MS = 86_400_000


def ids_of(n0: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n0, n0 + n), pa.int64())})


def files(t: Table, folder: str = "data") -> set[str]:
    return set(os.listdir(os.path.join(t.uri, folder)))


@pytest.fixture
def t(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), schema=ids_of(0, 1).schema)
    table.append(ids_of(0, 10))
    return table


def test_retention_uses_commit_times_not_file_times(t):
    t.overwrite(ids_of(100, 5), consistent_push=True)
    entry = t.lineage()[-1]
    replaced_file = t.snapshot().segments[entry.segments_from[0]].file.path
    # file mtimes say "ancient": retention must not care
    for name in files(t):
        os.utime(os.path.join(t.uri, "data", name), (0, 0))
    report = t.vacuum(dry_run=True)
    assert report.entries_purged == 0 and replaced_file not in report.files
    # the clock says two days later (replacedSegmentsRetentionPeriod is 1d): the entry expires
    later = entry.timestamp.timestamp() * 1000 + 2 * DAY_MS
    report = t.vacuum(now_ms=int(later))
    assert report.entries_purged == 1 and report.segments_expired == 1
    assert t.lineage() == []
    assert [h.operation for h in t.history()][-1] == "RETENTION"
    # the file itself stays while versions inside the 7d time-travel window show it
    assert os.path.basename(replaced_file) in files(t)
    report = t.vacuum(now_ms=int(later + 8 * DAY_MS))
    assert replaced_file in report.files and os.path.basename(replaced_file) not in files(t)
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(100, 105))


def test_stale_in_progress_push_is_cleaned_up(t):
    # a push that started and was never finished nor renewed (its lease ran out long ago)
    writes.begin_write(t.uri, storage_options=None, incoming=t.schema, mode="overwrite", consistent_push=True)
    (stale,) = t.lineage()
    report = t.vacuum(now_ms=int(stale.timestamp.timestamp() * 1000 + 2 * DAY_MS))
    assert report.entries_purged == 1 and t.lineage() == []
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(10))


def test_orphans_go_after_the_grace_period_only(t):
    orphan = os.path.join(t.uri, "data", "failed-attempt.parquet")
    open(orphan, "wb").write(b"junk")
    report = t.vacuum()
    assert "data/failed-attempt.parquet" not in report.files  # younger than orphanGracePeriod (1h)
    old = time.time() - 2 * 3600
    os.utime(orphan, (old, old))
    report = t.vacuum()
    assert report.orphans == 1 and not os.path.exists(orphan)
    assert t.scan().count() == 10


def test_short_retention_needs_force_and_breaks_time_travel_only_when_forced(t):
    v = t.version
    t.overwrite(ids_of(100, 5))
    with pytest.raises(RetentionTooShortError, match="force"):
        t.vacuum(retention="1h")
    assert t.scan(version=v).count() == 10
    t.vacuum(retention="0s", force=True)
    with pytest.raises(FilesMissingError, match="vacuum removed it"):
        t.scan(version=v).count()
    assert t.scan().count() == 5


def test_dry_run_lists_and_deletes_nothing(t):
    t.overwrite(ids_of(100, 5))
    before = files(t) | files(t, "_mvtable/log")
    report = t.vacuum(retention="0s", force=True, dry_run=True)
    assert report.dry_run and report.files
    assert files(t) | files(t, "_mvtable/log") == before


def test_pinned_reader_survives_forced_vacuum(t):
    v = t.version
    with t.pin(v):
        t.overwrite(ids_of(100, 5))
        t.vacuum(retention="0s", force=True)
        assert sorted(t.scan(version=v).to_arrow().column("id").to_pylist()) == list(range(10))


def test_bad_retention_is_typed(t):
    from mvtable.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="not a period"):
        t.vacuum(retention="a week")


@pytest.mark.parametrize("retention", [float("nan"), float("inf"), "9" * 400 + "d"])
def test_a_retention_that_is_not_finite_is_refused_before_the_retention_check(t, retention):
    from mvtable.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="retention.* finite") as caught:  # NaN passed the too-short check
        t.vacuum(retention=retention)
    assert not isinstance(caught.value, RetentionTooShortError)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dry_run": "yes"}, "dry_run must be True or False"),
        ({"force": 1}, "force must be True or False"),
        ({"time_budget_s": "5"}, "time_budget_s must be a number of seconds"),
        ({"time_budget_s": float("nan")}, "time_budget_s must be a finite"),
        ({"batch_bytes": 0}, "batch_bytes must be an integer >= 1"),
    ],
)
def test_vacuum_options_of_the_wrong_type_are_refused(t, options, message):
    from mvtable.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match=message):
        t.vacuum(retention="0s", **{"force": True, **options})
