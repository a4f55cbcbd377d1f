package io.mvtable.spark;

import java.io.Serializable;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BinaryComparison;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GreaterThan;
import org.apache.spark.sql.catalyst.expressions.GreaterThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.In;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.IsNotNull;
import org.apache.spark.sql.catalyst.expressions.IsNull;
import org.apache.spark.sql.catalyst.expressions.LessThan;
import org.apache.spark.sql.catalyst.expressions.LessThanOrEqual;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;
import org.apache.spark.unsafe.types.UTF8String;

import scala.jdk.javaapi.CollectionConverters;

/**
 * What a file's partition says about its columns ({@code native_partitions.py} writes it):
 * every row's value is null, equals a value, lies in {@code [lo, hi)}, hashes to a bucket, or
 * is not null.
 * {@link #mayMatch} tells whether a row of the file can satisfy a filter Spark hands the
 * file index; anything it does not understand (casts, functions, other columns) may match.
 */
final class PartitionBounds implements Serializable {
  private static final long serialVersionUID = 1L;

  private static final class Bound implements Serializable {
    private static final long serialVersionUID = 1L;
    final String column;
    final String kind; // null, notNull, eq, range, bucket
    final Object lo; // eq: the value; BigDecimal or UTF8String
    final Object hi; // range: exclusive; null: unbounded
    final int buckets; // bucket: N
    final int bucket; // bucket: the file's bucket

    Bound(String column, String kind, Object lo, Object hi, int buckets, int bucket) {
      this.column = column;
      this.kind = kind;
      this.lo = lo;
      this.hi = hi;
      this.buckets = buckets;
      this.bucket = bucket;
    }
  }

  private final List<Bound> bounds = new ArrayList<>();

  /** The bounds of one plan file entry, or null when it has none (an unpartitioned segment). */
  static PartitionBounds parse(JsonNode entry) {
    JsonNode list = entry.path("bounds");
    if (!list.isArray() || list.size() == 0) {
      return null;
    }
    PartitionBounds out = new PartitionBounds();
    for (JsonNode b : list) {
      String type = b.path("type").asText("num");
      String kind = b.path("kind").asText("notNull");
      Object lo = kind.equals("eq") ? value(b.path("value"), type) : value(b.path("lo"), type);
      Object hi = kind.equals("range") ? value(b.path("hi"), type) : null;
      if (((kind.equals("eq") || kind.equals("range")) && lo == null) || (kind.equals("bucket") && b.path("n").asInt(0) <= 0)) {
        kind = "notNull"; // a value this class cannot compare: say only what is safe
      }
      out.bounds.add(new Bound(b.path("column").asText(), kind, lo, hi, b.path("n").asInt(0), b.path("value").asInt(-1)));
    }
    return out;
  }

