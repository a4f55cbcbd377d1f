"""Partition values survive the log's JSON exactly, for every transform and source type."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal

import pyarrow as pa
import pytest

from mvtable.connector.partitions.transforms import parse_transform
from mvtable.connector.partitions.values import decode_value, encode_value
from mvtable.errors import CorruptMetadataError

_CASES = [
    ("identity", pa.int64(), [5, -7, None]),
    ("identity", pa.string(), ["eu", "", None]),
    ("identity", pa.bool_(), [True, False]),
    ("identity", pa.date32(), [dt.date(2024, 2, 29), dt.date(1900, 1, 1)]),
    ("identity", pa.timestamp("us"), [dt.datetime(2024, 1, 1, 5, 6, 7, 8), dt.datetime(1960, 1, 1)]),
    ("identity", pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, 1, 5, tzinfo=dt.timezone.utc)]),
    ("identity", pa.decimal128(10, 2), [Decimal("12.30"), Decimal("-0.01")]),
    ("identity", pa.binary(), [b"\x00\xff", b""]),
    ("identity", pa.float64(), [1.5, math.inf, -math.inf]),
    ("day", pa.timestamp("us"), [dt.datetime(1969, 12, 31, 23), dt.datetime(2024, 5, 1)]),
    ("hour", pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 5, 1, 3, tzinfo=dt.timezone.utc)]),
    ("month", pa.date32(), [dt.date(1969, 1, 1), dt.date(2024, 12, 31)]),
    ("bucket[16]", pa.string(), ["a", "b"]),
    ("truncate[2]", pa.string(), ["abc", "z"]),
    ("truncate[10]", pa.decimal128(6, 2), [Decimal("12.34")]),
]


@pytest.mark.parametrize(("text", "source", "values"), _CASES)
def test_a_partition_value_round_trips_through_json(text: str, source: pa.DataType, values: list) -> None:
    t = parse_transform(text)
    for part in t.apply(pa.array(values, type=source)).to_pylist():
        stored = json.loads(json.dumps(encode_value(part, t, source)))
        assert decode_value(stored, t, source) == part


def test_the_log_form_is_plain_json() -> None:
    day = parse_transform("day")
    assert encode_value(dt.date(1970, 1, 2), day, pa.timestamp("us")) == 1
    assert encode_value(dt.date(2024, 2, 29), parse_transform("identity"), pa.date32()) == "2024-02-29"
    assert encode_value(math.nan, parse_transform("identity"), pa.float64()) == "NaN"
    assert math.isnan(decode_value("NaN", parse_transform("identity"), pa.float64()))


@pytest.mark.parametrize(
    ("stored", "text", "source"),
    [
        ("x", "day", pa.timestamp("us")),
        (True, "bucket[4]", pa.int64()),
        (3, "identity", pa.string()),
        ("1.2", "identity", pa.int64()),
    ],
)
def test_a_value_that_does_not_fit_is_corrupt_metadata(stored: object, text: str, source: pa.DataType) -> None:
    with pytest.raises(CorruptMetadataError, match="does not fit"):
        decode_value(stored, parse_transform(text), source, where="log version 3")
