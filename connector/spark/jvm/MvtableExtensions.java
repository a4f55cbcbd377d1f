package io.mvtable.spark;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;

import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions=io.mvtable.spark.MvtableExtensions}: puts {@link NativeScanRule}
 * into Spark's operator optimization batch from the session's start, for operators who prefer
 * an explicit setting to the rule installing itself on first use.
 */
public final class MvtableExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectOptimizerRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
      @Override
      public Rule<LogicalPlan> apply(SparkSession session) {
        PinLifetime.listen(session.sparkContext());
        return new NativeScanRule();
      }
    });
    return BoxedUnit.UNIT;
  }
}
