"""Partition pruning: segments whose partition cannot match a scan's predicates or filter are
dropped before any statistic is read, with the same rows as an unpartitioned table; deletes
and the change feed prune the same way."""

from __future__ import annotations

import datetime as dt
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mvtable.connector import Table
from mvtable.connector.partitions.pruning import ExpressionPruner, project
from mvtable.connector.partitions.spec import parse_partition_by
from mvtable.connector.partitions.transforms import parse_transform
from mvtable.connector.scan import plan_scan
from mvtable.connector.schema import schema_to_json
from mvtable.connector.schema_evolution.field_ids import fresh_ids
from mvtable.connector.stats import Predicate
from mvtable.lineage.actions import AddSegment, Commit, MetadataAction, RowGroupInfo, SegmentFile
from mvtable.lineage.descriptors import RowGroupDescriptor
from mvtable.lineage.enums import Operation
from mvtable.lineage.snapshot import Snapshot, replay

from .conftest import START, events

TS = pa.timestamp("us")


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> tuple[Table, Table]:
    """The same 20 days of rows (one every 2 hours, with nulls) partitioned by day(ts) and region, and not at all."""
    root = tmp_path_factory.mktemp("pruning")
    data = events(240, hours=2, nulls=True)
    parted = Table.create(str(root / "p"), schema=data.schema, partition_by=["day(ts)", "region"])
    plain = Table.create(str(root / "u"), schema=data.schema)
    parted.append(data)
    plain.append(data)
    return parted, plain


def at(days: float) -> dt.datetime:
    return START + dt.timedelta(days=days)


CASES = [
    ([Predicate("ts", "<", at(3))], 3 * 3),  # days 0-2: day 3 starts at the bound, so none of its rows is before it
    ([Predicate("ts", "<", at(3.5))], 4 * 3),  # days 0-2 and day 3, whose first half is before the bound
    ([Predicate("ts", "<=", at(3))], 4 * 3),
    ([Predicate("ts", ">=", at(17.5))], 3 * 3),
    ([Predicate("ts", ">", at(17.5))], 3 * 3),
    ([Predicate("ts", "==", at(5))], 3),
    ([Predicate("ts", "in", (at(5), at(9)))], 6),
    ([Predicate("ts", ">=", at(4)), Predicate("ts", "<", at(6)), Predicate("region", "==", "eu")], 2),
    ([Predicate("region", "in", ("eu", "us"))], 2 * 20),
    ([Predicate("region", "!=", "eu")], 2 * 20),
    ([Predicate("region", "starts_with", "ap")], 20),
    ([Predicate("ts", "is_null")], 1),
    ([Predicate("ts", "not_null")], 60),
    ([Predicate("id", "==", 3)], 61),  # no partition field on id: nothing pruned
]


@pytest.mark.parametrize("predicates, kept", CASES)
def test_predicates_prune_partitions(tables, predicates, kept) -> None:
    parted, plain = tables
    snapshot = parted.snapshot()
    total = len(snapshot.visible_segments())
    assert total == 61  # 20 days x 3 regions, and the null partition
    plan = plan_scan(snapshot, predicates=predicates)
    assert plan.pruned_segments == total - kept
    got = parted.to_arrow(predicates=predicates).sort_by("id")
    assert got.equals(plain.to_arrow(predicates=predicates).sort_by("id"))


EXPRESSIONS = [
    (pc.field("ts") < pa.scalar(at(3), TS), 9),  # the guarantee is exact: day 3 starts at the bound
    ((pc.field("ts") >= pa.scalar(at(4), TS)) & (pc.field("ts") < pa.scalar(at(6), TS)) & (pc.field("region") == "eu"), 2),
    ((pc.field("ts") < pa.scalar(at(1), TS)) | (pc.field("region") == "apac"), 3 + 19),
    (pc.field("region").isin(["eu"]), 20),
    (pc.field("ts").is_null(), 1),
    (pc.field("id") > 3, 61),
]


@pytest.mark.parametrize("expression, kept", EXPRESSIONS)
def test_filter_expressions_prune_partitions(tables, expression, kept) -> None:
    parted, plain = tables
    plan = plan_scan(parted.snapshot(), filter=expression)
    assert len(parted.snapshot().visible_segments()) - plan.pruned_segments == kept
    got = parted.to_arrow(filter=expression).sort_by("id")
    assert got.num_rows and got.equals(plain.to_arrow(filter=expression).sort_by("id"))


