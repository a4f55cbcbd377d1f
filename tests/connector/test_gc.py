"""Visibility GC and reader pins on real tables (no JVM).

Tables here write every DV to a file (``dvInlineMaxBytes=0``), checkpoint every 3 commits
and keep no time-travel window (``versionRetentionPeriod=0s``), so that a few deletes make
superseded DV files and old log files for GC to find.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable import faults
from mvtable.connector import Table
from mvtable.connector import gc as table_gc
from mvtable.connector.pinning import PinnedSnapshot
from mvtable.errors import InvalidOptionError, VersionNotFoundError
from mvtable.lineage.log import LOG_DIR, checkpoint_path, commit_path
from mvtable.visibility import process_cache, write_dvs
from mvtable.visibility.files import DV_DIR
from mvtable.visibility.pins import PIN_DIR

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
PROPS = {"checkpointInterval": "3", "versionRetentionPeriod": "0s", "dvInlineMaxBytes": "0", "rowGroupRows": "10"}
HALF = 30  # rows per appended segment


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"row {i}" for i in ids]})


def make_table(tmp_path, **overrides: str) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, properties={**PROPS, **overrides})
    t.append(rows(0, HALF))  # two segments, so deletes supersede DVs of both
    t.append(rows(HALF, HALF))
    return t


def delete_ids(t: Table, ids) -> None:
    for k in ids:
        assert t.delete(pc.field("id") == k).deleted_rows == 1


def spread(start: int, n: int) -> list[int]:
    """n ids alternating between the two segments."""
    return [start // 2 + i // 2 if i % 2 == 0 else HALF + start // 2 + i // 2 for i in range(n)]


def read(t: Table, version: int | None = None) -> list[tuple[int, str]]:
    process_cache().clear()  # read DVs from storage, not from this process's cache
    table = t.to_arrow(version=version)
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))


def record(t: Table) -> dict[int, list[tuple[int, str]]]:
    return {v: read(t, v) for v in range(t.version + 1)}


def files(t: Table, folder: str) -> set[str]:
    return {f"{folder}/{i.name}" for i in t.io.list(folder)}


def needed_dvs(t: Table, versions) -> set[str]:
    return {ref.path for v in versions for ref in t.snapshot(v).dvs.values() if ref.path}


def test_gc_removes_superseded_dvs_and_old_log_files(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 10))
    expected = record(t)
    latest = t.version
    assert latest == 12
    assert len(files(t, DV_DIR)) == 10  # one DV file per delete

    report = table_gc.collect_garbage(t.commit_log)

    assert report.complete and not report.dry_run
    assert report.safe_version == latest and report.pinned_version is None
    # only the newest DV of each of the two segments is still needed
    keep = needed_dvs(t, [latest])
    assert len(keep) == 2
    assert files(t, DV_DIR) == keep
    assert report.dv_files_deleted == 8
    assert report.log_checkpoint == 12
    assert files(t, LOG_DIR) == {checkpoint_path(12), commit_path(12)}
    assert report.log_files_deleted == 12 + 3  # commits 0..11, checkpoints 3, 6, 9
    assert report.bytes_freed > 0 and report.batches >= 2
    assert set(report.deleted) >= {commit_path(0), checkpoint_path(9)}

    assert read(t) == expected[latest]
    for old in (0, 1, 5, 11):
        with pytest.raises(VersionNotFoundError):
            t.to_arrow(version=old)
    assert [h.version for h in t.history()] == list(range(latest + 1))  # the checkpoint remembers

    # the table carries on, and GC again finds nothing new to do
    again = table_gc.collect_garbage(t.commit_log)
    assert (again.dv_files_deleted, again.log_files_deleted, again.complete) == (0, 0, True)
    delete_ids(t, [7, 40])
    expected_after = read(t)
    assert len(expected_after) == 2 * HALF - 12
    report = table_gc.collect_garbage(t.commit_log)
    assert report.complete and report.dv_files_deleted == 2
    assert files(t, DV_DIR) == needed_dvs(t, [t.version])
    assert read(t) == expected_after


def test_every_version_in_the_retention_window_reads_exactly(tmp_path):
    t = make_table(tmp_path, versionRetentionPeriod="1h")
    delete_ids(t, spread(0, 12))
    expected = record(t)
    latest = t.version
    history = {h.version: h.timestamp_ms for h in t.snapshot().history}

    # right now every commit is inside the 1h window: nothing may go
    report = table_gc.collect_garbage(t.commit_log)
    assert report.safe_version == 0
    assert (report.dv_files_deleted, report.log_files_deleted) == (0, 0)

    # an hour after version 8 was committed, the window starts at version 8
    report = table_gc.collect_garbage(t.commit_log, now_ms=history[8] + 3_600_000)
    assert report.complete and report.safe_version == report.retention_version == 8
    assert report.log_checkpoint == 6
    assert files(t, DV_DIR) == needed_dvs(t, range(8, latest + 1))
    for v in range(8, latest + 1):
        assert read(t, v) == expected[v], v
    for v in range(0, 6):
        with pytest.raises(VersionNotFoundError):
            t.to_arrow(version=v)


def test_a_pinned_long_reader_is_never_broken_by_gc(tmp_path):
    """Requirement 7: a read of an old version, planned and pinned, outlives many rounds of
    deletes and GC and still returns exactly that version's rows."""
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 4))
    pinned_version = t.version  # 6
    expected = read(t, pinned_version)
    pinned = t.pin(pinned_version, owner="long reader")
    scan = t.scan(version=pinned_version)  # the read is planned; its DV refs are fixed now

    deleted_total = 0
    for round_ in range(4):
        delete_ids(t, spread(4 + 3 * round_ * 2, 6))
        latest_rows = read(t)
        report = table_gc.collect_garbage(t.commit_log)
        assert report.complete
        assert report.safe_version == report.pinned_version == pinned_version
        deleted_total += report.dv_files_deleted + report.log_files_deleted
        # the planned read and a fresh read of the pinned version are both exact
        ids = scan.to_arrow()
        assert sorted(zip(ids.column("id").to_pylist(), ids.column("v").to_pylist())) == expected
        assert read(t, pinned_version) == expected
        assert read(t) == latest_rows
    assert deleted_total > 0  # GC did work before the pinned version: log up to checkpoint 6, old DVs
    assert files(t, DV_DIR) == needed_dvs(t, range(pinned_version, t.version + 1))
    with pytest.raises(VersionNotFoundError):  # an older, unpinned version is gone
        t.to_arrow(version=pinned_version - 2)

    # once released, the pinned version is collected like any other
    pinned.release()
    assert not files(t, PIN_DIR)
    report = table_gc.collect_garbage(t.commit_log)
    assert report.safe_version == t.version
    with pytest.raises(VersionNotFoundError):
        t.to_arrow(version=pinned_version)
    process_cache().clear()
    with pytest.raises(VersionNotFoundError):  # reading the scan again must pin again: refused
        scan.to_arrow()
    assert not files(t, PIN_DIR)


