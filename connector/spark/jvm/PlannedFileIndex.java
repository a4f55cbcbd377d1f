package io.mvtable.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BasePredicate;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Predicate$;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * The files Python planned, with the sizes the table's log records: Spark neither lists a
 * directory nor stats a file, and its statistics (broadcast joins) see the real size. A
 * query's filters drop the files of partitions they rule out ({@link #listFiles}), and the
 * columns every file's partition fixes are Spark partition columns ({@link PartitionValues}).
 */
public final class PlannedFileIndex implements FileIndex {
  private static final long BLOCK_SIZE = 128L << 20;

  private final Path root;
  private final List<FileStatusWithMetadata> files = new ArrayList<>();
  private final String[] paths;
  private final long bytes;
  private final long version;
  private final NativePlan plan;
  private final List<NativePlan.FileEntry> entries;
  private final PartitionValues partitions;

  /**
   * {@code entries}, some of {@code plan}'s files (one schema group's: {@link NativeScanRule}),
   * with the values of the columns their partitions fix (none served: every file in one empty partition).
   */
  PlannedFileIndex(NativePlan plan, List<NativePlan.FileEntry> entries, PartitionValues partitions) {
    this.plan = plan;
    this.entries = entries;
    this.partitions = partitions;
    root = new Path(plan.root);
    version = plan.version;
    long total = 0;
    paths = new String[entries.size()];
    int i = 0;
    for (NativePlan.FileEntry f : entries) {
      Path p = new Path(f.path);
      files.add(new FileStatusWithMetadata(new FileStatus(f.size, false, 1, BLOCK_SIZE, 0L, p),
          scala.collection.immutable.Map$.MODULE$.empty()));
      paths[i++] = f.path;
      total += f.size;
    }
    bytes = total;
  }

  /**
   * {@code LogicalRelation(HadoopFsRelation(files))} with {@code output} as its columns, in that
   * order. The columns every file's partition fixes (never those of {@code notPartition}: the mask
   * and row address columns) are the relation's partition columns, which Spark puts last; a
   * projection then gives {@code output}'s order back.
   */
  static LogicalPlan relation(NativePlan plan, List<NativePlan.FileEntry> files, List<AttributeReference> output,
      FileFormat format, Map<String, String> options, Set<String> notPartition) {
    StructType schema = new StructType();
    for (AttributeReference a : output) {
      schema = schema.add(new StructField(a.name(), a.dataType(), a.nullable(), a.metadata()));
    }
    PartitionValues partitions = PartitionValues.of(schema, files, notPartition);
    StructType dataSchema = new StructType();
    List<AttributeReference> data = new ArrayList<>();
    List<AttributeReference> fixed = new ArrayList<>();
    for (AttributeReference a : output) {
      if (partitions.serves(a.name())) {
        fixed.add(a);
      } else {
        data.add(a);
        dataSchema = dataSchema.add(new StructField(a.name(), a.dataType(), a.nullable(), a.metadata()));
      }
    }
    data.addAll(fixed);
    scala.collection.immutable.Map<String, String> scalaOptions =
        scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(options));
    HadoopFsRelation fs = new HadoopFsRelation(new PlannedFileIndex(plan, files, partitions), partitions.schema,
        dataSchema, scala.Option.empty(), format, scalaOptions, SparkSession.active());
    LogicalPlan scan = new LogicalRelation(fs, NativeScanRule.seq(data), scala.Option.empty(), false, scala.Option.empty());
    if (fixed.isEmpty()) {
      return scan;
    }
    return new Project(NativeScanRule.seq(new ArrayList<NamedExpression>(output)), scan);
  }

  /** The plan these files come from (its pin: {@link PinLifetime}). */
  NativePlan plan() {
    return plan;
  }

  @Override
  public Seq<Path> rootPaths() {
    return CollectionConverters.asScala(List.of(root)).toSeq();
  }

  /**
   * The planned files, less those whose partition no row of {@code dataFilters} can match
   * ({@link PartitionBounds}): Spark hands the query's filters on the table's columns here, so
   * a filter on a partition's source column skips whole files as a Hive partition filter would.
   * {@code partitionFilters} name only the served columns; Spark does not test them again on the
   * rows, so they are evaluated here exactly, as Spark's own file indexes do.
   */
  @Override
  public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
    List<PartitionDirectory> dirs = new ArrayList<>();
    BasePredicate keep = partitionFilters.isEmpty() ? null : bind(partitionFilters);
    for (Map.Entry<List<Object>, List<Integer>> g : partitions.groups.entrySet()) {
      InternalRow values = PartitionValues.row(g.getKey());
      if (keep == null || keep.eval(values)) {
        List<FileStatusWithMetadata> kept = kept(g.getValue(), dataFilters);
        if (!kept.isEmpty()) {
          dirs.add(new PartitionDirectory(values, CollectionConverters.asScala(kept).toSeq()));
        }
      }
    }
    return CollectionConverters.asScala(dirs).toSeq();
  }

  /** The files of {@code indexes} whose bounds {@code dataFilters} may match. */
  private List<FileStatusWithMetadata> kept(List<Integer> indexes, Seq<Expression> dataFilters) {
    List<FileStatusWithMetadata> kept = new ArrayList<>();
    for (int i : indexes) {
      PartitionBounds bounds = entries.get(i).bounds;
      if (dataFilters.isEmpty() || bounds == null || bounds.mayMatchAll(dataFilters)) {
        kept.add(files.get(i));
      }
    }
    return kept;
  }

  /** The conjunction of {@code filters}, its columns bound to the served columns' positions. */
  private BasePredicate bind(Seq<Expression> filters) {
    StructField[] fields = partitions.schema.fields();
    Expression all = null;
    for (Expression f : CollectionConverters.asJava(filters)) {
      all = all == null ? f : new And(all, f);
    }
    Expression bound = (Expression) all.transform(new AbstractPartialFunction<Expression, Expression>() {
      @Override
      public boolean isDefinedAt(Expression e) {
        return e instanceof AttributeReference;
      }

      @Override
      public Expression apply(Expression e) {
        String name = ((AttributeReference) e).name();
        for (int i = 0; i < fields.length; i++) {
          if (fields[i].name().equalsIgnoreCase(name)) {
            return new BoundReference(i, fields[i].dataType(), true);
          }
        }
        throw new IllegalStateException("mvtable: a partition filter names " + name + ", not a partition column");
      }
    });
    return Predicate$.MODULE$.createInterpreted(bound);
  }

  @Override
  public String[] inputFiles() {
    return paths.clone();
  }

  @Override
  public void refresh() {}

  @Override
  public long sizeInBytes() {
    return bytes;
  }

  @Override
  public StructType partitionSchema() {
    return partitions.schema;
  }

  @Override
  public String toString() {
    return "MvtablePlannedFiles[" + root + ", version " + version + ", " + paths.length + " files]";
  }
}
