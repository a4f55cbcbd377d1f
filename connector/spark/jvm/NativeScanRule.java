package io.mvtable.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Literal$;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.execution.datasources.FileFormat;
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
    boolean[] unions = {false};
    LogicalPlan out = plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return nativeTable(p) != null;
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        PinLifetime.queried(nativeTable(p));
        unions[0] |= !nativeTable(p).plan().groups.isEmpty();
        return rewrite(p);
      }
    });
    if (unions[0]) {
      // a read of several file schemas is a union of projections: the query's filters and column
      // pruning must reach each scan through them, and this rule may run after Spark's own passes
      // (User Provided Optimizers), so they run here on what it built
      for (int i = 0; i < 2; i++) {
        out = org.apache.spark.sql.catalyst.optimizer.PushDownPredicates$.MODULE$.apply(out);
        out = org.apache.spark.sql.catalyst.optimizer.ColumnPruning$.MODULE$.apply(out);
        out = org.apache.spark.sql.catalyst.optimizer.CollapseProject$.MODULE$.apply(out);
      }
    }
    return out;
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
    if (plan.groups.isEmpty()) {
      return new Project(seq(visible), scan(plan, plan.files, full));
    }
    return evolved(plan, full, visible);
  }

  /**
   * A table with files of older schemas: one scan per file schema, each projected to the table's
   * columns by the expressions Python planned (a rename is an alias, a widened column a cast, a
   * column the files lack a typed null, all matched by field id), unioned. Spark's Parquet reader
   * matches columns by name, so no scan reads one schema's files with another's columns.
   */
  private static LogicalPlan evolved(NativePlan plan, List<AttributeReference> full, List<NamedExpression> visible) {
    Map<Integer, List<NativePlan.FileEntry>> byGroup = new java.util.TreeMap<>();
    for (NativePlan.FileEntry f : plan.files) {
      byGroup.computeIfAbsent(f.group, g -> new ArrayList<>()).add(f);
    }
    org.apache.spark.sql.classic.SparkSession session = org.apache.spark.sql.classic.SparkSession$.MODULE$.active();
    List<LogicalPlan> children = new ArrayList<>();
    for (Map.Entry<Integer, List<NativePlan.FileEntry>> e : byGroup.entrySet()) {
      List<String> exprs = new ArrayList<>();
      List<AttributeReference> output = new ArrayList<>();
      if (e.getKey() < 0) {  // the table's own schema: read as it is
        for (AttributeReference a : full) {
          output.add((AttributeReference) a.newInstance());
        }
        for (NamedExpression v : visible) {
          exprs.add(quote(v.name()));
        }
      } else {
        NativePlan.SchemaGroup group = plan.groups.get(e.getKey());
        for (StructField f : group.schema.fields()) {
          output.add(DataTypeUtils.toAttribute(f));
        }
        for (AttributeReference a : full) {  // the row address columns: filled by the scan, not read
          if (!group.columns.containsKey(a.name())) {
            output.add((AttributeReference) a.newInstance());
          }
        }
        for (NamedExpression v : visible) {
          exprs.add(group.columns.getOrDefault(v.name(), quote(v.name())));
        }
      }
      LogicalPlan scan = scan(plan, e.getValue(), output);
      children.add(org.apache.spark.sql.classic.Dataset.ofRows(session, scan)
          .selectExpr(exprs.toArray(new String[0])).queryExecution().analyzed());
    }
    LogicalPlan union = children.size() == 1 ? children.get(0) : new Union(seq(children), false, false);
    List<Attribute> unioned = new ArrayList<>(CollectionConverters.asJava(union.output()));
    List<NamedExpression> out = new ArrayList<>();
    for (int i = 0; i < visible.size(); i++) {  // under the ids the rest of the query knows them by
      NamedExpression v = visible.get(i);
      out.add(new Alias(unioned.get(i), v.name(), v.exprId(), v.qualifier(), scala.Option.apply(v.metadata()),
          seq(new ArrayList<String>())));
    }
    return new Project(seq(out), union);
  }

  /**
   * {@code Filter(mask = 0, LogicalRelation(files))}, or the relation alone when no file has
   * deletes and no row address is read; {@code output} are the data columns, in the data schema's order.
   */
  private static LogicalPlan scan(NativePlan plan, List<NativePlan.FileEntry> files, List<AttributeReference> output) {
    List<AttributeReference> full = new ArrayList<>(output);
    StructType dataSchema = new StructType();
    for (AttributeReference a : full) {
      dataSchema = dataSchema.add(new StructField(a.name(), a.dataType(), a.nullable(), a.metadata()));
    }
    Map<String, String> options = new HashMap<>();
    // every page is checked against its CRC, as read_native does (Spark trusts footers: Python checked them)
    options.put("parquet.page.verify-checksum.enabled", "true");
    FileFormat format;
    AttributeReference mask = null;
    if (NativePlan.anyDeletes(files) || plan.rowAddress) {
      String maskName = unusedName("_mv_deleted", dataSchema);
      // never null: Spark then infers no isnotnull() filter on it
      StructField maskField = new StructField(maskName, DataTypes.ByteType, false, Metadata.empty());
      mask = DataTypeUtils.toAttribute(maskField);
      dataSchema = dataSchema.add(maskField);
      full.add(mask);
      options.put(MaskedParquetFileFormat.MASK_COLUMN_OPTION, maskName);
      options.put(MaskedParquetFileFormat.DVS_OPTION, NativePlan.dvLines(files));
      if (plan.rowAddress) {  // filled from each row's position and its file (see NativePlan)
        options.put(MaskedParquetFileFormat.ROW_COLUMN_OPTION, ROW_ADDRESS_ROW);
        options.put(MaskedParquetFileFormat.SEGMENT_COLUMN_OPTION, ROW_ADDRESS_SEGMENT);
        options.put(MaskedParquetFileFormat.SEGMENTS_OPTION, NativePlan.segmentLines(files));
      }
      format = new MaskedParquetFileFormat();
    } else {
      format = new ParquetFileFormat();
    }
    Set<String> notPartition = Set.of(ROW_ADDRESS_SEGMENT, ROW_ADDRESS_ROW, mask == null ? "" : mask.name());
    LogicalPlan scan = PlannedFileIndex.relation(plan, files, full, format, options, notPartition);
    if (mask != null) {
      scan = new Filter(new EqualTo(mask, Literal$.MODULE$.create((byte) 0, DataTypes.ByteType)), scan);
    }
    return scan;
  }

  private static String quote(String name) {
    return "`" + name.replace("`", "``") + "`";
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
