package io.mvtable.spark;

import java.io.Closeable;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.hadoop.metadata.BlockMetaData;
import org.apache.parquet.hadoop.metadata.ParquetMetadata;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFooterReader;
import org.apache.spark.sql.execution.vectorized.OffHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.util.SerializableConfiguration;
import org.roaringbitmap.RoaringBitmap;

import scala.Function1;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractFunction1;

/**
 * Spark's Parquet file format, plus one column that says whether a row is deleted.
 *
 * <p>mvtable's deletion vectors name deleted rows by their position in the segment file.
 * Spark's vectorized Parquet reader can generate that position for every row (the
 * temporary row-index column behind {@code _metadata.row_index}). This format asks for it
 * in place of the mask column (or, where Parquet returns every row of the file in order,
 * counts the positions itself), then turns each batch's positions into the mask column:
 * one bit test per row against the file's dense bitmap, in a plain loop. The query then
 * filters on {@code mask = 0}, a byte comparison in Spark's generated code. Testing the
 * bitmaps in Spark expressions instead (mvtable's fallback) costs up to 1.3x of a plain
 * Parquet scan on TPC-H; this costs about what any one-column filter costs.
 *
 * <p>Options (set by mvtable's Python side, never by hand):
 * <ul>
 *   <li>{@code mvtable.maskColumn}: the name of the mask column (a byte, 1 = deleted) that
 *       the read schema carries and no file holds;
 *   <li>{@code mvtable.deletionVectors}: one line per file with deletes, tab-separated:
 *       file name, row count, cardinality, then {@code inline} and the base64 blob, or
 *       {@code file}, the DV file's URI, offset and size.
 * </ul>
 *
 * <p>Executors read the deletion vectors themselves (through Hadoop's file systems, like
 * the segments) and keep a few recent ones per JVM, so the driver ships only their
 * locations. The blob framing is mvtable's: big-endian length, magic, portable 64-bit
 * roaring bitmap, big-endian CRC-32; every check the Python reader makes is made here.
 */
public class MaskedParquetFileFormat extends ParquetFileFormat {
  private static final long serialVersionUID = 1L;

  public static final String MASK_COLUMN_OPTION = "mvtable.maskColumn";
  public static final String DVS_OPTION = "mvtable.deletionVectors";
  /** Row addresses: the column that gets each row's position in its file, if any. */
  public static final String ROW_COLUMN_OPTION = "mvtable.rowColumn";
  /** Row addresses: the column that gets each file's segment id, if any. */
  public static final String SEGMENT_COLUMN_OPTION = "mvtable.segmentColumn";
  /** Row addresses: one line per file, its name, a tab, its segment id. */
  public static final String SEGMENTS_OPTION = "mvtable.segments";

  @Override
  public String shortName() {
    return "mvtable-parquet";
  }

  @Override
  public String toString() {
    return "MvtableMaskedParquet";
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof MaskedParquetFileFormat;
  }

