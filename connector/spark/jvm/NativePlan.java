package io.mvtable.spark;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.MetadataBuilder;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The scan plan the Python source returns from {@code schema()}, as JSON in the first field's
 * metadata (key {@link #KEY}): the schema is the one thing Spark's planner call brings back.
 * {@link #split} takes it out again before anyone sees the schema.
 */
public final class NativePlan implements Serializable {
  private static final long serialVersionUID = 1L;
  public static final String KEY = "mvtable.nativePlan";
  /** The plan format this class reads; Python writes the same number. */
  public static final int PROTOCOL = 2;

  /** One segment file: where, how big, how many rows, its deletion vector's line (or null), its partition's bounds. */
  public static final class FileEntry implements Serializable {
    private static final long serialVersionUID = 1L;
    public final String path;
    public final long size;
    public final long rows;
    public final String dvLine;
    public final String segment;
    /** What the file's partition says about its columns (null: unpartitioned). */
    final PartitionBounds bounds;
    /** Its schema group ({@link #groups}); -1: the file has the table's schema. */
    public final int group;

    FileEntry(String path, long size, long rows, String dvLine, String segment, PartitionBounds bounds, int group) {
      this.path = path;
      this.size = size;
      this.rows = rows;
      this.dvLine = dvLine;
      this.segment = segment;
      this.bounds = bounds;
      this.group = group;
    }
  }

  /**
   * Files written under an older schema, of one Parquet schema: the columns to read from them
   * ({@code schema}, their own names and types) and, per table column, the Spark SQL expression
   * over those that reads it by field id (renamed, cast, or a typed null).
   */
  public static final class SchemaGroup implements Serializable {
    private static final long serialVersionUID = 1L;
    public final StructType schema;
    /** Table column name to {@code <expression> AS <name>}, in table order. */
    public final java.util.LinkedHashMap<String, String> columns;

    SchemaGroup(StructType schema, java.util.LinkedHashMap<String, String> columns) {
      this.schema = schema;
      this.columns = columns;
    }
  }

  public boolean nativeRead;
  public String reason;
  public long version;
  public volatile String pinId; // PinRenewal may replace it (a pin made again)
  public String root;
  public long renewAfterMs;
  /** withRowAddress: the read has the _mv_segment and _mv_row columns. */
  public boolean rowAddress;
  /** The pin is held by Python ({@code read_native}, {@code create_view}), not by this plan ({@link PlannedScan}). */
  public volatile boolean pinnedOutside;
  public volatile long renewedAtMs = System.currentTimeMillis();
  /** The pin lasts only pinIdleTtl: no query has run since it was made or cut ({@link PinLifetime}). */
  public volatile boolean idle;
  /** When the pin was last made or cut to pinIdleTtl: it lasts at least until this plus idleTtlMs. */
  public volatile long idleSinceMs = System.currentTimeMillis();
  /** The read's pinIdleTtl in milliseconds. */
  public long idleTtlMs;
  /** Counts the cuts scheduled: only the newest may run ({@link PinLifetime}). */
  final java.util.concurrent.atomic.AtomicLong cutsScheduled = new java.util.concurrent.atomic.AtomicLong();
  /** How many running SQL executions read this plan ({@link PinLifetime}). */
  final java.util.concurrent.atomic.AtomicInteger running = new java.util.concurrent.atomic.AtomicInteger();
  /** The Python source that planned the read and keeps its pin ({@link NativeTable} sets it). */
  transient org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2 provider;
  transient String sourceName;
  /** The read's options, for the renewal call ({@link PinRenewal}). */
  public final java.util.Map<String, String> readOptions = new java.util.HashMap<>();
  public final List<FileEntry> files = new ArrayList<>();
  /** The schema groups files refer to ({@link FileEntry#group}); empty when every file has the table's schema. */
  public final List<SchemaGroup> groups = new ArrayList<>();

  /** A schema without the plan, and the plan (null when Python sent none). */
  public static final class Parsed {
    public final StructType schema;
    public final NativePlan plan;

    Parsed(StructType schema, NativePlan plan) {
      this.schema = schema;
      this.plan = plan;
    }
  }

  public static Parsed split(StructType schema) {
    if (schema.fields().length == 0 || !schema.fields()[0].metadata().contains(KEY)) {
      return new Parsed(schema, null);
    }
    StructField first = schema.fields()[0];
    String json = first.metadata().getString(KEY);
    Metadata rest = new MetadataBuilder().withMetadata(first.metadata()).remove(KEY).build();
    StructField[] fields = schema.fields().clone();
    fields[0] = new StructField(first.name(), first.dataType(), first.nullable(), rest);
    return new Parsed(new StructType(fields), parse(json));
  }

  static NativePlan parse(String json) {
    JsonNode n;
    try {
      n = new ObjectMapper().readTree(json);
    } catch (IOException e) {
      throw new IllegalStateException("mvtable: unreadable scan plan from the Python source: " + e.getMessage(), e);
    }
    NativePlan p = new NativePlan();
    int protocol = n.path("protocol").asInt(-1);
    if (protocol != PROTOCOL) {
      // a jar and a Python package of different mvtable versions: read through Python
      p.reason = "the jar reads scan plans of protocol " + PROTOCOL + ", the Python source wrote " + protocol
          + " (rebuild the jar: mvtable spark-jar)";
      return p;
    }
    p.nativeRead = n.path("native").asBoolean(false);
    p.reason = n.path("reason").asText(null);
    if (!p.nativeRead) {
      return p;
    }
    p.version = n.path("version").asLong();
    p.pinId = n.path("pinId").asText();
    p.root = n.path("root").asText();
    p.renewAfterMs = n.path("renewAfterMs").asLong(30L * 60 * 1000);
    p.rowAddress = n.path("rowAddress").asBoolean(false);
    p.idle = n.path("idle").asBoolean(false);
    p.idleTtlMs = n.path("idleTtlMs").asLong(5L * 60 * 1000);
    for (JsonNode g : n.path("groups")) {
      java.util.LinkedHashMap<String, String> columns = new java.util.LinkedHashMap<>();
      g.path("columns").fields().forEachRemaining(e -> columns.put(e.getKey(), e.getValue().asText()));
      p.groups.add(new SchemaGroup((StructType) org.apache.spark.sql.types.DataType.fromJson(g.path("schema").toString()),
          columns));
    }
    for (JsonNode f : n.path("files")) {
      JsonNode dv = f.path("dv");
      p.files.add(new FileEntry(f.path("path").asText(), f.path("size").asLong(), f.path("rows").asLong(),
          dv.isNull() || dv.isMissingNode() ? null : dv.asText(), f.path("segment").asText(""), PartitionBounds.parse(f),
          f.path("group").asInt(-1)));
    }
    return p;
  }

  /** The pin id in the schema of a pin call ({@link PinRenewal}); {@code done}: "renewed" or "idled". */
  static String pinOf(StructType schema, String done) {
    try {
      JsonNode n = new ObjectMapper().readTree(schema.fields()[0].metadata().getString(KEY));
      if (!n.path(done).asBoolean(false)) {
        throw new IllegalStateException("mvtable: the Python source did not answer '" + done + "' for the pin: " + n);
      }
      return n.path("pinId").asText();
    } catch (IOException e) {
      throw new IllegalStateException("mvtable: unreadable pin answer from the Python source: " + e.getMessage(), e);
    }
  }

  public boolean anyDeletes() {
    return anyDeletes(files);
  }

  static boolean anyDeletes(List<FileEntry> files) {
    for (FileEntry f : files) {
      if (f.dvLine != null) {
        return true;
      }
    }
    return false;
  }

  /** The {@code mvtable.segments} option of {@link MaskedParquetFileFormat}. */
  public String segmentLines() {
    return segmentLines(files);
  }

  static String segmentLines(List<FileEntry> files) {
    StringBuilder b = new StringBuilder();
    for (FileEntry f : files) {
      b.append(new org.apache.hadoop.fs.Path(f.path).getName()).append('\t').append(f.segment).append('\n');
    }
    return b.toString();
  }

  /** The {@code mvtable.deletionVectors} option of {@link MaskedParquetFileFormat}. */
  public String dvLines() {
    return dvLines(files);
  }

  static String dvLines(List<FileEntry> files) {
    StringBuilder b = new StringBuilder();
    for (FileEntry f : files) {
      if (f.dvLine != null) {
        b.append(f.dvLine).append('\n');
      }
    }
    return b.toString();
  }
}
