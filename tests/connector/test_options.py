"""Reader/writer options: typed errors for unknown, malformed and conflicting options."""

from __future__ import annotations

import pytest

from mvtable.connector.options import read_options, write_options
from mvtable.errors import InvalidOptionError


def test_read_options_parse_strings_case_insensitively():
    o = read_options({"path": "/t", "VERSIONASOF": "3", "columns": "a, b", "withrowaddress": "TRUE", "storage.key": "k"})
    assert o.version_as_of == 3 and o.columns == ("a", "b") and o.with_row_address is True
    assert o.storage_options == {"key": "k"}


@pytest.mark.parametrize(
    "opts,message",
    [
        ({"path": "/t", "versionAsOf": "x"}, "versionAsOf"),
        ({"path": "/t", "versionAsOf": "-1"}, "versionAsOf"),
        ({"path": "/t", "versionAsOf": "1", "timestampAsOf": "2026-01-01"}, "cannot be used together"),
        ({"path": "/t", "versionAsof2": "1"}, "unknown option 'versionAsof2'"),
        ({"path": "/t", "withRowAddress": "maybe"}, "not a boolean"),
        ({"path": "/t", "columns": " , "}, "columns"),
        ({"versionAsOf": "1"}, "no table path"),
        ({"path": "/t", "property.rowGroupRows": "5"}, "unknown option"),
    ],
)
def test_bad_read_options(opts, message):
    with pytest.raises(InvalidOptionError, match=message):
        read_options(opts)


def test_write_options():
    o = write_options({"path": "/t", "consistentPush": "true", "publish": "false", "property.rowGroupRows": "7"})
    assert o.consistent_push and not o.publish and o.properties == {"rowGroupRows": "7"}
    with pytest.raises(InvalidOptionError, match="unknown operation"):
        write_options({"path": "/t", "operation": "merge"})
    with pytest.raises(InvalidOptionError, match="readVersion"):
        write_options({"path": "/t", "readVersion": "soon"})
