package io.mvtable.spark;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceCreationResult;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The calls into the Python source that change a native read's pin; Python alone reads and
 * writes pin files. While a query of the DataFrame or view runs, the pin is renewed to the
 * full {@code pinTtl} once it is due: half of its {@code pinIdleTtl} used up since {@link
 * PinLifetime} cut it (or Python made it), or half of {@code pinTtl} since the last renewal
 * (Python extends it, or pins the version again if it lapsed while the version is still whole,
 * else raises the typed error); when no running query reads a renewed pin any more, it is cut.
 * Both hold the plan's lock, so a cut never lands after a renewal made for a query that counts
 * as running.
 */
final class PinRenewal {
  /** Milliseconds between renewals; default: what the plan says (half of pinTtl). */
  static final String INTERVAL_CONF = "spark.mvtable.pinRenewIntervalMs";
  static final String RENEW_OPTION = "mvtable.renewPin";
  static final String IDLE_OPTION = "mvtable.idlePin";
  private static final AtomicLong RENEWALS = new AtomicLong();

  private PinRenewal() {}

  /** How many pins this process renewed. */
  static long renewals() {
    return RENEWALS.get();
  }

  /**
   * Renew the pin if it is due: a cut pin once half of its pinIdleTtl has passed, a renewed one
   * once half of pinTtl has.
   */
  static void renewIfDue(NativePlan plan) {
    if (!due(plan)) {
      return;
    }
    synchronized (plan) {
      if (due(plan)) {
        renew(plan);
      }
    }
  }

  private static boolean due(NativePlan plan) {
    if (plan.idle) {
      return !idleLongEnough(plan);
    }
    return System.currentTimeMillis() - plan.renewedAtMs >= intervalMs(plan);
  }

  /**
   * Whether a query may run on the cut pin as it is: at least half of its pinIdleTtl (and a few
   * seconds) is left, and the timer (every second) renews it for a query still running when
   * that half is used up. A query that starts on a pin closer to its end (or past it) renews
   * first, so that a lapsed pin is made again, or the query fails with the typed error, before
   * it reads a file.
   */
  static boolean idleLongEnough(NativePlan plan) {
    long left = plan.idleSinceMs + plan.idleTtlMs - System.currentTimeMillis();
    return plan.idle && left > plan.idleTtlMs / 2 && left > MIN_IDLE_LEFT_MS;
  }

  /** A cut pin with less left than this is renewed before a query: the timer checks each second. */
  private static final long MIN_IDLE_LEFT_MS = 3000;

  /** Renew a cut pin that is due, for a query that runs now; true if it was renewed. */
  static boolean renewIfIdle(NativePlan plan) {
    synchronized (plan) {
      if (plan.idle && plan.running.get() > 0 && !idleLongEnough(plan)) {
        renew(plan);
        return true;
      }
      return false;
    }
  }

  /**
   * Cut the pin to pinIdleTtl unless a query counts as running or a later cut was scheduled
   * ({@code scheduled} is not the newest: a query ended since, and its own cut comes later);
   * true if it was cut.
   */
  static boolean cutIfUnused(NativePlan plan, long scheduled) {
    synchronized (plan) {
      if (plan.idle || plan.running.get() > 0 || plan.cutsScheduled.get() != scheduled) {
        return false;
      }
      long cutAt = System.currentTimeMillis();  // the cut pin lasts pinIdleTtl from after this
      NativePlan.pinOf(call(plan, IDLE_OPTION).schema(), "idled");
      plan.idleSinceMs = cutAt;
      plan.idle = true;
      return true;
    }
  }

  private static void renew(NativePlan plan) {
    plan.pinId = NativePlan.pinOf(call(plan, RENEW_OPTION).schema(), "renewed");
    plan.renewedAtMs = System.currentTimeMillis();
    plan.idle = false;
    RENEWALS.incrementAndGet();
  }

  private static PythonDataSourceCreationResult call(NativePlan plan, String option) {
    if (plan.provider == null) {
      throw new IllegalStateException("mvtable: this scan plan has no Python source to ask (it was deserialized)");
    }
    Map<String, String> options = new HashMap<>(plan.readOptions);
    options.put(option, plan.version + ":" + plan.pinId);
    return plan.provider.source().createDataSourceInPython(plan.sourceName, new CaseInsensitiveStringMap(options),
        scala.Option.empty());
  }

  private static long intervalMs(NativePlan plan) {
    scala.Option<SparkSession> session = SparkSession.getActiveSession();
    if (session.isEmpty()) {  // PinLifetime's thread
      session = SparkSession.getDefaultSession();
    }
    String conf = session.isDefined() ? session.get().conf().get(INTERVAL_CONF, "") : "";
    return conf.isEmpty() ? plan.renewAfterMs : Long.parseLong(conf.trim());
  }
}
