package io.mvtable.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * Replaces the relation of an mvtable read that Python planned ({@link NativeTable}) with
 * {@code Project(output, Filter(mask = 0, LogicalRelation(HadoopFsRelation(planned files,
 * MaskedParquetFileFormat))))}. Spark's FileSourceStrategy then plans a file scan with column
 * pruning, filter pushdown, file splitting, the vectorized reader and the files' real size in
 * its statistics. Pure JVM: no Python call per query, and the plan (so the version) is the one
 * fixed when the DataFrame or view was made.
 *
 * <p>Installed by {@code spark.sql.extensions=io.mvtable.spark.MvtableExtensions} (operator
 * optimization batch) or, on first use, into the session's {@code experimental.extraOptimizations}
 * ("User Provided Optimizers", after Spark's own V2 push-down: hence the match on
 * DataSourceV2ScanRelation as well).
 */
public final class NativeScanRule extends Rule<LogicalPlan> {
  /** {@code spark.mvtable.nativeScan=false}: every read goes through the Python source. */
  public static final String SWITCH_CONF = "spark.mvtable.nativeScan";

  /** The row address columns of a withRowAddress read (mvtable.connector.segments). */
  static final String ROW_ADDRESS_SEGMENT = "_mv_segment";
  static final String ROW_ADDRESS_ROW = "_mv_row";

  private static final Logger LOG = LoggerFactory.getLogger("mvtable");
  private static final Set<String> FALLBACKS = new LinkedHashSet<>();
  private static final Object INSTALL_LOCK = new Object();

  public static boolean enabled() {
    return !"false".equalsIgnoreCase(SparkSession.active().conf().get(SWITCH_CONF, "true").trim());
  }

  /** Logs, once per process and reason, that a read goes through the Python data source. */
  public static void fallback(String reason) {
    synchronized (FALLBACKS) {
      if (FALLBACKS.add(reason)) {
        LOG.warn("read through the Python data source (slower, same rows): {}", reason);
      }
    }
  }

  /** The reasons logged so far, in order. */
  public static String[] fallbacks() {
    synchronized (FALLBACKS) {
      return FALLBACKS.toArray(new String[0]);
    }
  }

  /** How many pins this process renewed ({@link PinRenewal}). */
  public static long pinRenewals() {
    return PinRenewal.renewals();
  }

  /** Adds this rule to the active session's experimental optimizations, unless it is there. */
  public static void installInActiveSession() {
    org.apache.spark.sql.classic.SparkSession session =
        org.apache.spark.sql.classic.SparkSession$.MODULE$.active();
    synchronized (INSTALL_LOCK) {
      Seq<Rule<LogicalPlan>> rules = session.experimental().extraOptimizations();
      if (rules.exists(r -> r instanceof NativeScanRule) || extensionInstalled(session)) {
        return;
      }
      List<Rule<LogicalPlan>> list = new ArrayList<>(CollectionConverters.asJava(rules));
      list.add(new NativeScanRule());
      session.experimental().extraOptimizations_$eq(seq(list));
    }
  }

  private static boolean extensionInstalled(SparkSession session) {
    String ext = session.sparkContext().conf().get("spark.sql.extensions", "");
    return ext.contains(MvtableExtensions.class.getName());
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return nativeTable(p) != null;
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        PinLifetime.queried(nativeTable(p));
        return rewrite(p);
      }
    });
  }

  private static DataSourceV2Relation relationOf(LogicalPlan p) {
    if (p instanceof DataSourceV2Relation) {
      return (DataSourceV2Relation) p;
    }
    if (p instanceof DataSourceV2ScanRelation) {
      return ((DataSourceV2ScanRelation) p).relation();
    }
    return null;
  }

  static NativeTable nativeTable(LogicalPlan p) {
    DataSourceV2Relation r = relationOf(p);
    return r != null && r.table() instanceof NativeTable ? (NativeTable) r.table() : null;
  }

  private static LogicalPlan rewrite(LogicalPlan p) {
    NativePlan plan = nativeTable(p).plan();
    DataSourceV2Relation r = relationOf(p);
    List<AttributeReference> full = new ArrayList<>(CollectionConverters.asJava(r.output()));
    List<NamedExpression> visible = new ArrayList<>();
    for (Object a : CollectionConverters.asJava(p.output())) {
      visible.add((NamedExpression) a);
    }
    StructType dataSchema = new StructType();
    for (AttributeReference a : full) {
      dataSchema = dataSchema.add(new StructField(a.name(), a.dataType(), a.nullable(), a.metadata()));
    }
    Map<String, String> options = new HashMap<>();
    // every page is checked against its CRC, as read_native does (Spark trusts footers: Python checked them)
    options.put("parquet.page.verify-checksum.enabled", "true");
    FileFormat format;
    AttributeReference mask = null;
    if (plan.anyDeletes() || plan.rowAddress) {
      String maskName = unusedName("_mv_deleted", dataSchema);
      // never null: Spark then infers no isnotnull() filter on it
      StructField maskField = new StructField(maskName, DataTypes.ByteType, false, Metadata.empty());
      mask = DataTypeUtils.toAttribute(maskField);
      dataSchema = dataSchema.add(maskField);
      full.add(mask);
      options.put(MaskedParquetFileFormat.MASK_COLUMN_OPTION, maskName);
      options.put(MaskedParquetFileFormat.DVS_OPTION, plan.dvLines());
      if (plan.rowAddress) {  // filled from each row's position and its file (see NativePlan)
        options.put(MaskedParquetFileFormat.ROW_COLUMN_OPTION, ROW_ADDRESS_ROW);
        options.put(MaskedParquetFileFormat.SEGMENT_COLUMN_OPTION, ROW_ADDRESS_SEGMENT);
        options.put(MaskedParquetFileFormat.SEGMENTS_OPTION, plan.segmentLines());
      }
      format = new MaskedParquetFileFormat();
    } else {
      format = new ParquetFileFormat();
    }
    scala.collection.immutable.Map<String, String> scalaOptions =
        scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
    HadoopFsRelation fs = new HadoopFsRelation(new PlannedFileIndex(plan), new StructType(), dataSchema,
        scala.Option.empty(), format, scalaOptions, SparkSession.active());
    LogicalPlan scan = new LogicalRelation(fs, seq(full), scala.Option.empty(), false, scala.Option.empty());
    if (mask != null) {
      scan = new Filter(new EqualTo(mask, Literal$.MODULE$.create((byte) 0, DataTypes.ByteType)), scan);
    }
    return new Project(seq(visible), scan);
  }

  @SuppressWarnings("unchecked")
  static <T> Seq<T> seq(List<T> list) {
    return (Seq<T>) CollectionConverters.asScala(list).toSeq();
  }

  private static String unusedName(String base, StructType schema) {
    Set<String> taken = new HashSet<>();
    for (String n : schema.fieldNames()) {
      taken.add(n.toLowerCase());
    }
    while (taken.contains(base.toLowerCase())) {
      base += "_";
    }
    return base;
  }
}
