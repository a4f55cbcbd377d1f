"""The transforms against pyiceberg's own implementation of Iceberg's spec, value by value."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg import transforms as ice
from pyiceberg import types as it

from mvtable.connector.partitions.transforms import parse_transform
from mvtable.errors import PartitionSpecError

_RNG = random.Random(7)
_EPOCH = dt.datetime(1970, 1, 1)
_LONGS = [0, 1, -1, 34, 2**31, -(2**31) - 1, 2**62, -(2**63), *(_RNG.randrange(-(2**63), 2**63) for _ in range(300))]
_DAYS = [0, -1, 1, 59, 365, -366, 18_000, 19_000, -25_000, *(_RNG.randrange(-200_000, 200_000) for _ in range(300))]
_MICROS = [0, -1, 1, 3_600_000_000 - 1, -3_600_000_000, *(_RNG.randrange(-(2**52), 2**52) for _ in range(300))]
_STRINGS = [
    "",
    "a",
    "iceberg",
    "ünïcödé",
    "😀 emoji",
    *("".join(chr(_RNG.randrange(32, 0x2FFF)) for _ in range(_RNG.randrange(0, 12))) for _ in range(200)),
]


def _ours(text: str, values: list, arrow_type: pa.DataType) -> list:
    return parse_transform(text).apply(pa.array(values, type=arrow_type)).to_pylist()


@pytest.mark.parametrize("n", [1, 2, 16, 1000])
def test_bucket_of_integers_dates_and_timestamps_is_icebergs(n: int) -> None:
    assert _ours(f"bucket[{n}]", _LONGS, pa.int64()) == [ice.BucketTransform(n).transform(it.LongType())(v) for v in _LONGS]
    ints = [v for v in _LONGS if -(2**31) <= v < 2**31]
    assert _ours(f"bucket[{n}]", ints, pa.int32()) == [ice.BucketTransform(n).transform(it.IntegerType())(v) for v in ints]
    days = [dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in _DAYS]
    assert _ours(f"bucket[{n}]", days, pa.date32()) == [ice.BucketTransform(n).transform(it.DateType())(d) for d in _DAYS]
    stamps = [_EPOCH + dt.timedelta(microseconds=m) for m in _MICROS]
    assert _ours(f"bucket[{n}]", stamps, pa.timestamp("us")) == [
        ice.BucketTransform(n).transform(it.TimestampType())(m) for m in _MICROS
    ]


def test_bucket_of_strings_binaries_and_decimals_is_icebergs() -> None:
    assert _ours("bucket[16]", _STRINGS, pa.string()) == [ice.BucketTransform(16).transform(it.StringType())(s) for s in _STRINGS]
    blobs = [s.encode() for s in _STRINGS]
    assert _ours("bucket[7]", blobs, pa.binary()) == [ice.BucketTransform(7).transform(it.BinaryType())(b) for b in blobs]
    decimals = [Decimal("0.00"), Decimal("14.20"), Decimal("-14.21"), Decimal("99999999.99"), Decimal("-0.01")]
    assert _ours("bucket[16]", decimals, pa.decimal128(10, 2)) == [
        ice.BucketTransform(16).transform(it.DecimalType(10, 2))(d) for d in decimals
    ]


def test_icebergs_spec_examples() -> None:
    # the hash values the Iceberg spec's appendix lists
    assert ice.BucketTransform(2**31 - 1).transform(it.LongType())(34) == 2017239379
    assert _ours(f"bucket[{2**31 - 1}]", [34], pa.int64()) == [2017239379]
    assert _ours(f"bucket[{2**31 - 1}]", ["iceberg"], pa.string()) == [1210000089]


@pytest.mark.parametrize("name", ["year", "month", "day"])
def test_time_transforms_of_dates_are_icebergs(name: str) -> None:
    days = [dt.date(1970, 1, 1) + dt.timedelta(days=d) for d in _DAYS]
    theirs = {"year": ice.YearTransform(), "month": ice.MonthTransform(), "day": ice.DayTransform()}[name]
    expected = [theirs.transform(it.DateType())(d) for d in _DAYS]
    got = _ours(name, days, pa.date32())
    if name == "day":  # ours is a date, Iceberg's the same date as days since the epoch
        got = [(g - dt.date(1970, 1, 1)).days for g in got]
    assert got == expected


@pytest.mark.parametrize("name", ["year", "month", "day", "hour"])
@pytest.mark.parametrize("tz", [None, "UTC", "America/New_York"])
def test_time_transforms_of_timestamps_are_icebergs(name: str, tz: str | None) -> None:
    theirs = {"year": ice.YearTransform(), "month": ice.MonthTransform(), "day": ice.DayTransform(), "hour": ice.HourTransform()}[
        name
    ]
    source = it.TimestampType() if tz is None else it.TimestamptzType()
    expected = [theirs.transform(source)(m) for m in _MICROS]
    array = pa.array(_MICROS, type=pa.int64()).cast(pa.timestamp("us", tz=tz))
    got = parse_transform(name).apply(array).to_pylist()
    if name == "day":
        got = [(g - dt.date(1970, 1, 1)).days for g in got]
    assert got == expected


def test_timestamp_units_are_floored_to_microseconds() -> None:
    ns = pa.array([-1, 0, 86_400_000_000_000 - 1, 86_400_000_000_000], type=pa.int64()).cast(pa.timestamp("ns"))
    assert [(d - dt.date(1970, 1, 1)).days for d in parse_transform("day").apply(ns).to_pylist()] == [-1, 0, 0, 1]
    secs = pa.array([-1, 3600], type=pa.int64()).cast(pa.timestamp("s", tz="UTC"))
    assert parse_transform("hour").apply(secs).to_pylist() == [-1, 1]


def test_truncate_is_icebergs() -> None:
    ints = [v for v in _LONGS if -(2**40) < v < 2**40] + [-1, -10, 9, 10, 11]
    assert _ours("truncate[10]", ints, pa.int64()) == [ice.TruncateTransform(10).transform(it.LongType())(v) for v in ints]
    assert _ours("truncate[3]", _STRINGS, pa.string()) == [
        ice.TruncateTransform(3).transform(it.StringType())(s) for s in _STRINGS
    ]
    blobs = [s.encode() for s in _STRINGS]
    assert _ours("truncate[4]", blobs, pa.binary()) == [ice.TruncateTransform(4).transform(it.BinaryType())(b) for b in blobs]
    decimals = [Decimal("12.34"), Decimal("-0.05"), Decimal("0.00"), Decimal("10.65")]
    assert _ours("truncate[50]", decimals, pa.decimal128(6, 2)) == [
        ice.TruncateTransform(50).transform(it.DecimalType(6, 2))(d) for d in decimals
    ]


@pytest.mark.parametrize("text", ["identity", "year", "month", "day", "hour", "bucket[8]", "truncate[2]"])
def test_nulls_map_to_null(text: str) -> None:
    source = pa.timestamp("us") if text in ("year", "month", "day", "hour") else pa.int64()
    out = parse_transform(text).apply(pa.array([None, None], type=source))
    assert out.null_count == 2
    assert parse_transform(text).apply_scalar(None, source) is None


def test_apply_scalar_agrees_with_apply() -> None:
    stamp = dt.datetime(2024, 2, 29, 23, 59, 59)
    assert parse_transform("day").apply_scalar(stamp, pa.timestamp("us")) == dt.date(2024, 2, 29)
    assert parse_transform("month").apply_scalar(stamp, pa.timestamp("us")) == (2024 - 1970) * 12 + 1
    assert parse_transform("bucket[16]").apply_scalar(34, pa.int64()) == ice.BucketTransform(16).transform(it.LongType())(34)


@pytest.mark.parametrize(
    ("text", "source", "message"),
    [
        ("hour", pa.date32(), "hour does not take a date32"),
        ("day", pa.string(), "day does not take a string"),
        ("bucket[4]", pa.float64(), "bucket does not take a double"),
        ("truncate[4]", pa.date32(), "truncate does not take a date32"),
        ("identity", pa.list_(pa.int64()), "not a primitive column"),
        ("identity", pa.struct([("a", pa.int64())]), "not a primitive column"),
    ],
)
def test_a_transform_refuses_a_type_it_does_not_take(text: str, source: pa.DataType, message: str) -> None:
    with pytest.raises(PartitionSpecError, match=message) as err:
        parse_transform(text).check_source(source, "col")
    assert "col" in err.value.message


@pytest.mark.parametrize("text", ["bucket", "bucket[0]", "truncate[-2]", "day[3]", "weekday", "", "bucket[x]"])
def test_a_bad_transform_text_is_refused(text: str) -> None:
    with pytest.raises(PartitionSpecError):
        parse_transform(text)


def test_texts_and_names_are_icebergs() -> None:
    assert parse_transform("days").text == "day"
    assert parse_transform("bucket[16]").text == "bucket[16]"
    assert parse_transform("day").default_name("ts") == "ts_day"
    assert parse_transform("truncate[4]").default_name("name") == "name_trunc"
    assert parse_transform("bucket[4]").default_name("id") == "id_bucket"
    assert parse_transform("identity").default_name("region") == "region"
