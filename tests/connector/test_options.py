"""Reader/writer options: typed errors for unknown, malformed and conflicting options."""

from __future__ import annotations

import pytest

from mvtable.connector.options import read_options, stream_write_options, write_options
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
        ({"path": "/t", "withRowAddress": "yes"}, "withRowAddress: 'yes' is not a boolean; use true or false"),
        ({"path": "/t", "withRowAddress": "1"}, "withRowAddress: '1' is not a boolean"),
        ({"path": "/t", "readChangeFeed": "0"}, "readChangeFeed: '0' is not a boolean"),
        ({"path": "/t", "timestampAsOf": "99999999999999999999"}, "timestampAsOf: .* outside years 1 to 9999"),
        ({"path": "/t", "startingTimestamp": "nope"}, "^\\[MVTABLE_INVALID_OPTION\\] startingTimestamp: cannot read 'nope'"),
        (
            {"path": "/t", "startingTimestamp": "253402300800000"},
            "^\\[MVTABLE_INVALID_OPTION\\] startingTimestamp: .* outside years 1 to 9999",
        ),
        ({"path": "/t", "paths": '["/t","/t"]'}, r"one table per read; give the path once"),
        # CREATE TABLE … USING mvtable [LOCATION …] hands the reader these catalog options
        ({"path": "/t", "owner": "root", "location": "/t", "provider": "mvtable"}, "catalog tables are not supported"),
    ],
)
def test_bad_read_options(opts, message):
    with pytest.raises(InvalidOptionError, match=message):
        read_options(opts)


def test_write_options():
    o = write_options({"path": "/t", "consistentPush": "true", "publish": "false", "property.rowGroupRows": "7"})
    assert o.consistent_push and not o.publish and o.properties == {"rowGroupRows": "7"}
    # Spark lower-cases option keys; both spellings reach the stored camelCase name
    assert write_options({"path": "/t", "property.row_group_rows": "7"}).properties == {"rowGroupRows": "7"}
    assert write_options({"path": "/t", "property.rowgrouprows": "7"}).properties == {"rowGroupRows": "7"}
    with pytest.raises(InvalidOptionError, match="unknown operation"):
        write_options({"path": "/t", "operation": "merge"})
    with pytest.raises(InvalidOptionError, match="readVersion"):
        write_options({"path": "/t", "readVersion": "soon"})


def test_boolean_options_take_true_or_false_in_any_case():
    o = read_options({"path": "/t", "withRowAddress": "TRUE", "readChangeFeed": " False "})
    assert o.with_row_address is True and o.read_change_feed is False
    assert write_options({"path": "/t", "publish": "fAlSe"}).publish is False


@pytest.mark.parametrize("operation", [None, "write", "upsert"])
@pytest.mark.parametrize("option", [{"tag": "nightly"}, {"readVersion": "3"}])
def test_delete_options_refused_on_other_operations(operation, option):
    opts = {"path": "/t", **option, **({"operation": operation} if operation else {})}
    with pytest.raises(InvalidOptionError, match=f"{next(iter(option))} apply to operation=delete only"):
        write_options(opts)


def test_delete_options_on_delete():
    o = write_options({"path": "/t", "operation": "delete", "tag": "nightly", "readVersion": "3"})
    assert o.tag == "nightly" and o.read_version == 3


def test_a_write_without_path_names_catalog_tables():
    """CREATE TABLE … USING mvtable AS SELECT reaches the writer with no options at all."""
    with pytest.raises(InvalidOptionError, match="no table path.*catalog tables are not supported.*CREATE TEMPORARY VIEW"):
        write_options({})


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


def test_spark_partition_columns_are_identity_fields():
    """``df.write.partitionBy(...)`` arrives as ``writerPartitionBy`` (set by ``mvtable.spark_save``)."""
    opts = write_options({"path": "/t", "writerPartitionBy": '["region", "a,b"]'})
    assert opts.partition_by == ("`region`", "`a,b`")  # a comma in a name stays in its field
    same = write_options({"path": "/t", "writerPartitionBy": '["Region"]', "partitionBy": "region"})
    assert same.partition_by == ("region",)
    with pytest.raises(InvalidOptionError, match=r"partitionBy\('region'\) and the partitionBy option 'day\(ts\)' differ"):
        write_options({"path": "/t", "writerPartitionBy": '["region"]', "partitionBy": "day(ts)"})
    with pytest.raises(InvalidOptionError, match="not a JSON list of column names"):
        write_options({"path": "/t", "writerPartitionBy": "region"})
    streamed = stream_write_options({"path": "/t", "checkpointLocation": "/cp", "writerPartitionBy": '["region"]'})
    assert streamed.partition_by == ("`region`",)
    with pytest.raises(InvalidOptionError, match="differ"):
        stream_write_options(
            {"path": "/t", "checkpointLocation": "/cp", "writerPartitionBy": '["region"]', "partitionBy": "day(ts)"}
        )
