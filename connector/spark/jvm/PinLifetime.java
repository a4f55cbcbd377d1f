package io.mvtable.spark;

import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.columnar.InMemoryRelation;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import scala.runtime.BoxedUnit;

/**
 * Holds a native read's pin only while a query reads it: Spark's SQL execution events say when
 * a query starts and ends, which the Python data source is never told.
 *
 * <p>Every SQL execution that reads a plan ({@link PlannedFileIndex}, or a {@link NativeTable}
 * not rewritten yet) counts as running from its start to its end. Counted in the query's own
 * thread when {@link NativeScanRule} optimizes it inside the execution (so before it reads a
 * file), else from the start event (a DataFrame's plan optimized once and run again by a later
 * action). When the last running execution of a plan ends, its pin is cut to {@code pinIdleTtl}
 * (Python rewrites the pin file); queries of one DataFrame running side by side never cut it
 * under each other. A plan starts idle (Python pins it so). A query that starts while the cut
 * pin has at least half of pinIdleTtl left runs under it with no Python call at all; the timer
 * renews the pin to the full {@code pinTtl} ({@link PinRenewal}) only if the query is still
 * running once half of pinIdleTtl has passed. A query that starts later renews first: the pin
 * is extended, or made again if it lapsed while the version is still whole, or the query fails
 * with the typed error. So a short query costs no Python call while its pin is fresh (a call
 * beside every query took CPU from the query itself on a small machine), and a finished query's
 * pin outlives it by at least half of pinIdleTtl and at most pinIdleTtl.
 * The pin is not released: the DataFrame or view may be queried again.
 *
 * <p>The cut waits a moment ({@link #graceMs}: a tenth of pinIdleTtl, at most two seconds)
 * and is dropped if another query of the plan started or ended meanwhile: queries run back to
 * back then cost no Python call each, and the pin outlives the last one by that moment plus
 * pinIdleTtl.
 *
 * <p>While a query runs, its pin is renewed every half of {@code pinTtl} (checked each second),
 * so a query that runs longer than {@code pinTtl} keeps its version.
 *
 * <p>Calls into Python run on one daemon thread, in order, never on Spark's listener thread; a
 * failure there or in the listener is logged and only leaves the pin at its longer expiry.
 */