def test_pinning_refuses_a_collected_version_and_leaves_no_pin(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 6))
    table_gc.collect_garbage(t.commit_log)
    with pytest.raises(VersionNotFoundError):
        t.pin(2)
    assert not files(t, PIN_DIR)
    with t.pin() as pinned:
        assert files(t, PIN_DIR) == {f"{PIN_DIR}/{pinned.pin.pin_id}.json"}
    assert not files(t, PIN_DIR)


def test_expired_and_unreadable_pins(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 6))
    expected = record(t)
    now = int(time.time() * 1000)
    t.pin(3, ttl_s=60)
    # an unreadable pin file pins version 0 while it is young: GC deletes nothing
    (tmp_path / "t" / "_mvtable" / "pins" / "garbage.json").write_bytes(b"\x00not a pin")
    report = table_gc.collect_garbage(t.commit_log, now_ms=now)
    assert report.safe_version == 0
    assert (report.dv_files_deleted, report.log_files_deleted, report.pins_expired) == (0, 0, 0)
    assert all(read(t, v) == rows_ for v, rows_ in expected.items())
    # two hours later (pinTtl is 1h) both pins are expired and go; GC proceeds
    report = table_gc.collect_garbage(t.commit_log, now_ms=now + 2 * 3_600_000)
    assert report.pins_expired == 2 and not files(t, PIN_DIR)
    assert report.safe_version == t.version
    assert report.dv_files_deleted > 0 and report.log_files_deleted > 0
    assert read(t) == expected[t.version]


def test_the_dv_of_a_delete_in_flight_survives_gc(tmp_path, monkeypatch):
    """GC runs after a delete wrote its DV file but before it committed: the file is not in
    the log yet and only the orphan grace period protects it."""
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 4))
    real_put = t.commit_log._put
    reports = []

    def put_after_gc(commit, txn, **kwargs):
        reports.append(table_gc.collect_garbage(t.commit_log))
        return real_put(commit, txn, **kwargs)

    monkeypatch.setattr(t.commit_log, "_put", put_after_gc)
    delete_ids(t, [20])
    monkeypatch.undo()
    assert reports and reports[0].dv_files_in_grace == 1
    assert 20 not in [i for i, _ in read(t)]
    assert files(t, DV_DIR) >= needed_dvs(t, [t.version])

    table_gc.collect_garbage(t.commit_log)  # the in-flight delete superseded a DV: collect it first
    assert files(t, DV_DIR) == needed_dvs(t, [t.version])

    # a true orphan (a delete that never committed) goes once it is older than the grace period
    orphan = write_dvs(t.io, {t.snapshot().visible_segment_ids()[0]: [1, 2, 3]}, inline_max_bytes=0)
    orphan_path = next(iter(orphan.values())).path
    assert table_gc.collect_garbage(t.commit_log).dv_files_deleted == 0
    assert orphan_path in files(t, DV_DIR)
    report = table_gc.collect_garbage(t.commit_log, now_ms=int(time.time() * 1000) + 2 * 3_600_000)
    assert orphan_path in report.deleted and orphan_path not in files(t, DV_DIR)
    assert files(t, DV_DIR) == needed_dvs(t, [t.version])


