"""The typed parameters of the public API: ``WriteMode`` (or its name), ``Timestamp``, ``Keys``."""

from __future__ import annotations

import datetime as dt

import pytest

import mvtable
from mvtable.connector.parameters import WriteMode
from mvtable.errors import InvalidOptionError
from mvtable.lineage.enums import Operation

from .conftest import orders


def test_a_write_mode_is_an_enum_or_its_name(small_table):
    assert small_table.write(orders(5000, 5), mode=WriteMode.APPEND).operation == Operation.APPEND
    assert small_table.write(orders(6000, 5), mode="Overwrite").operation == Operation.OVERWRITE
    assert small_table.to_arrow().num_rows == 5
    assert small_table.write(orders(7000, 5)).operation == Operation.APPEND  # append by default
    assert WriteMode("append") is WriteMode.APPEND and WriteMode.APPEND == "append"
    assert f"{WriteMode.OVERWRITE}" == str(WriteMode.OVERWRITE) == "overwrite"
    assert mvtable.WriteMode is WriteMode


@pytest.mark.parametrize("mode", ["upsert", "", 1, None])
def test_an_unknown_write_mode_is_a_typed_error_naming_the_choices(small_table, mode):
    with pytest.raises(InvalidOptionError, match="'append', 'overwrite'"):
        small_table.write(orders(5000, 5), mode=mode)
    assert small_table.version == 2  # nothing committed


def test_a_timestamp_is_a_datetime_a_string_or_epoch_milliseconds(small_table):
    at = small_table.history()[1].timestamp
    ms = int(at.timestamp() * 1000)
    for ts in (at, at.isoformat(), ms, str(ms)):
        assert small_table.snapshot(timestamp=ts).version == 1
        assert small_table.to_arrow(timestamp=ts).num_rows == 1000
    with pytest.raises(InvalidOptionError, match="timestamp"):
        small_table.snapshot(timestamp=dt.timedelta(1))  # type: ignore[arg-type]


def test_the_aliases_are_exported_for_users_annotations():
    assert mvtable.Timestamp.__args__ == (dt.datetime, dt.date, str, int)
    assert mvtable.Keys is not None