public final class PinLifetime extends SparkListener {
  private static final Logger LOG = LoggerFactory.getLogger("mvtable");
  private static final Set<SparkContext> LISTENING = Collections.newSetFromMap(new WeakHashMap<>());
  /** Running execution id → the plans it reads. Guarded by itself. */
  private static final Map<Long, Set<NativePlan>> RUNNING = new HashMap<>();
  private static final ScheduledExecutorService CALLS = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "mvtable-pin-lifetime");
    t.setDaemon(true);
    return t;
  });
  private static final long MAX_GRACE_MS = 2000;
  /** Cuts scheduled and not run yet. */
  private static final AtomicInteger PENDING = new AtomicInteger();
  private static final AtomicLong ENDED = new AtomicLong();
  private static final AtomicLong CUTS = new AtomicLong();
  private static final AtomicLong WAKES = new AtomicLong();
  private static final java.util.concurrent.atomic.AtomicBoolean TIMER = new java.util.concurrent.atomic.AtomicBoolean();

  private PinLifetime() {}

  /** Listens to {@code sc}'s SQL executions, once per SparkContext. */
  public static void listen(SparkContext sc) {
    synchronized (LISTENING) {
      if (LISTENING.add(sc)) {
        sc.addSparkListener(new PinLifetime());
        if (TIMER.compareAndSet(false, true)) {
          CALLS.scheduleWithFixedDelay(PinLifetime::renewRunning, 1, 1, TimeUnit.SECONDS);
        }
      }
    }
  }

  /**
   * In the query's thread, when {@link NativeScanRule} optimizes a query of {@code table}: count
   * it as running under the query's execution and, if the pin is due, renew it before it reads.
   */
  static void queried(NativeTable table) {
    NativePlan plan = table.plan();
    String id = SparkSession.active().sparkContext().getLocalProperty(SQLExecution$.MODULE$.EXECUTION_ID_KEY());
    if (id != null) {
      started(Long.parseLong(id), plan);
    }
    if (id == null || !PinRenewal.idleLongEnough(plan)) {
      // else the cut pin holds the version for at least half of pinIdleTtl more: the query
      // runs under it, and the timer renews it only if the query is still running by then
      PinRenewal.renewIfDue(plan);
    }
    if (id == null && plan.running.get() == 0) {
      // optimized outside an execution (explain, cache): nothing runs it now; a later run
      // of this plan is seen by its start event
      scheduleCut(plan);
    }
  }

  /** True when {@code plan} was not counted under execution {@code id} yet. */
  private static boolean started(long id, NativePlan plan) {
    synchronized (RUNNING) {
      Set<NativePlan> plans = RUNNING.computeIfAbsent(id, k -> Collections.newSetFromMap(new IdentityHashMap<>()));
      if (!plans.add(plan)) {
        return false;
      }
      plan.running.incrementAndGet();
      return true;
    }
  }

  private static Set<NativePlan> ended(long id) {
    synchronized (RUNNING) {
      Set<NativePlan> plans = RUNNING.remove(id);
      if (plans == null) {
        return Collections.newSetFromMap(new IdentityHashMap<>());
      }
      for (NativePlan p : plans) {
        p.running.decrementAndGet();
      }
      return plans;
    }
  }

  /**
   * The plans of counted executions that are over although their end never reached this
   * listener (Spark drops events when its listener queue is full), uncounted: else their pins
   * would never be cut again.
   */
  private static Set<NativePlan> endedUnheard() {
    Set<NativePlan> out = Collections.newSetFromMap(new IdentityHashMap<>());
    Map<Object, QueryExecution> live = SQLExecution$.MODULE$.executionIdToQueryExecution();
    synchronized (RUNNING) {
      java.util.Iterator<Map.Entry<Long, Set<NativePlan>>> it = RUNNING.entrySet().iterator();
      while (it.hasNext()) {
        Map.Entry<Long, Set<NativePlan>> e = it.next();
        if (!live.containsKey(e.getKey())) {  // Spark forgets an execution only after it ended
          for (NativePlan p : e.getValue()) {
            p.running.decrementAndGet();
          }
          out.addAll(e.getValue());
          it.remove();
        }
      }
    }
    return out;
  }

  @Override
  public void onOtherEvent(SparkListenerEvent event) {
    try {
      if (event instanceof SparkListenerSQLExecutionStart) {
        long id = ((SparkListenerSQLExecutionStart) event).executionId();
        QueryExecution qe = SQLExecution$.MODULE$.getQueryExecution(id);
        if (qe != null) {  // null: it ended already
          for (NativePlan p : plansOf(qe)) {
            if (started(id, p)) {
              CALLS.execute(() -> wake(p));
            }
          }
        }
      } else if (event instanceof SparkListenerSQLExecutionEnd) {
        SparkListenerSQLExecutionEnd end = (SparkListenerSQLExecutionEnd) event;
        Set<NativePlan> done = ended(end.executionId());
        if (end.qe() != null) {  // an execution whose start came too late to be counted read these too
          done.addAll(plansOf(end.qe()));
        }
        done.addAll(endedUnheard());
        for (NativePlan p : done) {
          if (p.running.get() == 0) {
            scheduleCut(p);
          }
        }
        ENDED.incrementAndGet();
      }
    } catch (Throwable t) {
      LOG.warn("mvtable: could not follow which queries read a pinned version ({}); such a pin keeps "
          + "its longer expiry", t.toString());
    }
  }

  private static void wake(NativePlan plan) {
    try {
      if (PinRenewal.renewIfIdle(plan)) {
        WAKES.incrementAndGet();
      }
    } catch (Throwable t) {  // the query then reads under a lapsed pin: say so, it may fail on a missing file
      LOG.warn("mvtable: could not renew the pin of version {} of {} for a running query: {}", plan.version,
          plan.root, t.toString());
    }
  }

  /** Renews the pins of running queries that are due (a query may run longer than pinTtl). */
  private static void renewRunning() {
    Set<NativePlan> running = Collections.newSetFromMap(new IdentityHashMap<>());
    synchronized (RUNNING) {
      for (Set<NativePlan> plans : RUNNING.values()) {
        running.addAll(plans);
      }
    }
    for (NativePlan plan : running) {
      try {
        PinRenewal.renewIfDue(plan);
      } catch (Throwable t) {  // never ends the timer: tried again an interval later
        plan.renewedAtMs = System.currentTimeMillis();
        LOG.warn("mvtable: could not renew the pin of version {} of {} for a running query: {}", plan.version,
            plan.root, t.toString());
      }
    }
  }

  static long graceMs(NativePlan plan) {
    return Math.min(MAX_GRACE_MS, Math.max(0, plan.idleTtlMs / 10));
  }

  private static void scheduleCut(NativePlan plan) {
    long scheduled = plan.cutsScheduled.incrementAndGet();
    PENDING.incrementAndGet();
    try {
      CALLS.schedule(() -> cut(plan, scheduled), graceMs(plan), TimeUnit.MILLISECONDS);
    } catch (RuntimeException e) {
      PENDING.decrementAndGet();
      throw e;
    }
  }

  private static void cut(NativePlan plan, long scheduled) {
    try {
      if (PinRenewal.cutIfUnused(plan, scheduled)) {
        CUTS.incrementAndGet();
      }
    } catch (Throwable t) {
      LOG.warn("mvtable: could not cut the pin of version {} of {} to pinIdleTtl; it expires pinTtl after "
          + "its last renewal: {}", plan.version, plan.root, t.toString());
    } finally {
      PENDING.decrementAndGet();
    }
  }

  /** The plans {@code qe} reads (its optimized plan, subqueries and cached plans included). */
  static Set<NativePlan> plansOf(QueryExecution qe) {
    Set<NativePlan> out = Collections.newSetFromMap(new IdentityHashMap<>());
    LogicalPlan optimized;
    try {
      optimized = qe.optimizedPlan();
    } catch (Throwable t) {  // it failed to plan: it reads nothing
      return out;
    }
    collect(optimized, out);
    return out;
  }

  private static void collect(LogicalPlan plan, Set<NativePlan> out) {
    plan.foreachWithSubqueries(p -> {
      if (p instanceof LogicalRelation && ((LogicalRelation) p).relation() instanceof HadoopFsRelation) {
        Object location = ((HadoopFsRelation) ((LogicalRelation) p).relation()).location();
        if (location instanceof PlannedFileIndex && !((PlannedFileIndex) location).plan().pinnedOutside) {
          out.add(((PlannedFileIndex) location).plan());
        }
      } else if (p instanceof InMemoryRelation) {
        collect(((InMemoryRelation) p).cacheBuilder().logicalPlan(), out);
      } else {
        NativeTable table = NativeScanRule.nativeTable(p);
        if (table != null) {
          out.add(table.plan());
        }
      }
      return BoxedUnit.UNIT;
    });
  }

  /** How many SQL execution ends this process has handled (tests wait on it). */
  public static long executionsEnded() {
    return ENDED.get();
  }

  /** How many cut pins this process renewed from a query's start event (a plan Spark optimized before). */
  public static long startRenewals() {
    return WAKES.get();
  }

  /** How many pins this process cut to pinIdleTtl. */
  public static long pinCuts() {
    return CUTS.get();
  }

  /** Waits until the cuts scheduled and the Python calls asked for so far are done (tests). */
  public static boolean settle(long timeoutMs) throws InterruptedException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    while (PENDING.get() > 0) {
      if (System.currentTimeMillis() > deadline) {
        return false;
      }
      Thread.sleep(10);
    }
    java.util.concurrent.Future<?> done = CALLS.submit(() -> {});
    try {
      done.get(Math.max(1, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
      return true;
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      return false;
    }
  }
}
