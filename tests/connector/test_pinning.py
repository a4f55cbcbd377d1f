"""One pin mechanism (``mvtable.connector.pinning``): what a read or a delete pins, when
the pin goes, and that a commit landing between planning and reading never changes what
a planned ``Table.scan`` returns."""

from __future__ import annotations

import time

import pyarrow.compute as pc
import pytest

from mvtable.connector import Table, pinning, writes
from mvtable.connector.pinning import pin_scan, renew
from mvtable.errors import DeletionVectorNotFoundError, FilesMissingError, PinExpiredError
from mvtable.visibility import pins, process_cache

from .conftest import COMMITS, churned_table, orders


def ids(table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def live_versions(t: Table) -> list[int]:
    return [p.version for p in pin_scan(t.io).live]


@pytest.fixture
def pushed(table_uri: str) -> Table:
    return churned_table(table_uri)


@pytest.mark.parametrize("commit", sorted(COMMITS))
def test_a_commit_between_planning_and_reading_never_changes_a_scan(pushed, commit):
    expected = ids(pushed.to_arrow())
    scan = pushed.scan(columns=["id"], filter=pc.field("price") >= 0)
    assert live_versions(pushed) == [scan.plan.version]
    COMMITS[commit](pushed)
    assert ids(pushed.to_arrow()) != expected  # the commit changed the table
    # everything no pin needs is collected (data files, DV files, log): the scan's stay
    pushed.vacuum()
    process_cache().clear()
    assert ids(scan.to_arrow()) == expected
    assert live_versions(pushed) == []  # released when the read ended


def test_reading_a_scan_again_pins_again(small_table):
    scan = small_table.scan()
    assert scan.count() == 2000 and live_versions(small_table) == []
    seen: list[list[int]] = []
    for _ in scan.to_tables():
        seen.append(live_versions(small_table))
    assert seen and all(v == [scan.plan.version] for v in seen)
    assert live_versions(small_table) == []


@pytest.mark.parametrize("lookups", [0, 16], ids=["listing", "exists"])
def test_pinning_an_old_version_checks_its_deletion_vectors_are_still_there(tmp_path, monkeypatch, lookups):
    monkeypatch.setattr(pinning, "_EXISTS_CALLS", lookups)
    t = Table.create(str(tmp_path / "t"), schema=orders(0, 1).schema, properties={"dvInlineMaxBytes": "0"})
    t.append(orders(0, 100))
    t.delete(pc.field("id") < 10)
    old = t.version
    [ref] = t.snapshot(old).dvs.values()
    t.delete(pc.field("id") < 20)  # supersedes the DV file of `old`
    # as if GC had planned before our pin landed and removed the superseded file
    t.io.delete([ref.path])
    with pytest.raises(DeletionVectorNotFoundError):
        t.pin(old)
    assert live_versions(t) == []  # the refused pin was removed
    with t.pin() as latest:  # the newest version is never checked: GC keeps what it needs
        assert latest.version == t.version and live_versions(t) == [t.version]
    assert live_versions(t) == []


def test_renew_extends_a_live_pin_and_pins_an_expired_one_again(small_table):
    t = small_table
    pinned = t.pin(ttl_s=60)
    first = pins.read_pin(t.io, pinned.pin.pin_id)
    pinned.renew(ttl_s=3600)
    assert pins.read_pin(t.io, pinned.pin.pin_id).expires_ms >= first.expires_ms + 3_000_000
    pinned.release()

    short = t.pin(ttl_s=0.001)
    time.sleep(0.01)
    with pytest.raises(PinExpiredError):  # without the log it cannot check the version
        renew(t.io, short.pin)
    again = renew(t.io, short.pin, commit_log=t.commit_log)
    assert again.version == short.version and again.pin_id != short.pin.pin_id
    assert live_versions(t) == [short.version]
    pins.release(t.io, again.pin_id)


def test_idle_cuts_a_pin_and_renew_extends_it_again(small_table):
    t = small_table
    pinned = t.pin(ttl_s=3600)
    pinning.idle(t.io, pinned.pin, ttl_s=30)
    assert pins.read_pin(t.io, pinned.pin.pin_id).expires_ms <= time.time() * 1000 + 30_000
    assert renew(t.io, pinned.pin, commit_log=t.commit_log) == pinned.pin
    assert pins.read_pin(t.io, pinned.pin.pin_id).expires_ms > time.time() * 1000 + 3_000_000
    pinned.release()
    pinning.idle(t.io, pinned.pin)  # released: nothing to cut, no error


def test_a_lapsed_pin_is_not_made_again_when_vacuum_took_the_versions_files(small_table):
    t = small_table
    short = t.pin(ttl_s=0.001)
    t.overwrite(orders(500, 3))
    time.sleep(0.01)
    assert [f for f in t.vacuum(retention="0s", force=True).files if f.startswith("data/")]
    with pytest.raises(FilesMissingError, match=f"of version {short.version} of .*vacuum removed it"):
        renew(t.io, short.pin, commit_log=t.commit_log)
    assert live_versions(t) == []  # the refused pin was removed


def test_a_write_pins_its_read_version_until_it_commits_or_aborts(small_table):
    t = small_table
    for finish in (writes.finish_write, writes.abort_write):
        plan = writes.begin_write(t.uri, storage_options=None, incoming=orders(0, 1).schema, mode=writes.APPEND)
        assert plan.pin is not None and live_versions(t) == [plan.read_version]
        finish(plan, [])
        assert live_versions(t) == []


def test_delete_holds_a_pin_on_the_version_it_read_while_it_commits(small_table, monkeypatch):
    t = small_table
    seen: list[list[int]] = []
    real = t.commit_log.commit

    def commit(**kwargs):
        seen.append(live_versions(t))
        return real(**kwargs)

    monkeypatch.setattr(t.commit_log, "commit", commit)
    read = t.version
    assert t.delete(pc.field("id") < 5).deleted_rows == 5
    assert t.delete_rows({t.snapshot().visible_segments()[1].id: [0]}).deleted_rows == 1
    assert seen == [[read], [read + 1]]
    assert live_versions(t) == []


def _expires_ms(t: Table, pin_id: str) -> int:
    return int(pins.read_pin(t.io, pin_id).expires_ms)


def test_a_task_renews_the_planners_pin_once_half_its_ttl_has_passed(pushed, monkeypatch):
    """Spark runs a DataFrame's planned partitions again on later actions without planning:
    the task keeps the version pinned, at most one renewal per half ttl per process."""
    monkeypatch.setattr(pinning, "_RENEWED", {})
    extended: list[str] = []
    real_extend = pins.extend

    def spy(store, pin_id, ttl_s, **kw):
        extended.append(pin_id)
        return real_extend(store, pin_id, ttl_s, **kw)

    monkeypatch.setattr(pins, "extend", spy)
    with pinning.pin_snapshot(pushed.io, pushed.commit_log, owner="planner") as held:
        pin, now, ttl = held.pin, time.time(), pinning.pin_ttl_s()
        # planned a moment ago: nothing to do
        assert pinning.renew_when_due(pushed.io, pin, renewed_at=now, commit_log=pushed.commit_log) == pin
        assert extended == []
        # planned more than half a ttl ago: renewed
        later = now + 0.6 * ttl
        assert pinning.renew_when_due(pushed.io, pin, renewed_at=now, commit_log=pushed.commit_log, now=later) == pin
        assert extended == [pin.pin_id]
        # other tasks of the same process soon after: no second write
        assert pinning.renew_when_due(pushed.io, pin, renewed_at=now, commit_log=pushed.commit_log, now=later + 1) == pin
        assert extended == [pin.pin_id]
        # half a ttl after that renewal: again
        pinning.renew_when_due(pushed.io, pin, renewed_at=now, commit_log=pushed.commit_log, now=later + 0.6 * ttl)
        assert extended == [pin.pin_id, pin.pin_id]


def test_a_task_whose_pin_is_gone_pins_the_version_again_if_it_is_whole(pushed, monkeypatch):
    monkeypatch.setattr(pinning, "_RENEWED", {})
    held = pinning.pin_snapshot(pushed.io, pushed.commit_log, owner="planner")
    pin = held.pin
    held.release()  # as if it had expired
    again = pinning.renew_when_due(pushed.io, pin, renewed_at=0.0, commit_log=pushed.commit_log)
    assert again.version == pin.version and again.pin_id != pin.pin_id
    assert pins.read_pin(pushed.io, again.pin_id).version == pin.version
    # the next task of this process reuses that pin instead of pinning once more
    assert pinning.renew_when_due(pushed.io, pin, renewed_at=0.0, commit_log=pushed.commit_log) == again
    pinning.release(pushed.io, again)


def test_the_spark_reader_task_renews_a_stale_plan(pushed, monkeypatch):
    """The reader runs without a Spark session here: the same calls an executor makes."""
    from mvtable.connector.spark.source import MvTableDataSource

    monkeypatch.setattr(pinning, "_RENEWED", {})
    source = MvTableDataSource({"path": pushed.uri})
    reader = source.reader(source.schema())
    [part] = reader.partitions()
    pinning.release(pushed.io, part.pin)  # it expired: an action an hour after planning
    part.renewed_at -= pinning.pin_ttl_s()
    rows = sum(batch.num_rows for batch in reader.read(part))
    assert rows == pushed.scan().count()
    [(_, held)] = pinning._RENEWED.values()  # the task pinned the version again
    assert held.version == part.pin.version and _expires_ms(pushed, held.pin_id) > time.time() * 1000
