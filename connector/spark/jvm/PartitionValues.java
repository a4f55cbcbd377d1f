package io.mvtable.spark;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * The columns whose value every file's partition fixes, served to Spark as partition values.
 *
 * <p>A file of an identity partition on {@code region}, of a {@code day} partition on a date,
 * or of a null partition value holds one value of that column in every row. Iceberg's readers
 * give such columns from the partition rather than the file, and so does a Hive table from its
 * folder names; so does this: Spark's Parquet reader then neither decodes the column nor tests a
 * filter on it per row, and a filter on it drops whole files before any is opened
 * ({@link PlannedFileIndex#listFiles}). A column is served so only when every file of the scan
 * fixes it (a file of an older, coarser spec does not: the column is then read from the files).
 */
final class PartitionValues {

  /** The fixed columns, in the data schema's order. */
  final StructType schema;
  /** The files' indexes (in the order of the entries) grouped by their values of those columns (Spark's internal values). */
  final Map<List<Object>, List<Integer>> groups = new LinkedHashMap<>();

  private PartitionValues(StructType schema, List<List<Object>> values) {
    this.schema = schema;
    for (int i = 0; i < values.size(); i++) {
      groups.computeIfAbsent(values.get(i), k -> new ArrayList<>()).add(i);
    }
  }

  boolean isEmpty() {
    return schema.fields().length == 0;
  }

  /** No column served: {@code files} files, all of the one (empty) partition. */
  private static PartitionValues none(int files) {
    return new PartitionValues(new StructType(), java.util.Collections.nCopies(files, List.of()));
  }

  /** The columns of {@code dataSchema} (less {@code skipped}) that each of {@code entries}' partitions fixes. */
  static PartitionValues of(StructType dataSchema, List<NativePlan.FileEntry> entries, Set<String> skipped) {
    for (NativePlan.FileEntry f : entries) {
      if (f.bounds == null || f.group >= 0) {  // unpartitioned, or an older schema's names
        return none(entries.size());
      }
    }
    List<StructField> fixed = new ArrayList<>();
    List<Object[]> columns = new ArrayList<>();
    for (StructField field : dataSchema.fields()) {
      if (skipped.contains(field.name())) {
        continue;
      }
      Object[] column = new Object[entries.size()];
      boolean all = true;
      for (int i = 0; i < entries.size() && all; i++) {
        column[i] = entries.get(i).bounds.fixedValue(field.name(), field.dataType());
        all = column[i] != PartitionBounds.NOT_FIXED;
      }
      if (all) {
        fixed.add(field);
        columns.add(column);
      }
    }
    if (fixed.isEmpty()) {
      return none(entries.size());
    }
    List<List<Object>> values = new ArrayList<>();
    for (int i = 0; i < entries.size(); i++) {
      Object[] row = new Object[fixed.size()];
      for (int c = 0; c < row.length; c++) {
        row[c] = columns.get(c)[i];
      }
      values.add(Arrays.asList(row));
    }
    return new PartitionValues(new StructType(fixed.toArray(new StructField[0])), values);
  }

  static InternalRow row(List<Object> values) {
    return new GenericInternalRow(values.toArray());
  }

  /** Whether {@code name} is one of the served columns. */
  boolean serves(String name) {
    for (StructField f : schema.fields()) {
      if (f.name().equals(name)) {
        return true;
      }
    }
    return false;
  }

  /** A whole number as Spark holds it in a column of an integral, date or timestamp type, or NOT_FIXED. */
  static Object integral(BigDecimal v, DataType type) {
    try {
      if (type instanceof DateType || type instanceof IntegerType) {
        return v.intValueExact();
      }
      if (type instanceof LongType || type instanceof TimestampType || type instanceof TimestampNTZType) {
        return v.longValueExact();
      }
      if (type instanceof ShortType) {
        return v.shortValueExact();
      }
      if (type instanceof ByteType) {
        return v.byteValueExact();
      }
    } catch (ArithmeticException e) {
      return PartitionBounds.NOT_FIXED;
    }
    return PartitionBounds.NOT_FIXED;
  }
}