  private static Object value(JsonNode n, String type) {
    if (n.isMissingNode() || n.isNull()) {
      return null;
    }
    if (type.equals("str")) {
      return UTF8String.fromString(n.asText());
    }
    try {
      return type.equals("dec") ? new BigDecimal(n.asText()) : n.decimalValue();
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /** What {@link #fixedValue} answers for a column the partition does not fix. */
  static final Object NOT_FIXED = new Object();

  /**
   * The one value every row of the file holds in {@code column} of Spark type {@code type} (Spark's
   * internal value; null for a null partition value), or {@link #NOT_FIXED}: an identity
   * partition, a null one, or a range one unit wide on a date or an integer (a {@code day} of a
   * date, a {@code truncate} of width 1). Floating-point values are never fixed: -0.0 and NaN
   * compare in Spark as they do not in the partition.
   */
  Object fixedValue(String column, DataType type) {
    for (Bound b : bounds) {
      if (!b.column.equals(column)) {
        continue;
      }
      if (b.kind.equals("null")) {
        return null;
      }
      Object v = NOT_FIXED;
      if (b.kind.equals("eq")) {
        v = internal(b.lo, type);
      } else if (b.kind.equals("range") && b.lo instanceof BigDecimal lo && b.hi instanceof BigDecimal hi
          && hi.subtract(lo).compareTo(BigDecimal.ONE) == 0 && !(type instanceof TimestampType)
          && !(type instanceof TimestampNTZType)) {
        v = PartitionValues.integral(lo, type);
      }
      if (v != NOT_FIXED) {
        return v;
      }
    }
    return NOT_FIXED;
  }

  private static Object internal(Object value, DataType type) {
    if (value instanceof UTF8String s) {
      return type.equals(DataTypes.StringType) ? s : NOT_FIXED;
    }
    BigDecimal v = (BigDecimal) value;
    if (type instanceof DecimalType d) {
      try {
        Decimal out = Decimal.apply(v.setScale(d.scale()));
        return out.changePrecision(d.precision(), d.scale()) ? out : NOT_FIXED;
      } catch (ArithmeticException e) {
        return NOT_FIXED;
      }
    }
    return PartitionValues.integral(v, type);
  }

  /** Whether a row of the file may satisfy every filter (Spark's data filters are a conjunction). */
  boolean mayMatchAll(scala.collection.Seq<Expression> filters) {
    for (Expression e : CollectionConverters.asJava(filters)) {
      if (!mayMatch(e)) {
        return false;
      }
    }
    return true;
  }

  boolean mayMatch(Expression e) {
    if (e instanceof And a) {
      return mayMatch(a.left()) && mayMatch(a.right());
    }
    if (e instanceof Or o) {
      return mayMatch(o.left()) || mayMatch(o.right());
    }
    if (e instanceof IsNull n) {
      return allows(column(n.child()), "isNull", null);
    }
    if (e instanceof IsNotNull n) {
      return allows(column(n.child()), "notNull", null);
    }
    if (e instanceof In in) {
      String col = column(in.value());
      if (col == null) {
        return true;
      }
      for (Expression item : CollectionConverters.asJava(in.list())) {
        if (!(item instanceof Literal l) || allows(col, "==", l.value())) {
          return true;
        }
      }
      return false;
    }
    if (e instanceof InSet in) {
      String col = column(in.child());
      if (col == null) {
        return true;
      }
      for (Object v : CollectionConverters.asJava(in.hset())) {
        if (allows(col, "==", v)) {
          return true;
        }
      }
      return false;
    }
    if (e instanceof BinaryComparison c) {
      String op = op(c);
      if (op == null) {
        return true;
      }
      if (column(c.left()) != null && c.right() instanceof Literal l) {
        return nullSafeOrCompare(c, column(c.left()), op, l.value());
      }
      if (column(c.right()) != null && c.left() instanceof Literal l) {
        return nullSafeOrCompare(c, column(c.right()), flip(op), l.value());
      }
    }
    return true;
  }

  private boolean nullSafeOrCompare(BinaryComparison c, String col, String op, Object literal) {
    if (c instanceof EqualNullSafe && literal == null) {
      return allows(col, "isNull", null);
    }
    if (literal == null) {
      return true; // a comparison with null matches no row; Spark simplifies it before here anyway
    }
    return allows(col, op, literal);
  }

  private static String column(Expression e) {
    return e instanceof AttributeReference a ? a.name() : null;
  }

  private static String op(BinaryComparison c) {
    if (c instanceof EqualTo || c instanceof EqualNullSafe) {
      return "==";
    }
    if (c instanceof LessThan) {
      return "<";
    }
    if (c instanceof LessThanOrEqual) {
      return "<=";
    }
    if (c instanceof GreaterThan) {
      return ">";
    }
    if (c instanceof GreaterThanOrEqual) {
      return ">=";
    }
    return null;
  }

  private static String flip(String op) {
    switch (op) {
      case "<":
        return ">";
      case "<=":
        return ">=";
      case ">":
        return "<";
      case ">=":
        return "<=";
      default:
        return op;
    }
  }

  /** Whether every bound on {@code col} lets a row satisfy {@code col op literal}. */
  private boolean allows(String col, String op, Object literal) {
    if (col == null) {
      return true;
    }
    for (Bound b : bounds) {
      if (b.column.equalsIgnoreCase(col) && !allows(b, op, literal)) {
        return false;
      }
    }
    return true;
  }

  private static boolean allows(Bound b, String op, Object literal) {
    if (op.equals("isNull")) {
      return b.kind.equals("null");
    }
    if (b.kind.equals("null")) {
      return false; // not null, and every comparison: no null row satisfies them
    }
    if (op.equals("notNull") || b.kind.equals("notNull")) {
      return true;
    }
    if (b.kind.equals("bucket")) {
      Integer of = op.equals("==") ? bucketOf(literal, b.buckets) : null;
      return of == null || of == b.bucket;
    }
    Integer lo = compare(b.lo, literal); // sign of (lo - literal)
    if (lo == null) {
      return true;
    }
    if (b.kind.equals("eq")) {
      switch (op) {
        case "==":
          return lo == 0;
        case "<":
          return lo < 0;
        case "<=":
          return lo <= 0;
        case ">":
          return lo > 0;
        default:
          return lo >= 0;
      }
    }
    Integer hi = b.hi == null ? null : compare(b.hi, literal); // sign of (hi - literal); null: unbounded
    boolean aboveLiteral = b.hi == null || hi == null || hi > 0; // some value in [lo, hi) may exceed literal
    switch (op) {
      case "==":
        return lo <= 0 && aboveLiteral;
      case "<":
        return lo < 0;
      case "<=":
        return lo <= 0;
      default: // > and >=: a value of [lo, hi) at or above the literal
        return aboveLiteral;
    }
  }

  /**
   * Iceberg's {@code bucket[n]} of an integer, date (days) or timestamp (microseconds) literal:
   * Murmur3 x86 32 (seed 0) of its 8 little-endian bytes, which is Spark's {@code hashLong}.
   * Null for any other literal.
   */
  private static Integer bucketOf(Object literal, int n) {
    if (!(literal instanceof Long || literal instanceof Integer || literal instanceof Short || literal instanceof Byte)) {
      return null;
    }
    int hash = Murmur3_x86_32.hashLong(((Number) literal).longValue(), 0);
    return (hash & Integer.MAX_VALUE) % n;
  }

  /** The sign of {@code bound - literal}, or null when they cannot be compared. */
  private static Integer compare(Object bound, Object literal) {
    if (bound instanceof UTF8String s) {
      return literal instanceof UTF8String l ? Integer.signum(s.compareTo(l)) : null;
    }
    BigDecimal b = (BigDecimal) bound;
    BigDecimal l;
    if (literal instanceof Decimal d) {
      l = d.toJavaBigDecimal();
    } else if (literal instanceof Long || literal instanceof Integer || literal instanceof Short || literal instanceof Byte) {
      l = BigDecimal.valueOf(((Number) literal).longValue());
    } else if (literal instanceof Double || literal instanceof Float) {
      double v = ((Number) literal).doubleValue();
      if (Double.isNaN(v) || Double.isInfinite(v)) {
        return null;
      }
      l = BigDecimal.valueOf(v);
    } else {
      return null;
    }
    return Integer.signum(b.compareTo(l));
  }
}