def test_pruning_reads_no_statistic(tables, monkeypatch) -> None:
    """Partitions are pruned from the log: statistics are parsed only for segments that stay."""
    parted, _ = tables
    snapshot = parted.snapshot()
    parsed = []
    real = RowGroupDescriptor.stats

    def spy(self):
        parsed.append(self)
        return real.fget(self)

    monkeypatch.setattr(RowGroupDescriptor, "stats", property(spy))
    plan = plan_scan(snapshot, predicates=[Predicate("ts", "==", at(5)), Predicate("region", "==", "eu")])
    assert plan.pruned_segments == 60 and len(parsed) <= 2  # one segment's row group, per predicate at most


@pytest.mark.parametrize(
    "transform, source, predicate, inside, outside",
    [
        ("day", TS, Predicate("ts", "<", at(3)), dt.date(2024, 1, 3), dt.date(2024, 1, 4)),  # day 4 starts at the bound
        ("day", TS, Predicate("ts", "<", at(3.5)), dt.date(2024, 1, 4), dt.date(2024, 1, 5)),
        ("day", TS, Predicate("ts", "<=", at(3)), dt.date(2024, 1, 4), dt.date(2024, 1, 5)),
        ("month", TS, Predicate("ts", ">=", at(40)), 649, 648),
        ("year", pa.date32(), Predicate("d", "<", dt.date(2025, 1, 1)), 54, 55),
        ("year", pa.date32(), Predicate("d", "<", dt.date(2025, 1, 2)), 55, 56),
        ("hour", TS, Predicate("ts", "==", at(1)), 473376, 473377),
        ("bucket[4]", pa.int64(), Predicate("id", "in", (1, 2)), None, "other"),
        ("truncate[3]", pa.string(), Predicate("s", "starts_with", "abcd"), "abc", "abd"),
        ("truncate[3]", pa.string(), Predicate("s", "starts_with", "ab"), "abz", "aaz"),
        ("truncate[10]", pa.int64(), Predicate("n", ">", 25), 20, 10),
        ("truncate[10]", pa.int64(), Predicate("n", "<", 20), 10, 20),
        ("truncate[10]", pa.int64(), Predicate("n", "<", 21), 20, 30),
        ("truncate[2]", pa.string(), Predicate("s", "<", "ab"), "aa", "ab"),
        ("truncate[2]", pa.string(), Predicate("s", "<", "abc"), "ab", "ac"),
    ],
)
def test_inclusive_projection(transform, source, predicate, inside, outside) -> None:
    t = parse_transform(transform)
    test = project(predicate, t, source)
    assert test is not None
    if inside is None:  # bucket: the buckets of the values
        hit = {t.apply_scalar(v, source) for v in predicate.value}
        assert all(test(b) for b in hit) and not any(test(b) for b in set(range(4)) - hit)
        return
    assert test(inside) and not test(outside)
    assert not test(None)  # a null partition holds only nulls, which no comparison matches


def test_no_projection_where_none_is_sound() -> None:
    """Without a projection only the null partition is ruled out: a comparison matches no null."""
    aware = at(1).replace(tzinfo=dt.timezone.utc)
    day = parse_transform("day")
    for predicate, transform, source in [
        (Predicate("id", "<", 5), parse_transform("bucket[4]"), pa.int64()),
        (Predicate("ts", "!=", at(1)), day, TS),
        (Predicate("ts", "==", "not a time"), day, TS),
        (Predicate("ts", "<", aware), day, TS),  # which instant is meant: unknown
        (Predicate("ts", "<", at(1)), day, pa.timestamp("us", tz="UTC")),
    ]:
        test = project(predicate, transform, source)
        assert test is not None and not test(None)
        assert test(0 if transform.name == "bucket" else dt.date(2099, 1, 1)), predicate
    test = project(Predicate("ts", "<", aware), day, pa.timestamp("us", tz="UTC"))
    assert test is not None and not test(dt.date(2099, 1, 1))
    nan_kept = project(Predicate("f", ">", 990.0), parse_transform("identity"), pa.float64())
    assert nan_kept is not None and nan_kept(float("nan")) and not nan_kept(1.0)  # Spark: NaN is above every number
    with_null = project(Predicate("id", "in", (1, None)), parse_transform("bucket[4]"), pa.int64())
    assert with_null is not None and with_null(None)  # isin matches a null against a null value


