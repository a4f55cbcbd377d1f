package io.mvtable.spark;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceCreationResult;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Keeps the version of a native read pinned while it is queried, as the Python reader's tasks
 * do: when a query of the DataFrame or view is optimized and half of {@code pinTtl} has passed
 * since the last renewal, the Python source renews the pin (one planner call; Python decides,
 * and pins the version again if the pin expired while the version is still whole). A read left
 * unqueried lets its pin expire, as on the Python route.
 */
final class PinRenewal {
  /** Milliseconds between renewals; default: what the plan says (half of pinTtl). */
  static final String INTERVAL_CONF = "spark.mvtable.pinRenewIntervalMs";
  static final String RENEW_OPTION = "mvtable.renewPin";
  private static final AtomicLong RENEWALS = new AtomicLong();

  private PinRenewal() {}

  /** How many pins this process renewed. */
  static long renewals() {
    return RENEWALS.get();
  }

  static void renewIfDue(NativeTable table) {
    NativePlan plan = table.plan();
    long every = intervalMs(plan);
    if (System.currentTimeMillis() - plan.renewedAtMs < every) {
      return;
    }
    synchronized (plan) {
      if (System.currentTimeMillis() - plan.renewedAtMs < every) {
        return;
      }
      Map<String, String> options = new HashMap<>(plan.readOptions);
      options.put(RENEW_OPTION, plan.version + ":" + plan.pinId);
      PythonDataSourceCreationResult renewed = table.provider().source()
          .createDataSourceInPython(table.name(), new CaseInsensitiveStringMap(options), scala.Option.empty());
      plan.pinId = NativePlan.renewedPinId(renewed.schema());
      plan.renewedAtMs = System.currentTimeMillis();
      RENEWALS.incrementAndGet();
    }
  }

  private static long intervalMs(NativePlan plan) {
    String conf = SparkSession.active().conf().get(INTERVAL_CONF, "");
    return conf.isEmpty() ? plan.renewAfterMs : Long.parseLong(conf.trim());
  }
}
