"""Parsing ``partition_by`` against a table's schema, and the typed errors of a bad spec."""

from __future__ import annotations

import pyarrow as pa
import pytest

from mvtable.connector.partitions.spec import parse_partition_by, parse_partition_field, spec_columns
from mvtable.connector.schema import schema_to_json
from mvtable.connector.schema_evolution.field_ids import fresh_ids
from mvtable.errors import PartitionSpecError

_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("region", pa.string()),
        ("day", pa.date32()),
        ("price", pa.float64()),
        ("tags", pa.list_(pa.string())),
        ("point", pa.struct([("x", pa.int32())])),
    ]
)


def _doc() -> dict:
    return fresh_ids(schema_to_json(_SCHEMA))[0]


def test_each_field_names_its_column_by_field_id() -> None:
    spec = parse_partition_by(["day(ts)", "region", "bucket(16, id)", "truncate(2, region)", "years(day)"], _doc())
    assert spec.spec_id == 1
    assert [(f.name, f.transform, f.field_id) for f in spec.fields] == [
        ("ts_day", "day", 1000),
        ("region", "identity", 1001),
        ("id_bucket", "bucket[16]", 1002),
        ("region_trunc", "truncate[2]", 1003),
        ("day_year", "year", 1004),
    ]
    ids = {f["name"]: f["metadata"]["parquet.field.id"] for f in _doc()["fields"]}
    assert [f.source_id for f in spec.fields] == [ids["ts"], ids["region"], ids["id"], ids["region"], ids["day"]]
    assert [column for _, column, _ in spec_columns(spec, _doc())] == ["ts", "region", "id", "region", "day"]


def test_spellings() -> None:
    assert parse_partition_field("`region`")[1] == "region"
    assert parse_partition_field(" bucket( 8 , id ) ")[0].text == "bucket[8]"
    assert parse_partition_by(["REGION"], _doc()).fields[0].name == "region"  # Spark's case-insensitive names


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["nope"], "no column 'nope'"),
        (["day(nope)"], "no column 'nope'"),
        (["point.x"], "nested field"),
        (["tags"], "not a primitive column"),
        (["hour(day)"], "hour does not take a date32"),
        (["bucket(4, price)"], "bucket does not take a double"),
        (["day(region)"], "day does not take a string"),
        (["region", "region"], "given twice"),
        (["day(ts)", "hour(ts)"], "redundant"),
        (["bucket(0, id)"], "positive number of buckets"),
        (["truncate(region)"], "positive width"),
        (["weekday(ts)"], "unknown partition transform"),
        (["day(ts"], "cannot read the partition field"),
        ("day(ts)", "takes a list"),
        ([""], "must be a column name"),
    ],
)
def test_a_bad_spec_is_a_typed_error_naming_the_field(items: object, message: str) -> None:
    with pytest.raises(PartitionSpecError, match=message):
        parse_partition_by(items, _doc())  # type: ignore[arg-type]
