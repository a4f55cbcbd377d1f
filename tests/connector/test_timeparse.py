"""Timestamps of ``timestampAsOf``/``startingTimestamp``: forms, bounds, the option named."""

from __future__ import annotations

import datetime as dt

import pytest

from mvtable.connector.timeparse import parse_timestamp_ms
from mvtable.errors import InvalidOptionError

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    "value,ms",
    [
        ("1970-01-01 00:00:01", 1000),
        ("1970-01-01T01:00:00+01:00", 0),
        (dt.date(1970, 1, 2), 86_400_000),
        ("253402300799999", 253402300799999),  # the last millisecond of 9999
        (dt.datetime(1, 1, 1, tzinfo=UTC), -62135596800000),
    ],
)
def test_parses(value, ms):
    assert parse_timestamp_ms(value) == ms


@pytest.mark.parametrize("value", ["99999999999999999999", "253402300800000", 10**20, 1e30, -(10**15)])
def test_refuses_instants_past_year_9999_or_before_year_1(value):
    with pytest.raises(InvalidOptionError, match=r"timestampAsOf: .* outside years 1 to 9999"):
        parse_timestamp_ms(value)


def test_names_the_option_given():
    with pytest.raises(InvalidOptionError, match=r"^\[MVTABLE_INVALID_OPTION\] startingTimestamp: cannot read 'nope'"):
        parse_timestamp_ms("nope", option="startingTimestamp")
    with pytest.raises(InvalidOptionError, match=r"^\[MVTABLE_INVALID_OPTION\] timestampAsOf: True is not a timestamp"):
        parse_timestamp_ms(True)