def test_dry_run_deletes_nothing_and_reports_what_a_run_would_delete(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 8))
    before = files(t, DV_DIR) | files(t, LOG_DIR)
    seen = []
    dry = table_gc.collect_garbage(t.commit_log, dry_run=True, progress=lambda d, n, w: seen.append((d, n, w)))
    assert dry.dry_run and dry.complete
    assert files(t, DV_DIR) | files(t, LOG_DIR) == before
    assert dry.dv_files_deleted == 6 and dry.log_files_deleted > 0 and dry.bytes_freed > 0
    assert {w for _, _, w in seen} == {"dv", "log", "pins"}
    real = table_gc.collect_garbage(t.commit_log)
    assert sorted(real.deleted) == sorted(dry.deleted)
    assert (real.dv_files_deleted, real.log_files_deleted, real.bytes_freed) == (
        dry.dv_files_deleted,
        dry.log_files_deleted,
        dry.bytes_freed,
    )


def test_time_budget_stops_after_partial_progress_and_the_next_run_finishes(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 10))
    expected = read(t)
    plan = table_gc.collect_garbage(t.commit_log, dry_run=True)
    seen = []
    first = table_gc.collect_garbage(
        t.commit_log, time_budget_s=0, batch_bytes=1, progress=lambda d, n, w: seen.append((d, n, w))
    )
    assert not first.complete
    assert first.batches == 1 and first.dv_files_deleted == 1  # one batch: progress, then the budget check
    assert seen == [(0, plan.dv_files_deleted, "dv"), (1, plan.dv_files_deleted, "dv")]
    assert read(t) == expected
    second = table_gc.collect_garbage(t.commit_log, batch_bytes=1)
    assert second.complete
    assert first.dv_files_deleted + second.dv_files_deleted == plan.dv_files_deleted
    assert second.log_files_deleted == plan.log_files_deleted
    assert sorted(first.deleted + second.deleted) == sorted(plan.deleted)
    assert read(t) == expected


def test_batches_are_bounded_by_path_bytes(tmp_path, monkeypatch):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 8))
    limit = 2 * len(next(iter(files(t, DV_DIR)))) + 1  # two DV paths fit, three do not
    plan = table_gc.collect_garbage(t.commit_log, dry_run=True, batch_bytes=limit)
    sizes: list[int] = []
    real_delete = t.io.delete

    def recording_delete(paths):
        paths = list(paths)
        sizes.append(sum(len(p.encode()) for p in paths))
        real_delete(paths)

    monkeypatch.setattr(t.io, "delete", recording_delete)
    report = table_gc.collect_garbage(t.commit_log, batch_bytes=limit)
    monkeypatch.undo()
    assert report.complete and report.batches == len(sizes) == plan.batches
    assert all(0 < n <= limit for n in sizes)
    assert sum(sizes) == sum(len(p.encode()) for p in plan.deleted)
    assert report.dv_files_deleted == 6 and len(sizes) >= 3 + 12 // 2


def test_a_corrupt_checkpoint_keeps_the_log_whole(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 7))  # latest 9, checkpoints 3, 6, 9
    expected = record(t)
    (tmp_path / "t" / checkpoint_path(9)).write_bytes(b"{broken")
    report = table_gc.collect_garbage(t.commit_log)
    assert report.log_files_deleted == 0
    assert report.dv_files_deleted > 0
    assert read(t) == expected[9]


def test_a_checkpoint_with_a_bad_row_keeps_the_log_whole(tmp_path):
    """GC's full check reads every column of the checkpoint it cuts the log at, not only
    the DV columns its plan needs."""
    import pyarrow.parquet as pq

    t = make_table(tmp_path)
    delete_ids(t, spread(0, 7))
    expected = record(t)
    path = tmp_path / "t" / checkpoint_path(9)
    pf = pq.ParquetFile(path)
    bad = pf.read()
    i = bad.schema.get_field_index("num_rows")
    bad = bad.set_column(i, bad.schema.field(i), pa.array([-1] * bad.num_rows, bad.schema.field(i).type))
    pq.write_table(bad.replace_schema_metadata(pf.metadata.metadata), path, compression="zstd", write_page_checksum=True)
    report = table_gc.collect_garbage(t.commit_log)
    assert report.log_files_deleted == 0
    assert read(t) == expected[9]  # falls back to checkpoint 6 + the commits after it


