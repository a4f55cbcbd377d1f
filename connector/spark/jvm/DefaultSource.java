package mvtable;

import java.util.HashMap;
import java.util.Map;

import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.DataSourceManager;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceCreationResult;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

import io.mvtable.spark.NativePlan;
import io.mvtable.spark.NativeScanRule;
import io.mvtable.spark.NativeTable;
import io.mvtable.spark.PinLifetime;
import io.mvtable.spark.PythonReadTable;

/**
 * What {@code format("mvtable")} and {@code USING mvtable} resolve to while mvtable's jar is on
 * the classpath.
 *
 * <p>Spark's {@code DataSource.lookupDataSource} tries the class {@code mvtable.DefaultSource}
 * before it asks the session's Python data source manager, so this class is found by name. It
 * is Spark's own Python data source provider (Spark sets its short name to "mvtable", so it runs
 * the Python "mvtable" source): writes, streams, reads with a user schema and every read the
 * Python side declines go through Python exactly as without the jar. A batch read asks Python,
 * in the one planner call Spark makes for it anyway ({@code schema()}), for the scan plan too:
 * which version (pinned), which files, where their deletion vectors are. The table then carries
 * the plan, and {@link NativeScanRule} replaces its relation with Spark's Parquet file scan.
 * Planning stays in Python; this side only routes and reads.
 */
public class DefaultSource extends PythonDataSourceV2 {
  /** Internal option that asks the Python source for the plan; Python removes it first. */
  public static final String PLAN_OPTION = "mvtable.nativePlan";

  /**
   * The Python source's second name ({@code connector/spark/source.py}): a Spark Connect client
   * cannot register "mvtable" on a server whose classpath has this class (Spark refuses the name),
   * so it registers the same source under this one.
   */
  public static final String PYTHON_ALIAS = "mvtable_python";

  private String name = "mvtable";
  private NativePlan plan;

  @Override
  public void setShortName(String shortName) {
    String python = pythonSourceName(shortName);
    super.setShortName(python);
    name = python;
  }

  /** {@code shortName}, unless only the alias is registered in the active session. */
  private static String pythonSourceName(String shortName) {
    scala.Option<org.apache.spark.sql.classic.SparkSession> active =
        org.apache.spark.sql.classic.SparkSession$.MODULE$.getActiveSession();
    if (active.isEmpty()) {
      return shortName;
    }
    DataSourceManager sources = active.get().sessionState().dataSourceManager();
    boolean aliasOnly = !sources.dataSourceExists(shortName) && sources.dataSourceExists(PYTHON_ALIAS);
    return aliasOnly ? PYTHON_ALIAS : shortName;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    if (!NativeScanRule.enabled()) {
      NativeScanRule.fallback(NativeScanRule.SWITCH_CONF + "=false");
      return super.inferSchema(options);
    }
    Map<String, String> withFlag = new HashMap<>(options.asCaseSensitiveMap());
    withFlag.put(PLAN_OPTION, "1");
    // Spark caches this first creation result on the provider: a read that ends up in Python
    // (no rule in the session) reads this very instance, with the version it pinned.
    PythonDataSourceCreationResult created;
    try {
      created = getOrCreateDataSourceInPython(name, new CaseInsensitiveStringMap(withFlag), scala.Option.empty());
    } catch (Exception e) {  // Scala declares none: an AnalysisException arrives unchecked
      if (!(e instanceof AnalysisException) || !"DATA_SOURCE_NOT_EXIST".equals(((AnalysisException) e).getCondition())) {
        throw DefaultSource.<RuntimeException>rethrow(e);
      }
      throw new IllegalStateException("mvtable: this session has mvtable's jar but no Python 'mvtable' data source. "
          + "Spark's Python workers (spark.pyspark.python, PYSPARK_PYTHON) need mvtable installed "
          + "(pip install 'mvtable[spark]'); with an editable install, call mvtable.register(spark) or put a "
          + "folder holding pyspark_mvtable.py on PYTHONPATH", e);
    }
    NativePlan.Parsed parsed = NativePlan.split(created.schema());
    plan = parsed.plan;
    if (plan != null && plan.nativeRead) {
      plan.readOptions.putAll(options.asCaseSensitiveMap());
      NativeScanRule.installInActiveSession();
      PinLifetime.listen(org.apache.spark.sql.SparkSession.active().sparkContext());
    } else if (plan != null) {
      NativeScanRule.fallback(plan.reason);
    }
    return parsed.schema;
  }

  @SuppressWarnings("unchecked")
  private static <E extends Exception> E rethrow(Exception e) throws E {
    throw (E) e;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    if (plan == null) {  // Spark did not ask for the schema: a write, or a user-given schema
      return new PythonReadTable(this, name, schema);
    }
    if (!plan.nativeRead) {
      return super.getTable(schema, partitioning, properties);
    }
    return new NativeTable(this, name, schema, plan);
  }
}
