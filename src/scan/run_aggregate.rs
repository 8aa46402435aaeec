//! [`RunAggregateExec`]: the partial aggregate of a grid scan grouped by keys of its axes
//! whose values come in long runs (`GROUP BY date_trunc('month', time)` over a grid of
//! 10^5 cells a day). DataFusion's aggregate finds each row's group by hashing its key, even
//! in sorted mode; here a batch is cut where its keys change (`arrow::compute::partition`,
//! one comparison a row) and each run updates its group's accumulators at once, so the cost
//! per row is the aggregate's own arithmetic.
//!
//! It replaces `AggregateExec: mode=Partial` only where the scan says every key's runs are
//! long (at least [`MIN_RUN_ROWS`] rows, so at most one group per 1,024 rows) and the
//! aggregates are plain (no DISTINCT, ORDER BY or FILTER). Its output is the partial
//! aggregate's: keys and accumulator states, which the final aggregate above merges, in the
//! order the keys first came (the scan's order, so the plan's orderings hold).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::partition;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{Result, ScalarValue};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Accumulator;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::metrics::{BaselineMetrics, ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use futures::StreamExt;

use super::exec::ScanExec;

/// Keys whose runs are shorter than this are left to DataFusion's hash aggregate.
pub(crate) const MIN_RUN_ROWS: u64 = 1024;

/// A partial aggregate over runs of equal keys.
#[derive(Debug)]
pub(crate) struct RunAggregateExec {
    /// The partial aggregate this replaces: its keys, aggregates, schema and properties.
    aggregate: Arc<AggregateExec>,
    metrics: ExecutionPlanMetricsSet,
}

/// Partial aggregates over key runs where the scan says runs are long: the rule runs after
/// DataFusion's own rules (which settle the aggregate's mode and partitioning).
#[derive(Debug, Default)]
pub(crate) struct RunAggregates;