  @Override
  public int hashCode() {
    return MaskedParquetFileFormat.class.hashCode();
  }

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession session,
      StructType dataSchema,
      StructType partitionSchema,
      StructType requiredSchema,
      Seq<Filter> filters,
      scala.collection.immutable.Map<String, String> options,
      Configuration hadoopConf) {
    String mask = options.get(MASK_COLUMN_OPTION).getOrElse(() -> "");
    if (mask.isEmpty()) {
      throw new IllegalArgumentException("mvtable: the " + MASK_COLUMN_OPTION + " option is missing");
    }
    Map<String, DvLocation> dvs = DvLocation.parseAll(options.get(DVS_OPTION).getOrElse(() -> ""));
    String rowColumn = options.get(ROW_COLUMN_OPTION).getOrElse(() -> "");
    String segmentColumn = options.get(SEGMENT_COLUMN_OPTION).getOrElse(() -> "");
    Map<String, String> segments = parseSegments(options.get(SEGMENTS_OPTION).getOrElse(() -> ""));
    // No file holds the mask (or row address) columns: Parquet must neither read them nor
    // filter on them (a pushed-down "mask = 0" on a missing column reads as null and drops
    // every row group).
    @SuppressWarnings("unchecked")
    Seq<Filter> fileFilters = (Seq<Filter>) filters.filterNot(new References(mask, rowColumn, segmentColumn));
    StructType fileSchema = without(without(without(dataSchema, mask), rowColumn), segmentColumn);
    int ordinal = indexOf(requiredSchema, mask);
    int rowOrdinal = rowColumn.isEmpty() ? -1 : indexOf(requiredSchema, rowColumn);
    int segmentOrdinal = segmentColumn.isEmpty() ? -1 : indexOf(requiredSchema, segmentColumn);
    if (ordinal < 0) {
      if (rowOrdinal >= 0 || segmentOrdinal >= 0) {
        throw new IllegalArgumentException("mvtable: row addresses are read with the mask column " + mask);
      }
      return super.buildReaderWithPartitionValues(
          session, fileSchema, partitionSchema, requiredSchema, fileFilters, options, hadoopConf);
    }
    // With no filter for Parquet, a read returns every row of the row groups it reads, in order:
    // the mask counts positions itself from the first one's, and Spark's per-row position column
    // (a few percent of a scan) is left out. A filter may skip row groups and pages, and row
    // addresses need each row's position: Spark's reader generates the positions then, as it
    // does for a read in rows (which keeps marking Spark's own rows in place).
    boolean counting = fileFilters.isEmpty() && rowOrdinal < 0 && segmentOrdinal < 0
        && supportBatch(session, requiredSchema.merge(partitionSchema, true));
    StructType readSchema = without(requiredSchema, mask);
    if (!counting) {
      StructField[] fields = requiredSchema.fields().clone();
      fields[ordinal] = new StructField(
          ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME(), DataTypes.LongType, true, Metadata.empty());
      // read as nulls (no file has them), then filled in from the row index and the file
      if (rowOrdinal >= 0) {
        fields[rowOrdinal] = new StructField(rowColumn, DataTypes.LongType, true, Metadata.empty());
      }
      if (segmentOrdinal >= 0) {
        fields[segmentOrdinal] = new StructField(segmentColumn, DataTypes.StringType, true, Metadata.empty());
      }
      readSchema = new StructType(fields);
    }
    // before Spark's format writes the query's read schema into the conf: the same table's
    // queries then share one broadcast whatever columns they read
    Broadcast<SerializableConfiguration> conf = Confs.broadcast(session, hadoopConf);
    Function1<PartitionedFile, Iterator<InternalRow>> inner = super.buildReaderWithPartitionValues(
        session, fileSchema, partitionSchema, readSchema, fileFilters, options, hadoopConf);
    boolean offHeap = session.sessionState().conf().offHeapColumnVectorEnabled();
    return new MaskingReader(inner, counting, new int[] {ordinal, rowOrdinal, segmentOrdinal},
        readTypes(readSchema.fields(), partitionSchema), dvs, segments, conf, offHeap);
  }

  private static Map<String, String> parseSegments(String lines) {
    Map<String, String> out = new HashMap<>();
    for (String line : lines.split("\n")) {
      if (line.isEmpty()) {
        continue;
      }
      int tab = line.indexOf('\t');
      if (tab < 0) {
        throw new IllegalArgumentException("mvtable: bad " + SEGMENTS_OPTION + " line: " + line);
      }
      out.put(line.substring(0, tab), line.substring(tab + 1));
    }
    return out;
  }

  /** The types of the rows the inner reader returns: the read columns, then the partition values. */
  private static DataType[] readTypes(StructField[] fields, StructType partitionSchema) {
    List<DataType> types = new ArrayList<>();
    for (StructField f : fields) {
      types.add(f.dataType());
    }
    for (StructField f : partitionSchema.fields()) {
      types.add(f.dataType());
    }
    return types.toArray(new DataType[0]);
  }

  private static StructType without(StructType schema, String name) {
    if (name.isEmpty()) {
      return schema;
    }
    List<StructField> kept = new ArrayList<>();
    for (StructField f : schema.fields()) {
      if (!f.name().equals(name)) {
        kept.add(f);
      }
    }
    return new StructType(kept.toArray(new StructField[0]));
  }

  private static int indexOf(StructType schema, String name) {
    StructField[] fields = schema.fields();
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].name().equals(name)) {
        return i;
      }
    }
    return -1;
  }

  /** A filter that names one of the given columns (the mask, the row address columns). */
  private static final class References extends AbstractFunction1<Filter, Object> implements Serializable {
    private static final long serialVersionUID = 1L;
    private final String[] columns;

    References(String... columns) {
      this.columns = columns;
    }

    @Override
    public Object apply(Filter filter) {
      for (String ref : filter.references()) {
        for (String column : columns) {
          if (!column.isEmpty() && ref.equals(column)) {
            return Boolean.TRUE;
          }
        }
      }
      return Boolean.FALSE;
    }
  }

  /** Where one file's deletion vector lives (as the table's log describes it). */
  static final class DvLocation implements Serializable {
    private static final long serialVersionUID = 1L;
    final String fileName;
    final long numRows;
    final long cardinality;
    final String inline; // base64 of the framed blob, or null
    final String uri; // the DV file, or null
    final long offset;
    final int size;

    private DvLocation(String fileName, long numRows, long cardinality, String inline, String uri, long offset, int size) {
      this.fileName = fileName;
      this.numRows = numRows;
      this.cardinality = cardinality;
      this.inline = inline;
      this.uri = uri;
      this.offset = offset;
      this.size = size;
    }

    String key() {
      return inline != null ? "inline:" + inline : uri + "@" + offset + "+" + size;
    }

    String describe() {
      return inline != null ? "the inline deletion vector of " + fileName : uri + " at offset " + offset + " (size " + size + ")";
    }

    static Map<String, DvLocation> parseAll(String text) {
      Map<String, DvLocation> out = new HashMap<>();
      for (String line : text.split("\n")) {
        if (line.isEmpty()) {
          continue;
        }
        String[] p = line.split("\t", -1);
        DvLocation loc;
        if (p.length == 5 && p[3].equals("inline")) {
          loc = new DvLocation(p[0], Long.parseLong(p[1]), Long.parseLong(p[2]), p[4], null, 0, 0);
        } else if (p.length == 7 && p[3].equals("file")) {
          loc = new DvLocation(p[0], Long.parseLong(p[1]), Long.parseLong(p[2]), null, p[4], Long.parseLong(p[5]), Integer.parseInt(p[6]));
        } else {
          throw new IllegalArgumentException("mvtable: bad " + DVS_OPTION + " line: " + line);
        }
        if (out.put(loc.fileName, loc) != null) {
          throw new IllegalArgumentException("mvtable: two files with deletes are named " + loc.fileName);
        }
      }
      return out;
    }
  }

  /** Reads a file with the inner Parquet reader and fills in the mask column. */
  private static final class MaskingReader
      extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>> implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Function1<PartitionedFile, Iterator<InternalRow>> inner;
    private final boolean counting; // the inner reader's rows have no position column: count them
    private final int[] ordinals; // the mask's, the row column's, the segment column's (-1: not read)
    private final DataType[] types; // of the inner reader's rows
    private final Map<String, DvLocation> dvs;
    private final Map<String, String> segments;
    private final Broadcast<SerializableConfiguration> conf;
    private final boolean offHeap;

    MaskingReader(
        Function1<PartitionedFile, Iterator<InternalRow>> inner,
        boolean counting,
        int[] ordinals,
        DataType[] types,
        Map<String, DvLocation> dvs,
        Map<String, String> segments,
        Broadcast<SerializableConfiguration> conf,
        boolean offHeap) {
      this.inner = inner;
      this.counting = counting;
      this.ordinals = ordinals;
      this.types = types;
      this.dvs = dvs;
      this.segments = segments;
      this.conf = conf;
      this.offHeap = offHeap;
    }

    @Override
    @SuppressWarnings("unchecked")
    public Iterator<InternalRow> apply(PartitionedFile file) {
      String name = file.toPath().getName();
      DvLocation loc = dvs.get(name);
      long[] bits = loc == null ? null : Bitmaps.load(loc, conf.value().value());
      UTF8String segment = null;
      if (ordinals[2] >= 0) {
        String id = segments.get(name);
        if (id == null) {
          throw new IllegalStateException("mvtable: no segment id for " + name + " in " + SEGMENTS_OPTION);
        }
        segment = UTF8String.fromString(id);
      }
      // The vectorized reader hands out ColumnarBatches through an Iterator[InternalRow]
      // (Spark's FileScanRDD tells them apart at run time): erase the element type so that
      // no cast to InternalRow is ever made on a batch.
      long first = counting && bits != null ? firstRow(file, conf.value().value()) : 0;
      Iterator<Object> rows = (Iterator<Object>) (Iterator<?>) inner.apply(file);
      return (Iterator<InternalRow>) (Iterator<?>) new MaskingIterator(rows, ordinals, types, bits, segment, offHeap,
          counting, first);
    }
  }

  /**
   * The position in its file of the first row a read of {@code file} (a byte range of it) returns
   * with no filter: 0 for a read from the file's start, else the first of the row groups Spark's
   * reader takes for the range, from the footer read with Spark's own range filter.
   */
  private static long firstRow(PartitionedFile file, Configuration conf) {
    if (file.start() == 0) {
      return 0;
    }
    try {
      ParquetMetadata footer = ParquetFooterReader.readFooter(
          HadoopInputFile.fromPath(file.toPath(), conf), ParquetFooterReader.buildFilter(conf, file, false));
      List<BlockMetaData> blocks = footer.getBlocks();
      return blocks.isEmpty() ? 0 : blocks.get(0).getRowIndexOffset();
    } catch (IOException e) {
      throw new UncheckedIOException("mvtable: cannot read the footer of " + file.toPath() + ": " + e.getMessage(), e);
    }
  }

  /**
   * The Hadoop conf executors read deletion vectors with, broadcast once per content and Spark
   * context: a query's conf is new each time but mostly the same, and broadcasting it costs
   * milliseconds of every query's planning.
   */
  static final class Confs {
    private static final int KEPT = 4;
    private static final Map<Map<String, String>, Broadcast<SerializableConfiguration>> BROADCASTS =
        new LinkedHashMap<>(8, 0.75f, true);
    private static org.apache.spark.SparkContext context;

    private Confs() {}

    static Broadcast<SerializableConfiguration> broadcast(SparkSession session, Configuration conf) {
      Map<String, String> content = new HashMap<>();
      for (Map.Entry<String, String> e : conf) {
        content.put(e.getKey(), e.getValue());
      }
      synchronized (BROADCASTS) {
        if (context != session.sparkContext()) {
          BROADCASTS.clear();
          context = session.sparkContext();
        }
        Broadcast<SerializableConfiguration> hit = BROADCASTS.get(content);
        if (hit == null) {
          hit = SerializableConfiguration.broadcast(session.sparkContext(), conf);
          BROADCASTS.put(content, hit);
          java.util.Iterator<Map<String, String>> eldest = BROADCASTS.keySet().iterator();
          while (BROADCASTS.size() > KEPT) {
            eldest.next();
            eldest.remove();
          }
        }
        return hit;
      }
    }
  }

  private static final class MaskingIterator extends AbstractIterator<Object> implements Closeable {
    private final Iterator<Object> rows;
    private final int ordinal;
    private final int rowOrdinal; // -1: no row address column
    private final int segmentOrdinal; // -1: no segment column
    private final DataType[] types;
    private final long[] bits; // null: nothing deleted in this file
    private final UTF8String segment; // this file's segment id, when segmentOrdinal >= 0
    private final boolean offHeap;
    /** The batches carry no positions and no mask column: positions are counted, the mask goes in at its ordinal. */
    private final boolean counting;
    private long position; // counting: the position of the next row
    private WritableColumnVector mask;
    private WritableColumnVector segmentVector; // Spark's generated code expects the format's vector types
    private int segmentCapacity;
    private byte[] scratch;
    private int capacity;

    MaskingIterator(Iterator<Object> rows, int[] ordinals, DataType[] types, long[] bits, UTF8String segment,
        boolean offHeap, boolean counting, long first) {
      this.counting = counting;
      this.position = first;
      this.rows = rows;
      this.ordinal = ordinals[0];
      this.rowOrdinal = ordinals[1];
      this.segmentOrdinal = ordinals[2];
      this.types = types;
      this.bits = bits;
      this.segment = segment;
      this.offHeap = offHeap;
    }

    @Override
    public boolean hasNext() {
      return rows.hasNext();
    }

    @Override
    public Object next() {
      Object next = rows.next();
      if (next instanceof ColumnarBatch) {
        return mark((ColumnarBatch) next);
      }
      return mark((InternalRow) next);
    }

    private boolean deleted(long row) {
      return bits != null && ((word(row) >>> row) & 1L) != 0;
    }

    private long word(long row) {
      long word = row >>> 6;
      if (row < 0 || word >= bits.length) {
        throw new IllegalStateException(
            "mvtable: row " + row + " is past the deletion vector of its file: the segment holds more rows than the table's log says");
      }
      return bits[(int) word];
    }

    private ColumnarBatch mark(ColumnarBatch batch) {
      int n = batch.numRows();
      if (mask == null || capacity < n) {
        if (mask != null) {
          mask.close();
        }
        capacity = Math.max(n, 4096);
        mask = offHeap
            ? new OffHeapColumnVector(capacity, DataTypes.ByteType)
            : new OnHeapColumnVector(capacity, DataTypes.ByteType);
        scratch = new byte[capacity];
      }
      ColumnVector rowIndex = counting ? null : batch.column(ordinal);
      if (bits == null || n == 0) {
        mask.putBytes(0, n, (byte) 0);
      } else {
        long first = counting ? position : rowIndex.getLong(0);
        long last = counting ? position + n - 1 : rowIndex.getLong(n - 1);
        if (last - first == n - 1) {
          // Positions ascend within a file, so first and last n - 1 apart means every
          // position in between (no page was skipped): test the words directly, and skip
          // any run of 64 rows without a delete.
          word(first);
          word(last);
          for (int i = 0; i < n; ) {
            long row = first + i;
            long w = bits[(int) (row >>> 6)];
            int upTo = (int) Math.min(n, i + (64 - (row & 63)));
            if (w == 0) {
              Arrays.fill(scratch, i, upTo, (byte) 0);
            } else {
              for (; i < upTo; i++) {
                scratch[i] = (byte) ((w >>> (first + i)) & 1L);
              }
            }
            i = upTo;
          }
        } else {
          for (int i = 0; i < n; i++) {
            scratch[i] = deleted(rowIndex.getLong(i)) ? (byte) 1 : (byte) 0;
          }
        }
        mask.putBytes(0, n, scratch, 0);
      }
      position += n;
      ColumnVector[] columns = new ColumnVector[batch.numCols() + (counting ? 1 : 0)];
      for (int c = 0; c < columns.length; c++) {
        columns[c] = c == ordinal ? mask : batch.column(counting && c > ordinal ? c - 1 : c);
      }
      if (rowOrdinal >= 0) {
        columns[rowOrdinal] = rowIndex;
      }
      if (segmentOrdinal >= 0) {
        if (segmentVector == null || segmentCapacity < n) {
          if (segmentVector != null) {
            segmentVector.close();
          }
          segmentCapacity = Math.max(n, 4096);
          segmentVector = offHeap
              ? new OffHeapColumnVector(segmentCapacity, DataTypes.StringType)
              : new OnHeapColumnVector(segmentCapacity, DataTypes.StringType);
          byte[] id = segment.getBytes();
          for (int i = 0; i < segmentCapacity; i++) {  // one file, one segment: filled once
            segmentVector.putByteArray(i, id);
          }
        }
        columns[segmentOrdinal] = segmentVector;
      }
      return new ColumnarBatch(columns, n);
    }

    private InternalRow mark(InternalRow row) {
      if (counting) {
        throw new IllegalStateException("mvtable: a row from a read that returns batches");
      }
      long at = row.getLong(ordinal);
      byte value = deleted(at) ? (byte) 1 : (byte) 0;
      if (rowOrdinal >= 0 || segmentOrdinal >= 0) {
        Object[] values = new Object[row.numFields()];
        for (int i = 0; i < values.length; i++) {
          values[i] = row.isNullAt(i) ? null : row.get(i, types[i]);
        }
        values[ordinal] = value;
        if (rowOrdinal >= 0) {
          values[rowOrdinal] = at;
        }
        if (segmentOrdinal >= 0) {
          values[segmentOrdinal] = segment;
        }
        return new GenericInternalRow(values);
      }
      if (row instanceof UnsafeRow) {
        // what Spark's row reader returns: a fixed-width slot, so clear the position's
        // 8 bytes and write the byte in place
        row.setLong(ordinal, 0L);
        row.setByte(ordinal, value);
        return row;
      }
      Object[] values = new Object[row.numFields()];
      for (int i = 0; i < values.length; i++) {
        values[i] = i == ordinal ? (Object) value : row.get(i, types[i]);
      }
      return new GenericInternalRow(values);
    }

    @Override
    public void close() throws IOException {
      if (mask != null) {
        mask.close();
        mask = null;
      }
      if (segmentVector != null) {
        segmentVector.close();
        segmentVector = null;
      }
      if (rows instanceof Closeable) {
        ((Closeable) rows).close();
      }
    }
  }

  /** Deletion vectors as dense bitmaps (bit p of word p / 64 set = row p deleted). */
  static final class Bitmaps {
    private static final byte[] MAGIC = {(byte) 0xD1, (byte) 0xD3, (byte) 0x39, (byte) 0x64};
    // recently used bitmaps of this JVM (an executor scans the same files query after
    // query), least recently used dropped first past 256 MB (125 KB per million rows)
    private static final long MAX_CACHED_BYTES = 256L << 20;
    private static final Map<String, long[]> CACHE = new LinkedHashMap<>(16, 0.75f, true);
    private static long cachedBytes;

    private Bitmaps() {}

    static long[] load(DvLocation loc, Configuration conf) {
      String key = loc.key() + "#" + loc.numRows;
      synchronized (CACHE) {
        long[] hit = CACHE.get(key);
        if (hit != null) {
          return hit;
        }
      }
      long[] bits;
      try {
        bits = dense(decode(read(loc, conf), loc), loc);
      } catch (IOException e) {
        throw new UncheckedIOException("mvtable: cannot read the deletion vector " + loc.describe() + ": " + e.getMessage(), e);
      }
      synchronized (CACHE) {
        long[] old = CACHE.put(key, bits);
        cachedBytes += 8L * bits.length - (old == null ? 0 : 8L * old.length);
        java.util.Iterator<long[]> eldest = CACHE.values().iterator();
        while (cachedBytes > MAX_CACHED_BYTES && eldest.hasNext()) {
          long[] dropped = eldest.next();
          if (dropped != bits) {
            cachedBytes -= 8L * dropped.length;
            eldest.remove();
          }
        }
      }
      return bits;
    }

    private static byte[] read(DvLocation loc, Configuration conf) throws IOException {
      if (loc.inline != null) {
        return Base64.getDecoder().decode(loc.inline);
      }
      Path path = new Path(URI.create(loc.uri));
      FileSystem fs = path.getFileSystem(conf);
      byte[] blob = new byte[loc.size];
      try (FSDataInputStream in = fs.open(path)) {
        in.readFully(loc.offset, blob);
      }
      return blob;
    }

    private static RoaringBitmap decode(byte[] blob, DvLocation loc) throws IOException {
      ByteBuffer buf = ByteBuffer.wrap(blob).order(ByteOrder.BIG_ENDIAN);
      if (blob.length < 12) {
        throw corrupt(loc, "the blob has only " + blob.length + " bytes");
      }
      int length = buf.getInt(0);
      if (length < 4 || length != blob.length - 8) {
        throw corrupt(loc, "length field says " + length + " bytes of magic+bitmap but the blob holds " + (blob.length - 8));
      }
      for (int i = 0; i < 4; i++) {
        if (blob[4 + i] != MAGIC[i]) {
          throw corrupt(loc, "bad magic");
        }
      }
      CRC32 crc = new CRC32();
      crc.update(blob, 4, length);
      if ((int) crc.getValue() != buf.getInt(4 + length)) {
        throw corrupt(loc, "CRC-32 mismatch");
      }
      // portable 64-bit roaring: bucket count (u64 LE), then per bucket its high 32 bits
      // (u32 LE) and a portable 32-bit roaring bitmap of the low bits
      ByteBuffer body = ByteBuffer.wrap(blob, 8, length - 4).slice().order(ByteOrder.LITTLE_ENDIAN);
      long buckets = body.getLong();
      RoaringBitmap out = new RoaringBitmap();
      for (long b = 0; b < buckets; b++) {
        int high = body.getInt();
        RoaringBitmap low = new RoaringBitmap();
        low.deserialize(body.slice().order(ByteOrder.LITTLE_ENDIAN));
        body.position(body.position() + low.serializedSizeInBytes());
        if (high != 0 && !low.isEmpty()) {
          throw corrupt(loc, "names a row past 2^32");
        }
        out.or(low);
      }
      if (body.hasRemaining()) {
        throw corrupt(loc, body.remaining() + " bytes after the bitmap");
      }
      return out;
    }

    private static long[] dense(RoaringBitmap positions, DvLocation loc) throws IOException {
      if (positions.getLongCardinality() != loc.cardinality) {
        throw corrupt(loc, "holds " + positions.getLongCardinality() + " positions but the descriptor says " + loc.cardinality);
      }
      if (!positions.isEmpty() && Integer.toUnsignedLong(positions.last()) >= loc.numRows) {
        throw corrupt(loc, "names row " + Integer.toUnsignedLong(positions.last()) + " of a " + loc.numRows + "-row segment");
      }
      long[] words = new long[(int) ((loc.numRows + 63) >>> 6)];
      positions.forEach((int p) -> words[p >>> 6] |= 1L << p);
      return words;
    }

    private static IOException corrupt(DvLocation loc, String why) {
      return new IOException("mvtable: corrupt deletion vector " + loc.describe() + ": " + why);
    }
  }
}
