package io.mvtable.spark;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.StructType;

/**
 * A DataFrame over files Python planned, for {@code read_native} and {@code create_view}: Spark's
 * Parquet scan (or {@link MaskedParquetFileFormat} with the deletion vectors) on a
 * {@link PlannedFileIndex}, so a {@code WHERE} written on the result skips the files of
 * partitions it rules out, as {@code format("mvtable")} does. The caller holds the pin: the plan
 * is marked so that {@link PinLifetime} leaves it alone.
 */
public final class PlannedScan {
  private PlannedScan() {}

  /**
   * The rows of the plan's files read with {@code schema}; with {@code maskColumn} (the files
   * all have deletes) that column is added and filled by the mask, and the caller filters it.
   */
  public static Dataset<Row> frame(SparkSession session, String planJson, StructType schema, String maskColumn) {
    NativePlan plan = NativePlan.parse(planJson);
    if (!plan.nativeRead) {
      throw new IllegalStateException("mvtable: not a scan plan: " + plan.reason);
    }
    plan.pinnedOutside = true;
    Map<String, String> options = new HashMap<>();
    options.put("parquet.page.verify-checksum.enabled", "true");
    StructType dataSchema = schema;
    FileFormat format;
    if (maskColumn != null) {
      // never null: Spark then infers no isnotnull() filter on it (as NativeScanRule)
      dataSchema = schema.add(maskColumn, org.apache.spark.sql.types.DataTypes.ByteType, false);
      options.put(MaskedParquetFileFormat.MASK_COLUMN_OPTION, maskColumn);
      options.put(MaskedParquetFileFormat.DVS_OPTION, plan.dvLines());
      format = new MaskedParquetFileFormat();
    } else {
      format = new ParquetFileFormat();
    }
    java.util.List<org.apache.spark.sql.catalyst.expressions.AttributeReference> output = new java.util.ArrayList<>();
    for (org.apache.spark.sql.types.StructField f : dataSchema.fields()) {
      output.add(DataTypeUtils.toAttribute(f));
    }
    LogicalPlan scan = PlannedFileIndex.relation(plan, plan.files, output, format, options,
        java.util.Set.of(maskColumn == null ? "" : maskColumn));
    return Dataset.ofRows(session, scan);
  }
}
