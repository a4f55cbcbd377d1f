package io.mvtable.spark;

import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The Python data source's table plus the scan plan Python made for it. It behaves as
 * PythonTable, so a session without {@link NativeScanRule} still reads it correctly through
 * Python; the rule recognises it and plans a Parquet file scan instead.
 */
public class NativeTable extends PythonTable {
  private final NativePlan plan;
  private final PythonDataSourceV2 provider;

  public NativeTable(PythonDataSourceV2 ds, String shortName, StructType schema, NativePlan plan) {
    super(ds, shortName, schema);
    this.plan = plan;
    this.provider = ds;
    plan.provider = ds;
    plan.sourceName = shortName;
  }

  PythonDataSourceV2 provider() {
    return provider;
  }

  public NativePlan plan() {
    return plan;
  }

  /** No filter pushdown into Python: the rule must find every filter still in the plan. */
  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    ScanBuilder python = super.newScanBuilder(options);
    return python::build;
  }
}