def test_deletes_prune_partitions_and_delete_the_same_rows(tmp_path) -> None:
    data = events(240, hours=2)
    parted = Table.create(str(tmp_path / "p"), schema=data.schema, partition_by=["day(ts)"])
    plain = Table.create(str(tmp_path / "u"), schema=data.schema)
    parted.append(data)
    plain.append(data)
    condition = (
        (pc.field("ts") >= pa.scalar(at(2), TS))
        & (pc.field("ts") < pa.scalar(at(3), TS))
        & pc.equal(pc.bit_wise_and(pc.field("id"), 1), 0)
    )
    assert plan_scan(parted.snapshot(), filter=condition).pruned_segments == 19
    assert parted.delete(condition).deleted_rows == plain.delete(condition).deleted_rows == 6
    assert parted.to_arrow().sort_by("id").equals(plain.to_arrow().sort_by("id"))
    assert list(parted.snapshot().dvs) == [s.id for s in parted.snapshot().visible_segments() if s.file.partition == (19725,)]


def test_changes_take_a_filter_and_prune_by_it(tmp_path, monkeypatch) -> None:
    parted = Table.create(str(tmp_path / "p"), schema=events(1).schema, partition_by=["day(ts)"])
    parted.append(events(48, hours=2))  # 4 days
    parted.append(events(24, start=48, hours=2))  # days 4 and 5
    parted.delete(pc.field("id") < 3)
    condition = pc.field("ts") >= pa.scalar(at(4), TS)
    from mvtable.connector.streaming import changes as feed

    read = []
    real = feed.read_change

    def spy(io, change, **kw):
        read.append(change.segment.partition)
        return real(io, change, **kw)

    monkeypatch.setattr(feed, "read_change", spy)
    got = parted.changes(1, filter=condition, columns=["id"])
    assert sorted(got.column("id").to_pylist()) == list(range(48, 72))
    assert set(got.column("_change_type").to_pylist()) == {"insert"}
    assert set(read) == {(19727,), (19728,)}
    assert got.column_names == ["id", "_change_type", "_commit_version", "_commit_timestamp"]
    deleted = parted.changes(3, filter=pc.field("id") < 2)
    assert sorted(deleted.column("id").to_pylist()) == [0, 1]


def long_table(n: int) -> Snapshot:
    """A snapshot (replayed, no files) of ``n`` daily partitions of day(ts), one segment each."""
    schema = pa.schema([("ts", TS), ("x", pa.int64())])
    table_schema, last = fresh_ids(schema_to_json(schema))
    spec = parse_partition_by(["day(ts)"], table_schema)
    meta = MetadataAction(table_id="t", table_schema=table_schema, last_field_id=last, partition_specs=(spec,), default_spec_id=1)
    first = (START.date() - dt.date(1970, 1, 1)).days
    adds = [
        AddSegment(
            segment=SegmentFile(
                id=f"s{i}",
                path=f"data/s{i}.parquet",
                num_rows=10,
                size_bytes=100,
                row_groups=(RowGroupInfo(num_rows=10, first_row=0, total_byte_size=100),),
                spec_id=1,
                partition=(first + i,),
            )
        )
        for i in range(n)
    ]
    return replay([Commit(version=0, read_version=-1, timestamp_ms=1, operation=Operation.CREATE, actions=(meta, *adds))])


def test_planning_a_day_of_a_long_table_is_fast() -> None:
    """3,650 daily partitions: planning one day's scan decides each partition once, from the log."""
    n = 3650
    snapshot = long_table(n)
    day = [Predicate("ts", ">=", at(1000)), Predicate("ts", "<", at(1001))]
    plan = plan_scan(snapshot, predicates=day)
    assert plan.pruned_segments == n - 1 and len(plan.tasks) == 1  # the next day starts at the bound: none of it is before
    plan = plan_scan(snapshot, predicates=[Predicate("ts", "==", at(1000))])
    assert plan.pruned_segments == n - 1
    best = min(_timed(lambda: plan_scan(snapshot, predicates=day)) for _ in range(5))
    assert best < 0.5  # a loose bound for a shared machine; the partitions benchmark measures it


def test_planning_a_day_of_a_long_table_by_expression_asks_arrow_nothing(monkeypatch) -> None:
    """The same day as a pyarrow expression is decided by its comparisons, never by Arrow's simplification."""
    n = 3650
    snapshot = long_table(n)
    day = (pc.field("ts") >= pa.scalar(at(1000), TS)) & (pc.field("ts") < pa.scalar(at(1001), TS))

    def refuse(*args, **kwargs):
        raise AssertionError("Arrow's simplification was asked")

    monkeypatch.setattr(ExpressionPruner, "matching", refuse)
    plan = plan_scan(snapshot, filter=day & (pc.field("x") > 3))
    assert plan.pruned_segments == n - 1 and len(plan.tasks) == 1


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
