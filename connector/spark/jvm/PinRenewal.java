package io.mvtable.spark;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceCreationResult;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * The calls into the Python source that change a native read's pin; Python alone reads and
 * writes pin files. Before a query of the DataFrame or view runs, the pin is renewed to the
 * full {@code pinTtl} if {@link PinLifetime} cut it to {@code pinIdleTtl} or half of
 * {@code pinTtl} has passed since the last renewal (Python extends it, or pins the version
 * again if it lapsed while the version is still whole, else raises the typed error); when
 * no running query reads it any more, it is cut. Both hold the plan's lock, so a cut never
 * lands after a renewal made for a query that counts as running.
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

  /** Renew the pin if it was cut or half of pinTtl has passed. */
  static void renewIfDue(NativePlan plan) {
    long every = intervalMs(plan);
    if (!plan.idle && System.currentTimeMillis() - plan.renewedAtMs < every) {
      return;
    }
    synchronized (plan) {
      if (!plan.idle && System.currentTimeMillis() - plan.renewedAtMs < every) {
        return;
      }
      renew(plan);
    }
  }

  /**
   * Whether a query may start on the cut pin and have it renewed beside it: at least half of
   * its pinIdleTtl is left, far more than one renewal takes. A query that starts on a pin close
   * to its end (or past it) renews first, so that a lapsed pin is made again, or the query fails
   * with the typed error, before it reads a file.
   */
  static boolean idleLongEnough(NativePlan plan) {
    return plan.idle && System.currentTimeMillis() < plan.idleSinceMs + plan.idleTtlMs / 2;
  }

  /** Renew a cut pin for a query that runs now; true if it was renewed. */
  static boolean renewIfIdle(NativePlan plan) {
    synchronized (plan) {
      if (plan.idle && plan.running.get() > 0) {
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
