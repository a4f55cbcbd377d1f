"""Compaction on real tables (local disk, no Spark): same rows in every version, deletes on
either side of a compaction remapped instead of failed, lineage kept exact, concurrent
pushes winning, bounded batches, options. Concurrency is made deterministic by running
the concurrent commit (a real one, through the Table API) from inside the rewriter, i.e.
after the compaction read its version and before it commits."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.compaction import compact
from mvtable.connector.compaction import local_rewriter as local
from mvtable.errors import FilesMissingError, InvalidOptionError

from .conftest import orders

PROPS = {"rowGroupRows": "50", "compactMinInputFiles": "3"}


def checksum(t: Table, version: int | None = None) -> str:
    """Order-independent digest of every row of a version."""
    rows = t.to_arrow(version=version).sort_by("id")
    return hashlib.sha256(repr(rows.to_pydict()).encode()).hexdigest()


def all_versions(t: Table) -> dict[int, str]:
    return {h.version: checksum(t, h.version) for h in t.history()}


def ids(t: Table, **kw) -> list[int]:
    return sorted(t.to_arrow(**kw).column("id").to_pylist())


def addresses(t: Table, wanted: list[int], *, version: int | None = None) -> dict[str, list[int]]:
    rows = t.scan(with_row_address=True, version=version).to_arrow()
    rows = rows.filter(pc.is_in(rows["id"], pa.array(wanted, pa.int64())))
    out: dict[str, list[int]] = {}
    for seg, pos in zip(rows["_mv_segment"].to_pylist(), rows["_mv_row"].to_pylist()):
        out.setdefault(seg, []).append(pos)
    return out


def during(t: Table, action):
    """A rewriter that runs ``action()`` (a concurrent commit) after writing the outputs."""
    inner = local(t.io)

    def rewrite(bins, spec):
        done = inner(bins, spec)
        action()
        return done

    return rewrite


@pytest.fixture
def many(table_uri) -> Table:
    """Twelve appends of 40 rows, and two deletes."""
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=PROPS)
    for i in range(12):
        t.append(orders(i * 40, 40))
    t.delete(pc.field("status") == "cancelled")
    t.delete(pc.field("id") < 7)
    return t


def test_every_version_reads_the_same_rows_after_compaction(many):
    before = all_versions(many)
    segments = len(many.snapshot().visible_segment_ids())
    assert many.compact(dry_run=True).commits == ()
    assert all_versions(many) == before
    report = many.compact()
    assert report.commits == (many.version,) and report.committed_bins == report.bins == 1
    assert report.input_segments == segments == 12 and report.output_segments == 1
    assert report.rows_dropped == 48 + 6  # the cancelled rows and ids 1..6 are gone from storage
    after = all_versions(many)
    assert {v: after[v] for v in before} == before
    assert after[many.version] == before[many.version - 1]
    assert many.snapshot().dvs == {}  # the output has no deleted rows
    again = many.compact()
    assert again.commits == () and again.bins == 0


def test_rows_keep_their_order_within_a_bin(many):
    order = many.to_arrow(use_threads=False).column("id").to_pylist()
    many.compact()
    assert many.to_arrow(use_threads=False).column("id").to_pylist() == order


def test_worn_segments_are_rewritten_alone(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={"rowGroupRows": "100", "compactTargetFileSize": "1KiB"})
    t.append(orders(0, 1000))
    t.append(orders(1000, 1000))
    t.delete(pc.field("id") < 300)  # 30% of the first segment
    report = t.compact(delete_ratio=0.25)
    assert report.input_segments == 1 and report.rows_dropped == 300
    assert ids(t) == list(range(300, 2000))
    assert t.compact(delete_ratio=0.25).bins == 0


def test_batches_are_bounded_and_each_is_one_commit(many):
    before = checksum(many)
    report = many.compact(target_file_size=2400, max_bytes_per_commit=1000)
    assert report.bins >= 2 and len(report.commits) == report.bins
    for v in report.commits:
        commit = many.commit_log.read_commit(v)
        assert commit.operation == "COMPACT"
        assert commit.metrics["input_bytes"] <= 1000 or commit.metrics["bins"] == 1
        assert checksum(many, v) == before


def test_delete_during_compaction_is_carried_onto_the_output(many):
    def concurrent_delete():
        many.delete(pc.field("id").isin([101, 251, 477, 479]))

    report = compact(many.io, many.commit_log, rewriter=during(many, concurrent_delete))
    assert report.committed_bins == 1 and report.deletes_remapped == 4
    now = ids(many)
    assert not {101, 251, 477, 479} & set(now)
    assert checksum(many) == checksum(many, many.version - 1)  # the compaction changed no row
    assert len(many.snapshot().dvs) == 1  # the output carries them


def test_delete_read_before_compaction_commits_after_it(many):
    read = many.snapshot()
    where = addresses(many, [8, 101, 301, 5])  # 5 was deleted already: no address
    many.compact(target_file_size=2400)  # several outputs
    many.compact(target_file_size=100_000)  # and those compacted again: a chain of row maps
    result = many.delete_rows(where, read=read)
    assert result.deleted_rows == 3 and result.remapped_rows == 3
    assert not {8, 101, 301} & set(ids(many))
    assert len(ids(many)) == 480 - 54 - 3


def test_delete_of_rows_the_compaction_dropped_changes_nothing(many):
    read = many.snapshot()
    rows = many.scan(with_row_address=True).to_arrow()
    where = addresses(many, [11])
    many.delete(pc.field("id") == 11)
    many.compact()
    result = many.delete_rows(where, read=read)
    assert result.deleted_rows == 0 and result.version is None
    assert rows.num_rows - 1 == len(ids(many))


def test_compacted_push_rolls_back_to_exactly_what_it_replaced(many):
    replaced = many.version
    many.overwrite(orders(5000, 30), consistent_push=True)
    entry = many.lineage()[-1]
    for i in range(1, 4):
        many.append(orders(5000 + i * 30, 30))
    many.delete(pc.field("id") == 5001)
    report = many.compact(min_input_files=2, delete_ratio=0.02)
    assert report.committed_bins == 2  # the push's (worn) segment and the plain appends: never one bin
    assert set(many.lineage()[-1].segments_to).isdisjoint(entry.segments_to)
    assert ids(many) == [i for i in range(5000, 5120) if i != 5001]
    many.rollback(entry=entry.id)
    # the pushed rows go, the rows they replaced come back as they were, later appends stay
    now = many.to_arrow().sort_by("id")
    old = now.filter(pc.field("id") < 5000)
    assert old.to_pydict() == many.to_arrow(version=replaced).sort_by("id").to_pydict()
    assert now.filter(pc.field("id") >= 5000)["id"].to_pylist() == list(range(5030, 5120))


def test_staged_push_segments_are_never_inputs(many):
    many.overwrite(orders(9000, 10), consistent_push=True, publish=False)
    report = many.compact()
    assert report.bins == 0
    many.publish(many.lineage()[-1].id)
    assert ids(many) == list(range(9000, 9010))


def test_a_push_that_replaces_inputs_wins(many):
    def push():
        many.overwrite(orders(7000, 20), consistent_push=True)

    written: list[str] = []
    inner = during(many, push)

    def rewrite(bins, spec):
        done = inner(bins, spec)
        written.extend(rb.output.path for rb in done if rb.output is not None)
        return done

    report = compact(many.io, many.commit_log, rewriter=rewrite)
    assert report.commits == [] and report.committed_bins == 0
    assert len(report.dropped) == 1 and "consistent push" in report.dropped[0].reason
    assert not report.complete
    assert ids(many) == list(range(7000, 7020))
    assert written and not any(many.io.exists(p) for p in written)  # its output is not left behind


def test_restore_that_undeletes_rows_drops_the_bin(many):
    def restore():
        many.restore(version=12)  # the segments as they were before any delete

    report = compact(many.io, many.commit_log, rewriter=during(many, restore))
    assert report.commits == [] and "undeleted" in report.dropped[0].reason
    assert ids(many) == ids(many, version=12)


def test_appends_during_compaction_are_untouched(many):
    def append():
        many.append(orders(8000, 5))

    before = set(ids(many))
    report = compact(many.io, many.commit_log, rewriter=during(many, append))
    assert report.committed_bins == 1
    assert set(ids(many)) == before | set(range(8000, 8005))


def test_old_versions_read_old_segments_until_vacuum(table_uri):
    props = {**PROPS, "versionRetentionPeriod": "0s", "orphanGracePeriod": "0s"}
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=props)
    for i in range(4):
        t.append(orders(i * 10, 10))
    old = t.version
    t.compact()
    assert ids(t, version=old) == list(range(40))
    t.vacuum(force=True)  # orphanGracePeriod 0s
    assert ids(t) == list(range(40))
    with pytest.raises(FilesMissingError):
        ids(t, version=old)


def test_bad_options_are_typed_errors(many):
    with pytest.raises(InvalidOptionError, match="target_file_size"):
        many.compact(target_file_size="huge")
    with pytest.raises(InvalidOptionError, match="delete_ratio"):
        many.compact(delete_ratio=1.5)
    with pytest.raises(InvalidOptionError, match="min_input_files"):
        many.compact(min_input_files=0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"dry_run": "no"}, "dry_run must be True or False"),  # a truthy string ran a dry run
        ({"target_file_size": 1.5}, "target_file_size: 1.5 is not a size"),  # truncated to one byte
        ({"max_bytes_per_commit": "2.5"}, "max_bytes_per_commit: '2.5' is not a size"),
        ({"min_input_files": 2.0}, "min_input_files must be an integer"),
    ],
)
def test_compaction_options_of_the_wrong_type_are_refused(many, options, message):
    version = many.version
    with pytest.raises(InvalidOptionError, match=message):
        many.compact(**options)
    assert many.version == version


def test_auto_compaction_after_appends_and_it_never_fails_the_write(table_uri):
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties={**PROPS, "autoCompact": "true"})
    for i in range(3):
        t.append(orders(i * 10, 10))
    assert len(t.snapshot().visible_segment_ids()) == 1
    assert [h.operation for h in t.history()][-2:] == ["APPEND", "COMPACT"]
    assert ids(t) == list(range(30))
    # a segment file lost by hand makes the next automatic compaction fail: the append lands
    t.io.delete([t.snapshot().visible_segments()[0].file.path])
    t.append(orders(100, 10))
    t.append(orders(200, 10))
    assert t.history()[-1].operation == "APPEND"
    assert len(t.snapshot().visible_segment_ids()) == 3


def test_auto_compaction_after_deletes_rewrites_worn_segments(table_uri):
    props = {**PROPS, "autoCompact": "true", "compactDeleteRatio": "0.5"}
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=props)
    t.append(orders(0, 100))
    t.delete(pc.field("id") < 40)
    assert t.history()[-1].operation == "DELETE"
    t.delete(pc.field("id") < 60)
    assert t.history()[-1].operation == "COMPACT"
    assert t.snapshot().dvs == {} and ids(t) == list(range(60, 100))


def test_keyed_tables_keep_their_key_index_through_compaction(table_uri):
    from mvtable.connector.key_index import index_path
    from mvtable.errors import DuplicateKeyError

    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=PROPS, primary_key=["id"])
    for i in range(4):
        t.append(orders(i * 10, 10))

    def upsert():  # lands while the compaction rewrites: its deletes are carried onto the output
        t.upsert(orders(5, 10).set_column(2, "price", pa.array([-1.0] * 10)))

    report = compact(t.io, t.commit_log, rewriter=during(t, upsert))
    assert report.committed_bins == 1 and report.deletes_remapped == 10
    (output,) = [s for s in t.snapshot().visible_segments() if s.file.num_rows == 40]
    assert t.io.exists(index_path(output.file.path))
    rows = t.to_arrow().sort_by("id")
    assert rows["id"].to_pylist() == list(range(40))  # each key once
    assert [p for i, p in zip(rows["id"].to_pylist(), rows["price"].to_pylist()) if 5 <= i < 15] == [-1.0] * 10
    with pytest.raises(DuplicateKeyError):
        t.append(orders(20, 1))  # found through the output's index


def test_overwrite_of_segments_compacted_meanwhile_is_a_typed_conflict(many):
    from mvtable.connector import writes
    from mvtable.errors import ConcurrentCompactionError, ConcurrentReplaceError

    plan = writes.begin_write(many.uri, storage_options=None, incoming=orders(0, 1).schema, mode=writes.OVERWRITE)
    segments = writes.write_data(plan, orders(9000, 10).to_batches())
    before = ids(many)
    many.compact()
    with pytest.raises(ConcurrentCompactionError, match="compaction") as info:
        writes.finish_write(plan, segments)
    assert isinstance(info.value, ConcurrentReplaceError)
    writes.abort_write(plan, segments)
    assert ids(many) == before


def test_gc_keeps_the_row_map_a_pinned_delete_needs(table_uri):
    from mvtable.visibility import pins

    props = {**PROPS, "dvInlineMaxBytes": "0", "versionRetentionPeriod": "0s", "orphanGracePeriod": "0s"}
    t = Table.create(table_uri, schema=orders(0, 1).schema, properties=props)
    for i in range(3):
        t.append(orders(i * 10, 10))
    t.delete(pc.field("id") == 1)
    first_dv = t.snapshot().dvs[t.snapshot().visible_segment_ids()[0]].path  # the row map will name it
    pending: dict = {}

    def delete_then_read():
        t.delete(pc.field("id") == 2)  # supersedes first_dv before the compaction commits
        pending["read"] = t.snapshot()
        pending["where"] = addresses(t, [3])
        pending["pin"] = pins.pin(t.io, pending["read"].version, ttl_s=600, owner="a slow delete")

    report = compact(t.io, t.commit_log, rewriter=during(t, delete_then_read))
    assert report.deletes_remapped == 1
    # first_dv is superseded in every snapshot from the pinned version on; only the row map
    # of the compaction (committed after the pin) still names it
    t.collect_garbage(force=True)  # orphanGracePeriod 0s
    assert t.io.exists(first_dv)
    result = t.delete_rows(pending["where"], read=pending["read"])
    assert result.deleted_rows == 1 and result.remapped_rows == 1
    assert ids(t) == [i for i in range(30) if i not in (1, 2, 3)]
    pins.release(t.io, pending["pin"])
