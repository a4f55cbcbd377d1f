package io.mvtable.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.FileStatusWithMetadata;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The files Python planned, with the sizes the table's log records: Spark neither lists a
 * directory nor stats a file, and its statistics (broadcast joins) see the real size. A
 * query's filters drop the files of partitions they rule out ({@link #listFiles}).
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

  public PlannedFileIndex(NativePlan plan) {
    this(plan, plan.files);
  }

  /** {@code entries}, some of {@code plan}'s files (one schema group's: {@link NativeScanRule}). */
  public PlannedFileIndex(NativePlan plan, List<NativePlan.FileEntry> entries) {
    this.plan = plan;
    this.entries = entries;
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
   */
  @Override
  public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
    List<FileStatusWithMetadata> kept = files;
    if (!dataFilters.isEmpty()) {
      kept = new ArrayList<>();
      for (int i = 0; i < files.size(); i++) {
        PartitionBounds bounds = entries.get(i).bounds;
        if (bounds == null || bounds.mayMatchAll(dataFilters)) {
          kept.add(files.get(i));
        }
      }
    }
    PartitionDirectory dir = new PartitionDirectory(InternalRow.empty(), CollectionConverters.asScala(kept).toSeq());
    return CollectionConverters.asScala(List.of(dir)).toSeq();
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
    return new StructType();
  }

  @Override
  public String toString() {
    return "MvtablePlannedFiles[" + root + ", version " + version + ", " + paths.length + " files]";
  }
}
