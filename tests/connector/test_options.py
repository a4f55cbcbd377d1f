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


@pytest.mark.parametrize(
    "opts,check,message",
    [
        ({"maxRowsPerTrigger": "5"}, "for_batch", "maxRowsPerTrigger: for spark.readStream only"),
        ({"startingVersion": "2"}, "for_batch", "need readChangeFeed=true"),
        ({"readChangeFeed": "true"}, "for_batch", "needs startingVersion or startingTimestamp"),
        ({"readChangeFeed": "true", "startingVersion": "latest"}, "for_batch", "only applies to spark.readStream"),
        ({"readChangeFeed": "true", "startingVersion": "1", "versionAsOf": "1"}, "for_batch", "versionAsOf cannot be used"),
        ({"endingVersion": "3"}, "for_stream", "endingVersion does not apply"),
        ({"withRowAddress": "true"}, "for_stream", "withRowAddress cannot be used with spark.readStream"),
        ({"startingVersion": "x"}, "for_stream", "neither a version number nor 'latest'"),
        ({"startingVersion": "1", "startingTimestamp": "2026-01-01"}, "for_stream", "cannot be used together"),
        ({"maxBytesPerTrigger": "0"}, "for_stream", "maxBytesPerTrigger"),
    ],
)
def test_stream_and_change_feed_options(opts, check, message):
    with pytest.raises(InvalidOptionError, match=message):
        getattr(read_options({"path": "/t", **opts}), check)()


def test_stream_options_parse():
    o = read_options(
        {"path": "/t", "startingversion": "LATEST", "maxrowspertrigger": "10", "skipchangecommits": "true"}
    ).for_stream()
    assert o.starting_version == "latest" and o.starting_version_number is None
    assert o.max_rows_per_trigger == 10 and o.skip_change_commits is True
    assert read_options({"path": "/t", "startingVersion": "7"}).for_stream().starting_version_number == 7


def test_stream_write_options():
    from mvtable.connector.options import stream_write_options

    o = stream_write_options({"path": "/t", "checkpointlocation": "/c", "property.rowgrouprows": "5"})
    assert o.checkpoint_location == "/c" and o.properties == {"rowGroupRows": "5"}
    assert stream_write_options({"path": "/t", "txnAppId": "etl-1"}).txn_app_id == "etl-1"
    with pytest.raises(InvalidOptionError, match="checkpointLocation.*txnAppId"):
        stream_write_options({"path": "/t"})
    with pytest.raises(InvalidOptionError, match="unknown option 'consistentPush'"):
        stream_write_options({"path": "/t", "txnAppId": "a", "consistentPush": "true"})