impl PhysicalOptimizerRule for RunAggregates {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(aggregate) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            Ok(
                match RunAggregateExec::replacing(&Arc::new(aggregate.clone())) {
                    Some(runs) => Transformed::yes(Arc::new(runs) as Arc<dyn ExecutionPlan>),
                    None => Transformed::no(node),
                },
            )
        })
        .data()
    }

    fn name(&self) -> &str {
        "RunAggregates"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

impl RunAggregateExec {
    /// `aggregate` run over key runs, when it may be: a partial aggregate over an ndfusion
    /// scan, grouped by plain columns whose runs the scan says are long, of plain aggregates.
    pub(crate) fn replacing(aggregate: &Arc<AggregateExec>) -> Option<Self> {
        let scan = aggregate.input().downcast_ref::<ScanExec>()?;
        let group = aggregate.group_expr();
        let columns = (group.expr().iter())
            .map(|(e, _)| e.downcast_ref::<Column>().map(Column::index))
            .collect::<Option<Vec<_>>>()?;
        let plain = (aggregate.aggr_expr().iter())
            .all(|a| !a.is_distinct() && a.order_bys().is_empty())
            && aggregate.filter_expr().iter().all(Option::is_none);
        let eligible = *aggregate.mode() == AggregateMode::Partial
            && group.is_single()
            && !columns.is_empty()
            && plain
            && aggregate.limit_options().is_none();
        let long_runs = scan.rows_per_key_run(&columns)? >= MIN_RUN_ROWS;
        (eligible && long_runs).then(|| RunAggregateExec {
            aggregate: Arc::clone(aggregate),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }
}

impl DisplayAs for RunAggregateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<&str> = (self.aggregate.group_expr().expr().iter())
            .map(|(_, name)| name.as_str())
            .collect();
        let aggregates: Vec<&str> = (self.aggregate.aggr_expr().iter())
            .map(|a| a.name())
            .collect();
        write!(
            f,
            "RunAggregateExec: mode=Partial, gby=[{}], aggr=[{}]",
            keys.join(", "),
            aggregates.join(", ")
        )
    }
}

impl ExecutionPlan for RunAggregateExec {
    fn name(&self) -> &str {
        "RunAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.aggregate.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![self.aggregate.input()]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let aggregate = Arc::clone(&self.aggregate).with_new_children(children)?;
        match aggregate.downcast_ref::<AggregateExec>() {
            Some(a) => match RunAggregateExec::replacing(&Arc::new(a.clone())) {
                Some(runs) => Ok(Arc::new(runs)),
                None => Ok(aggregate),
            },
            None => Ok(aggregate),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = self
            .aggregate
            .input()
            .execute(partition, Arc::clone(&context))?;
        let aggregate = Arc::clone(&self.aggregate);
        let metrics = BaselineMetrics::new(&self.metrics, partition);
        let schema = aggregate.schema();
        let reservation = MemoryConsumer::new(format!("RunAggregateExec[{partition}]"))
            .register(context.memory_pool());
        let result = async move {
            let mut groups = Groups::new(&aggregate, reservation);
            let mut input = input;
            while let Some(batch) = input.next().await {
                let batch = batch?;
                let _timer = metrics.elapsed_compute().timer();
                groups.update(&batch)?;
            }
            let _timer = metrics.elapsed_compute().timer();
            let out = groups.finish()?;
            metrics.record_output(out.num_rows());
            Ok(out)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::once(result),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// One partition's groups: their keys in the order first seen, and their accumulators, whose
/// memory is reserved from the session's pool (an aggregate such as `array_agg` keeps every
/// value: past the pool's limit the query fails with DataFusion's error naming this scan).
struct Groups {
    aggregate: Arc<AggregateExec>,
    keys: Vec<Vec<ScalarValue>>,
    /// Where each key's group is, and the group of the last run (runs of sorted keys find
    /// theirs at once).
    index: HashMap<Vec<ScalarValue>, usize>,
    last: Option<usize>,
    accumulators: Vec<Vec<Box<dyn Accumulator>>>,
    /// The accumulators' bytes, kept up to date run by run, and their reservation.
    bytes: usize,
    reservation: MemoryReservation,
}

impl Groups {
    fn new(aggregate: &Arc<AggregateExec>, reservation: MemoryReservation) -> Self {
        Groups {
            aggregate: Arc::clone(aggregate),
            keys: Vec::new(),
            index: HashMap::new(),
            last: None,
            accumulators: Vec::new(),
            bytes: 0,
            reservation,
        }
    }

    /// The group of `key`, made when first seen.
    fn group_of(&mut self, key: Vec<ScalarValue>) -> Result<usize> {
        if let Some(last) = self.last.filter(|&g| self.keys[g] == key) {
            return Ok(last);
        }
        if let Some(&at) = self.index.get(&key) {
            self.last = Some(at);
            return Ok(at);
        }
        let accumulators = (self.aggregate.aggr_expr().iter())
            .map(|a| a.create_accumulator())
            .collect::<Result<Vec<_>>>()?;
        self.bytes += accumulators.iter().map(|a| a.size()).sum::<usize>();
        self.bytes += key.iter().map(ScalarValue::size).sum::<usize>() * 2;
        let at = self.keys.len();
        self.index.insert(key.clone(), at);
        self.keys.push(key);
        self.accumulators.push(accumulators);
        self.last = Some(at);
        Ok(at)
    }

    fn update(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let keys = (self.aggregate.group_expr().expr().iter())
            .map(|(e, _)| e.evaluate(batch)?.into_array(batch.num_rows()))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let arguments = (self.aggregate.aggr_expr().iter())
            .map(|a| {
                (a.expressions().iter())
                    .map(|e| e.evaluate(batch)?.into_array(batch.num_rows()))
                    .collect::<Result<Vec<ArrayRef>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        for run in partition(&keys)?.ranges() {
            let key = (keys.iter())
                .map(|k| ScalarValue::try_from_array(k, run.start))
                .collect::<Result<Vec<_>>>()?;
            let group = self.group_of(key)?;
            for (accumulator, args) in self.accumulators[group].iter_mut().zip(&arguments) {
                let slices: Vec<ArrayRef> =
                    args.iter().map(|a| a.slice(run.start, run.len())).collect();
                let before = accumulator.size();
                accumulator.update_batch(&slices)?;
                self.bytes = (self.bytes + accumulator.size()).saturating_sub(before);
            }
        }
        self.reservation.try_resize(self.bytes)
    }

    /// The keys, then each aggregate's state, one row per group.
    fn finish(mut self) -> Result<RecordBatch> {
        let schema = self.aggregate.schema();
        if self.keys.is_empty() {
            return Ok(RecordBatch::new_empty(schema));
        }
        let mut columns: Vec<ArrayRef> = Vec::new();
        for k in 0..self.aggregate.group_expr().expr().len() {
            let values = self.keys.iter().map(|key| key[k].clone());
            columns.push(ScalarValue::iter_to_array(values)?);
        }
        let states = (self.accumulators.iter_mut())
            .map(|group| {
                group
                    .iter_mut()
                    .map(|a| a.state())
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        for (a, aggregate) in self.aggregate.aggr_expr().iter().enumerate() {
            for s in 0..aggregate.state_fields()?.len() {
                let values = states.iter().map(|group| group[a][s].clone());
                columns.push(ScalarValue::iter_to_array(values)?);
            }
        }
        // Each column as the partial aggregate's schema says (a state's scalar may carry a
        // narrower type, such as a NULL).
        let columns = (columns.iter().zip(schema.fields()))
            .map(|(c, f)| arrow::compute::cast(c, f.data_type()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}
