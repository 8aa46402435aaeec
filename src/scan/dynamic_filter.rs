//! DataFusion's dynamic filters in a scan: the threshold a TopK publishes as it fills (`time >
//! 71` for `ORDER BY time DESC LIMIT 10`) and the bounds a hash join publishes once its build
//! side is read. The scan never filters rows with them (the operator that published one
//! still does); it skips whole units whose statistics show no row can pass, checking each
//! unit as it is about to be read, so a threshold that tightens while the scan runs prunes
//! the units read after it.
//!
//! A TopK only publishes a threshold once it holds its `fetch` rows, so the units read first
//! decide how much is pruned: a scan laid out for the sort ([`super::ScanSource::read_first`])
//! reads its leading units (those most likely to hold the answer) before it starts any other
//! ([`LeadGate`]): otherwise the units read ahead would start before the threshold exists.

use std::sync::{Arc, Mutex};

use arrow::datatypes::SchemaRef;
use datafusion::common::pruning::PrunableStatistics;
use datafusion::common::Statistics;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::snapshot_generation;
use datafusion::physical_optimizer::pruning::PruningPredicate;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use futures::{FutureExt, StreamExt};
use tokio::sync::watch;

use super::batches::on_unit_end;
use super::source::UnitRead;

/// Decides, unit by unit, whether a partition's dynamic filter rules a unit out.
pub(crate) struct UnitPruner {
    filter: Arc<dyn PhysicalExpr>,
    schema: SchemaRef,
    /// The predicate of the filter's last generation (`None` inside: it cannot prune), so it
    /// is rebuilt only when the filter changed.
    predicate: Mutex<Option<(u64, Option<Arc<PruningPredicate>>)>>,
    pruned: Count,
}

impl UnitPruner {
    /// A pruner of `partition`'s units counting those it prunes as `{units}_pruned`.
    pub(crate) fn new(
        filter: Arc<dyn PhysicalExpr>,
        schema: SchemaRef,
        units: &str,
        metrics: &ExecutionPlanMetricsSet,
        partition: usize,
    ) -> Self {
        let pruned = MetricBuilder::new(metrics).counter(format!("{units}_pruned"), partition);
        UnitPruner {
            filter,
            schema,
            predicate: Mutex::new(None),
            pruned,
        }
    }

    /// Whether no row of a unit with `statistics` can pass the filter as it stands now.
    pub(crate) fn prunes(&self, statistics: Statistics) -> bool {
        let Some(predicate) = self.current() else {
            return false;
        };
        let stats = PrunableStatistics::new(vec![Arc::new(statistics)], Arc::clone(&self.schema));
        // A predicate that cannot be evaluated on these statistics keeps the unit.
        let pruned = matches!(predicate.prune(&stats).as_deref(), Ok([false]));
        if pruned {
            self.pruned.add(1);
        }
        pruned
    }

    /// The predicate of the filter's current generation, built when it changed.
    fn current(&self) -> Option<Arc<PruningPredicate>> {
        let generation = snapshot_generation(&self.filter);
        let mut cached = self.predicate.lock().unwrap_or_else(|e| e.into_inner());
        match &*cached {
            Some((built, predicate)) if *built == generation => predicate.clone(),
            _ => {
                let predicate =
                    PruningPredicate::try_new(Arc::clone(&self.filter), Arc::clone(&self.schema))
                        .ok()
                        .filter(|p| !p.always_true())
                        .map(Arc::new);
                *cached = Some((generation, predicate.clone()));
                predicate
            }
        }
    }
}

/// A unit read only when the pruner keeps it: checked when the unit is reached (after `gate`
/// opens, when given), and `read` called only then (a source may start its work when called);
/// an empty unit when pruned.
pub(crate) fn pruned_unit(
    read: impl FnOnce() -> UnitRead + Send + 'static,
    pruner: Arc<UnitPruner>,
    statistics: impl FnOnce() -> Statistics + Send + 'static,
    gate: Option<Arc<LeadGate>>,
) -> UnitRead {
    async move {
        if let Some(gate) = gate {
            gate.opened().await;
        }
        if pruner.prunes(statistics()) {
            return Ok(futures::stream::empty().boxed());
        }
        read().await
    }
    .boxed()
}

/// Holds a partition's later units until its leading units have all been consumed (their
/// batches taken by the plan above, so a TopK has seen them and published its threshold).
pub(crate) struct LeadGate {
    /// Leading units not yet consumed.
    remaining: watch::Sender<usize>,
}

impl LeadGate {
    /// A gate opening once `lead` units have been consumed (open at once when 0).
    pub(crate) fn new(lead: usize) -> Arc<Self> {
        Arc::new(LeadGate {
            remaining: watch::Sender::new(lead),
        })
    }