_GC_CHILD = """
import json, sys
from mvtable import faults
from mvtable.connector import Table
from mvtable.connector import gc as table_gc
from mvtable.connector.pinning import PinnedSnapshot
report = table_gc.collect_garbage(Table.open(sys.argv[1]).log, batch_bytes=1)
print(json.dumps({"complete": report.complete, "batches": report.batches}))
"""


def run_gc_child(uri: str, kill_after: int | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop(faults.FAULT_ENV, None)
    if kill_after is not None:
        env[faults.FAULT_ENV] = f"gc.after_batch:{kill_after}"
    return subprocess.run([sys.executable, "-c", _GC_CHILD, uri], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_gc_killed_midway_leaves_the_table_intact_and_the_next_run_completes(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 6))
    pinned_version = t.version  # 8
    pinned = t.pin(pinned_version)
    delete_ids(t, spread(6, 10))
    expected = record(t)
    latest = t.version  # 18
    plan = table_gc.collect_garbage(t.commit_log, dry_run=True)
    n_dv = plan.dv_files_deleted
    assert plan.safe_version == pinned_version and n_dv >= 3 and plan.log_files_deleted >= 3

    # kill inside the DV phase, then at the first log batch: each run starts from what the last left
    done = 0
    for kill_after in (2, n_dv - 2 + 1):
        before = files(t, DV_DIR) | files(t, LOG_DIR)
        proc = run_gc_child(t.uri, kill_after)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        gone = before - (files(t, DV_DIR) | files(t, LOG_DIR))
        assert len(gone) == kill_after  # one path per batch: exactly k batches landed
        assert gone <= set(plan.deleted)
        done += kill_after
        # the table opens and every retained (pinned .. latest) version reads exactly
        reopened = Table.open(t.uri)
        for v in range(pinned_version, latest + 1):
            assert read(reopened, v) == expected[v], v
    assert done == n_dv + 1  # the second kill landed in the log phase

    proc = run_gc_child(t.uri, None)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["complete"] is True
    # nothing it should have removed is left, nothing it should have kept is gone
    assert files(t, DV_DIR) == needed_dvs(t, range(pinned_version, latest + 1))
    assert not (files(t, DV_DIR) | files(t, LOG_DIR)) & set(plan.deleted)
    assert table_gc.collect_garbage(t.commit_log, dry_run=True).deleted == []
    for v in range(pinned_version, latest + 1):
        assert read(t, v) == expected[v]
    pinned.release()


def test_a_pin_that_lands_while_gc_runs_makes_it_plan_again(tmp_path):
    t = make_table(tmp_path)
    delete_ids(t, spread(0, 6))  # versions 3..8
    t.append(rows(100, 5))  # version 9 (a checkpoint): version 8 has the same DVs as 9
    expected = read(t, 8)
    pins: list[PinnedSnapshot] = []

    def pin_during_gc(done, total, what):
        if what == "dv" and done == 1 and not pins:  # after the first delete batch
            pins.append(t.pin(8))

    report = table_gc.collect_garbage(t.commit_log, batch_bytes=1, progress=pin_during_gc)
    assert pins and report.complete and report.replans == 1
    assert report.safe_version == report.pinned_version == 8
    assert report.log_checkpoint == 6  # not 9: the log must still reach version 8
    assert checkpoint_path(6) in files(t, LOG_DIR)
    assert read(t, 8) == expected
    pins[0].release()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dry_run": "no"}, "dry_run must be True or False"),
        ({"time_budget_s": "5"}, "time_budget_s must be a number of seconds"),
        ({"time_budget_s": -1}, "time_budget_s cannot be negative"),
        ({"time_budget_s": float("inf")}, "time_budget_s must be a finite"),
        ({"batch_bytes": -1}, "batch_bytes must be an integer >= 1"),  # was a bare ValueError
        ({"batch_bytes": 1.5}, "batch_bytes must be an integer >= 1"),
    ],
)
def test_gc_options_of_the_wrong_type_are_refused_before_anything_is_deleted(tmp_path, options, message):
    t = make_table(tmp_path)
    delete_ids(t, [1, 2])
    before = files(t, DV_DIR) | files(t, LOG_DIR)
    with pytest.raises(InvalidOptionError, match=message):
        t.collect_garbage(**options)
    assert files(t, DV_DIR) | files(t, LOG_DIR) == before
