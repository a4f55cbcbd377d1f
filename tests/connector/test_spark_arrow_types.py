"""What a Spark write hands mvtable as Arrow (pure: pyspark's types need no session)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import ArrayType, LongType, MapType, StringType, StructField, StructType, VariantType

from mvtable.connector.spark.arrow_types import write_schema
from mvtable.errors import UnsupportedTypeError


@pytest.mark.parametrize(
    "column",
    [
        VariantType(),
        ArrayType(VariantType()),
        MapType(StringType(), VariantType()),
        StructType([StructField("inner", VariantType())]),
    ],
)
def test_a_variant_anywhere_in_a_column_is_refused_with_what_to_store(column):
    schema = StructType([StructField("id", LongType()), StructField("v", column)])
    with pytest.raises(UnsupportedTypeError, match=r"column 'v' holds Spark's variant.*to_json"):
        write_schema(schema)


def test_other_columns_convert_with_utc_timestamps():
    schema = StructType([StructField("id", LongType(), False), StructField("tags", ArrayType(StringType()))])
    assert write_schema(schema) == pa.schema([pa.field("id", pa.int64(), False), ("tags", pa.list_(pa.string()))])