    /// `unit`, a leading unit: its end counts towards opening the gate.
    pub(crate) fn lead(self: &Arc<Self>, unit: UnitRead) -> UnitRead {
        let gate = Arc::clone(self);
        on_unit_end(unit, move || {
            gate.remaining.send_modify(|n| *n = n.saturating_sub(1))
        })
    }

    /// Waits until every leading unit has been consumed.
    async fn opened(&self) {
        let mut remaining = self.remaining.subscribe();
        // The sender lives in `self`, so the wait ends only when the count reaches 0.
        let _ = remaining.wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::stats::Precision;
    use datafusion::common::{ColumnStatistics, ScalarValue};
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{
        lit, BinaryExpr, Column, DynamicFilterPhysicalExpr,
    };
    use futures::TryStreamExt;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new(
            "time",
            DataType::Int64,
            false,
        )]))
    }

    fn unit_between(min: i64, max: i64) -> Statistics {
        let mut stats = Statistics::new_unknown(&schema());
        stats.column_statistics[0] = ColumnStatistics {
            min_value: Precision::Exact(ScalarValue::Int64(Some(min))),
            max_value: Precision::Exact(ScalarValue::Int64(Some(max))),
            null_count: Precision::Exact(0),
            ..ColumnStatistics::new_unknown()
        };
        stats
    }

    /// A filter that tightens while units are checked prunes by its newest threshold; one
    /// that cannot be evaluated on statistics prunes nothing.
    #[test]
    fn units_are_pruned_by_the_filter_as_it_stands() {
        let time: Arc<dyn PhysicalExpr> = Arc::new(Column::new("time", 0));
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&time)],
            lit(true),
        ));
        let metrics = ExecutionPlanMetricsSet::new();
        let pruner = UnitPruner::new(filter.clone(), schema(), "chunks", &metrics, 0);
        assert!(!pruner.prunes(unit_between(0, 23)));
        let above = |t: i64| -> Arc<dyn PhysicalExpr> {
            Arc::new(BinaryExpr::new(Arc::clone(&time), Operator::Gt, lit(t)))
        };
        filter.update(above(40)).unwrap();
        assert!(pruner.prunes(unit_between(0, 23)));
        assert!(!pruner.prunes(unit_between(24, 47)));
        filter.update(above(47)).unwrap();
        assert!(pruner.prunes(unit_between(24, 47)));
        assert!(!pruner.prunes(unit_between(48, 71)));
        // No statistics for the column: kept.
        assert!(!pruner.prunes(Statistics::new_unknown(&schema())));
        let pruned = metrics.clone_inner().sum_by_name("chunks_pruned").unwrap();
        assert_eq!(pruned.as_usize(), 2);
    }

    fn unit(rows: i64) -> UnitRead {
        async move {
            let batch =
                RecordBatch::try_new(schema(), vec![Arc::new(Int64Array::from(vec![rows]))])?;
            Ok(futures::stream::iter([Ok(batch)]).boxed())
        }
        .boxed()
    }

    /// A later unit starts only when every leading unit's batches have been taken.
    #[tokio::test]
    async fn later_units_wait_for_the_leading_ones() {
        let time: Arc<dyn PhysicalExpr> = Arc::new(Column::new("time", 0));
        let filter = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&time)],
            lit(true),
        ));
        let metrics = ExecutionPlanMetricsSet::new();
        let pruner = Arc::new(UnitPruner::new(
            filter.clone(),
            schema(),
            "chunks",
            &metrics,
            0,
        ));
        let gate = LeadGate::new(2);
        let later = pruned_unit(
            || unit(3),
            Arc::clone(&pruner),
            || unit_between(0, 9),
            Some(Arc::clone(&gate)),
        );
        let mut later = tokio::spawn(later);
        tokio::task::yield_now().await;
        assert!(!later.is_finished());
        let above: Arc<dyn PhysicalExpr> =
            Arc::new(BinaryExpr::new(time, Operator::Gt, lit(9_i64)));
        for n in [1, 2] {
            let batches: Vec<RecordBatch> = gate
                .lead(unit(n))
                .await
                .unwrap()
                .try_collect()
                .await
                .unwrap();
            assert_eq!(batches.len(), 1);
            if n == 1 {
                tokio::task::yield_now().await;
                assert!(!later.is_finished());
                // What the TopK publishes having seen the leading units prunes the later one.
                filter.update(Arc::clone(&above)).unwrap();
            }
        }
        let batches: Vec<RecordBatch> = (&mut later)
            .await
            .unwrap()
            .unwrap()
            .try_collect()
            .await
            .unwrap();
        assert!(batches.is_empty());
    }
}
