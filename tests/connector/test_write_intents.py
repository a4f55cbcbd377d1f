"""Write intents (``connector.write_intents``): what they protect, for how long, and the
settings vacuum and GC refuse without ``force``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, write_intents, writes
from mvtable.connector.cli.main import main as cli_main
from mvtable.connector.recovery import process_owner
from mvtable.connector.segments import write_segments
from mvtable.connector.write_intents import INTENT_DIR, MIN_ORPHAN_GRACE_S
from mvtable.errors import OrphanGraceTooShortError, RetentionTooShortError, WriteIntentExpiredError

SHORT = {"orphanGracePeriod": "0s", "versionRetentionPeriod": "0s"}


def ids(n0: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n0, n0 + n), pa.int64())})


@pytest.fixture
def t(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), schema=ids(0, 1).schema, properties=SHORT)
    table.append(ids(0, 10))
    return table


def data_files(t: Table) -> set[str]:
    return set(os.listdir(os.path.join(t.uri, "data")))


def orphan_segment(t: Table, intent: write_intents.WriteIntent | None) -> str:
    """A segment written under ``intent`` and never committed (a write in flight)."""
    (seg,) = write_segments(t.io, ids(100, 5), row_group_rows=100, intent=intent)
    return os.path.basename(seg.path)


def test_an_intent_names_the_files_and_protects_them_until_released(t):
    intent = write_intents.take(t.io, operation="append")
    doc = json.loads(t.io.read(intent.path))
    assert doc["prefixes"] == [f"data/{intent.id}-", f"_mvtable/dv/{intent.id}-"]
    assert doc["owner"]["pid"] == os.getpid() and doc["expires_ms"] > doc["created_ms"]
    name = orphan_segment(t, intent)
    assert name.startswith(f"{intent.id}-")
    report = t.vacuum(retention="0s", force=True)
    assert name in data_files(t) and f"data/{name}" not in report.files
    write_intents.release(t.io, intent)
    report = t.vacuum(retention="0s", force=True)
    assert name not in data_files(t) and f"data/{name}" in report.files


def test_a_vacuum_with_its_clock_ahead_still_honours_the_writers_of_now(t):
    intent = write_intents.take(t.io, operation="append")
    name = orphan_segment(t, intent)
    t.vacuum(retention="0s", force=True, now_ms=int(time.time() * 1000) + 30 * 86_400_000)
    assert name in data_files(t)
    write_intents.release(t.io, intent)


def test_an_expired_intent_protects_nothing_and_cannot_be_renewed(t):
    intent = write_intents.take(t.io, operation="append", ttl_s=0.2)
    name = orphan_segment(t, intent)
    write_intents.renew(t.io, intent)  # well inside its lease
    time.sleep(0.25)
    report = t.vacuum(retention="0s", force=True)
    assert name not in data_files(t)
    assert intent.path in report.files  # the lapsed intent file goes too
    with pytest.raises(WriteIntentExpiredError, match="no longer protects"):
        write_intents.renew(t.io, intent)


def test_a_renewal_close_to_the_end_of_the_lease_is_refused(t):
    intent = write_intents.take(t.io, operation="append", ttl_s=1.0)
    time.sleep(0.8)  # less than RENEW_MARGIN of the lease left: a vacuum may be about to see it expired
    with pytest.raises(WriteIntentExpiredError, match="from expiring"):
        write_intents.renew(t.io, intent)


def test_a_keeper_renews_a_long_write(t):
    intent = write_intents.take(t.io, operation="append", ttl_s=0.3)
    name = orphan_segment(t, intent)
    with write_intents.IntentKeeper(t.io, intent) as keeper:
        time.sleep(0.9)  # three leases
        t.vacuum(retention="0s", force=True)
        keeper.check()
    assert name in data_files(t)
    write_intents.release(t.io, intent)


def test_the_intent_of_a_dead_writer_protects_nothing(t):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = process_owner(child.pid)
    finally:
        child.kill()
        child.wait()
    intent = write_intents.take(t.io, operation="append", owner=owner)
    name = orphan_segment(t, intent)
    time.sleep(0.01)  # older than the 0 s grace period by the millisecond clock of vacuum
    report = t.vacuum(retention="0s", force=True)
    assert name not in data_files(t) and intent.path in report.files


def test_an_unreadable_intent_file_protects_every_orphan_until_it_is_old(t):
    name = orphan_segment(t, None)
    t.io.write(f"{INTENT_DIR}/0123456789ab.json", b"{torn")
    t.vacuum(retention="0s", force=True)
    assert name in data_files(t)
    old = time.time() - 2 * 86_400
    os.utime(os.path.join(t.uri, INTENT_DIR, "0123456789ab.json"), (old, old))
    report = t.vacuum(retention="0s", force=True)
    assert name not in data_files(t) and f"{INTENT_DIR}/0123456789ab.json" in report.files


def test_every_write_removes_its_intent(t):
    t.append(ids(10, 5))
    t.overwrite(ids(0, 3), consistent_push=True)
    t.delete(pc.field("id") == 1)
    t.compact(min_input_files=1, delete_ratio=0.01)
    assert not os.listdir(os.path.join(t.uri, INTENT_DIR))
    segment_names = {os.path.basename(s.file.path) for s in t.snapshot().visible_segments()}
    assert all("-" in n for n in segment_names)  # named after the intents they were written under


def test_an_aborted_write_removes_its_files_and_intent(t):
    plan = writes.begin_write(t.uri, storage_options=None, incoming=ids(0, 1).schema, mode=writes.APPEND)
    segments = writes.write_data(plan, ids(50, 5).to_batches())
    assert plan.intent is not None and t.io.exists(plan.intent.path)
    writes.abort_write(plan, segments)
    assert not t.io.exists(plan.intent.path) and not t.io.exists(segments[0].path)


def test_a_short_orphan_grace_period_needs_force(t):
    with pytest.raises(OrphanGraceTooShortError, match="orphanGracePeriod \\(0s\\)") as err:
        t.vacuum()
    assert isinstance(err.value, RetentionTooShortError)  # caught wherever a too-short retention is
    with pytest.raises(OrphanGraceTooShortError):
        t.collect_garbage()
    assert t.vacuum(force=True).complete and t.collect_garbage(force=True).complete
    assert cli_main(["gc", t.uri]) != 0
    assert cli_main(["gc", t.uri, "--force"]) == 0


def test_the_minimum_grace_period_is_accepted_without_force(tmp_path):
    minimum = f"{MIN_ORPHAN_GRACE_S:.0f}s"
    t = Table.create(str(tmp_path / "t"), schema=ids(0, 1).schema, properties={"orphanGracePeriod": minimum})
    t.append(ids(0, 3))
    assert t.vacuum().complete and t.collect_garbage().complete


def test_a_commit_temp_file_is_kept_however_short_the_grace_period(t):
    tmp = os.path.join(t.uri, "_mvtable", "log", ".00000000000000000009.json.abc.tmp")
    with open(tmp, "wb") as f:
        f.write(b"{}")
    t.vacuum(retention="0s", force=True)
    assert os.path.exists(tmp)  # a commit being written: no intent covers it
    old = time.time() - MIN_ORPHAN_GRACE_S - 60
    os.utime(tmp, (old, old))
    t.vacuum(retention="0s", force=True)
    assert not os.path.exists(tmp)
