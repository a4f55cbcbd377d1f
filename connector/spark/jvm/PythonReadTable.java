package io.mvtable.spark;

import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Python data source's table where Python made no scan plan because Spark never asked it
 * for the schema: a read with a user-given schema ({@code spark.read.schema(...)}). Writes go
 * through it unchanged; a read says once why it is not on the Parquet scan.
 */
public class PythonReadTable extends PythonTable {
  public PythonReadTable(PythonDataSourceV2 ds, String shortName, StructType schema) {
    super(ds, shortName, schema);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    NativeScanRule.fallback("a user-given schema (spark.read.schema) or a stream with one");
    return super.newScanBuilder(options);
  }
}
