//! [`GridAggregateExec`]: an aggregate over a grid scan that folds the scan's cells into
//! dense accumulators as its units decode them ([`PartitionFold`]), in one of two places:
//!
//! - **partial**: in place of DataFusion's partial aggregate, one output partition per scan
//!   partition, its groups' states as the partial aggregate gives them (the final aggregate
//!   above merges them; a cluster's tasks run this);
//! - **single**: in place of the partial and the final aggregate together, in one output
//!   partition: every scan partition folds at once, their states merge group by group by
//!   position (no hash), and the final values come out (in the group keys' order along each
//!   axis).
//!
//! Either way the accumulators are DataFusion's own groups accumulators, so the answers are
//! its aggregates'. Their memory is reserved before the scan starts; when the pool cannot
//! give it, the query runs as DataFusion planned it.

use std::fmt;
use std::sync::Arc;
use std::task::Poll;

use arrow::datatypes::SchemaRef;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{internal_err, DataFusionError, Result, Statistics};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_expr_common::physical_expr::fmt_sql;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::StreamExt;

use super::emit::{partial_batches, Batches, Finals};
use super::fold::{FoldMetrics, PartitionFold};
use super::plan::{GridPlan, Input};
use crate::scan::{FoldTarget, ScanExec};

/// What a grid aggregate gives.
#[derive(Debug, Clone)]
enum Output {
    /// The partial aggregate's states, per scan partition.
    Partial,
    /// The final aggregate's values, in one partition; `fallback` is DataFusion's plan of the
    /// same (the final aggregate over the partial one's partitions).
    Final {
        aggregate: Arc<AggregateExec>,
        fallback: Arc<dyn ExecutionPlan>,
    },
}

/// An aggregate over a grid scan, folded into dense accumulators (see the module).
#[derive(Debug)]
pub(crate) struct GridAggregateExec {
    /// The partial aggregate folded: its keys, aggregates and FILTERs, and its input down to
    /// the scan.
    partial: Arc<AggregateExec>,
    output: Output,
    /// The grid scan, the only child.
    scan: Arc<dyn ExecutionPlan>,
    plan: Arc<GridPlan>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GridAggregateExec {
    /// `partial` (a partial aggregate) folded, when it can be: one output partition per scan
    /// partition, as `partial` has.
    pub(crate) fn partial(partial: &Arc<AggregateExec>) -> Result<Option<Self>> {
        let Some(plan) = GridPlan::new(partial)? else {
            return Ok(None);
        };
        let Some(scan) = scan_of(partial) else {
            return Ok(None);
        };
        Ok(Some(GridAggregateExec {
            partial: Arc::clone(partial),
            output: Output::Partial,
            scan,
            plan: Arc::new(plan),
            properties: Arc::clone(partial.properties()),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    /// `aggregate` (a final aggregate straight over a partial one) folded in one output
    /// partition, when it can be and its accumulators would fit in `memory_limit` bytes.
    pub(crate) fn single(
        aggregate: &Arc<AggregateExec>,
        memory_limit: Option<usize>,
    ) -> Result<Option<Self>> {
        let is_final = matches!(
            aggregate.mode(),
            AggregateMode::Final | AggregateMode::FinalPartitioned
        );
        let Some(partial) = aggregate.input().downcast_ref::<AggregateExec>() else {
            return Ok(None);
        };
        // The final aggregate groups by the partial one's keys, in order (its FILTERs are the
        // partial one's: DataFusion applies them to raw rows only).
        let keys = partial.group_expr().expr().len();
        let same_keys = (aggregate.group_expr().expr().iter().enumerate()).all(|(i, (e, _))| {
            (e.downcast_ref())
                .is_some_and(|c: &datafusion::physical_expr::expressions::Column| c.index() == i)
        }) && aggregate.group_expr().expr().len() == keys
            && aggregate.group_expr().is_single()
            && aggregate.aggr_expr().len() == partial.aggr_expr().len();
        if !is_final || !same_keys || aggregate.limit_options().is_some() {
            return Ok(None);
        }
        let partial = Arc::new(partial.clone());
        let Some(plan) = GridPlan::new(&partial)? else {
            return Ok(None);
        };
        let Some(scan) = scan_of(&partial) else {
            return Ok(None);
        };
        let fits = memory_limit.is_none_or(|limit| single_bytes(&plan) <= limit as u64);
        if !fits {
            return Ok(None);
        }
        let fallback = unfolded(aggregate, &partial)?;
        let properties = PlanProperties::new(
            aggregate.properties().equivalence_properties().clone(),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Ok(Some(GridAggregateExec {
            partial,
            output: Output::Final {
                aggregate: Arc::clone(aggregate),
                fallback,
            },
            scan,
            plan: Arc::new(plan),
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    /// The partial aggregate folded (for a cluster's codec, which sends it).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn partial_aggregate(&self) -> Option<&Arc<AggregateExec>> {
        matches!(self.output, Output::Partial).then_some(&self.partial)
    }

    fn scan(&self) -> Result<&ScanExec> {
        match self.scan.downcast_ref::<ScanExec>() {
            Some(scan) => Ok(scan),
            None => internal_err!(
                "GridAggregateExec reads {}, not a grid scan",
                self.scan.name()
            ),
        }
    }

    /// What names this aggregate in errors and memory reservations.
    fn label(&self, partition: usize) -> String {
        format!("GridAggregateExec[{partition}]")
    }

    /// Partition `p` of the scan folded (its accumulators reserved from `reservation`), or
    /// `None` when the pool cannot give them.
    fn fold(
        &self,
        p: usize,
        context: &Arc<TaskContext>,
        reservation: MemoryReservation,
    ) -> Result<Option<(Arc<PartitionFold>, SendableRecordBatchStream)>> {
        let metrics = FoldMetrics {
            cells: MetricBuilder::new(&self.metrics).counter("cells_folded", p),
            time: MetricBuilder::new(&self.metrics).subset_time("fold_time", p),
        };
        let fold = match PartitionFold::new(
            &self.plan,
            p,
            self.partial.aggr_expr(),
            reservation,
            self.label(p),
            metrics,
        ) {
            Ok(fold) => Arc::new(fold),
            Err(DataFusionError::ResourcesExhausted(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let target = FoldTarget {
            columns: self.plan.columns.clone(),
            schema: Arc::clone(&self.plan.schema),
            fold: Arc::clone(&fold) as _,
        };
        let stream = self
            .scan()?
            .execute_folding(p, Arc::clone(context), &target)?;
        Ok(Some((fold, stream)))
    }
}

/// The grid scan at the bottom of `partial`'s input.
fn scan_of(partial: &AggregateExec) -> Option<Arc<dyn ExecutionPlan>> {
    Input::of(partial.input()).map(|input| Arc::clone(input.plan))
}

/// DataFusion's plan of the final `aggregate` over `partial` in one partition: the final
/// aggregate over the partial one's partitions.
fn unfolded(
    aggregate: &AggregateExec,
    partial: &Arc<AggregateExec>,
) -> Result<Arc<dyn ExecutionPlan>> {
    Ok(Arc::new(AggregateExec::try_new(
        AggregateMode::Final,
        aggregate.group_expr().clone(),
        aggregate.aggr_expr().to_vec(),
        aggregate.filter_expr().to_vec(),
        Arc::new(CoalescePartitionsExec::new(Arc::clone(partial) as _)),
        partial.schema(),
    )?))
}

/// `plan` with its grid scan replaced by `scan`.
fn with_scan(
    plan: &Arc<AggregateExec>,
    scan: &Arc<dyn ExecutionPlan>,
) -> Result<Arc<dyn ExecutionPlan>> {
    (Arc::clone(plan) as Arc<dyn ExecutionPlan>)
        .transform_up(|node| match node.downcast_ref::<ScanExec>() {
            Some(_) => Ok(Transformed::yes(Arc::clone(scan))),
            None => Ok(Transformed::no(node)),
        })
        .data()
}

/// Bytes a single grid aggregate holds at most: every partition's accumulators and the
/// merged ones.
fn single_bytes(plan: &GridPlan) -> u64 {
    let partitions: u64 = (0..plan.windows.len())
        .map(|p| plan.partition_groups(p))
        .fold(0, u64::saturating_add);
    partitions
        .saturating_add(plan.groups())
        .saturating_mul(plan.group_bytes)
}

impl DisplayAs for GridAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<&str> = (self.partial.group_expr().expr().iter())
            .map(|(_, name)| name.as_str())
            .collect();
        let aggregates: Vec<&str> = (self.partial.aggr_expr().iter())
            .map(|a| a.name())
            .collect();
        let mode = match self.output {
            Output::Partial => "Partial",
            Output::Final { .. } => "Single",
        };
        let shape: Vec<String> = self.plan.shape().iter().map(u32::to_string).collect();
        let reads: Vec<&str> = (self.plan.schema.fields().iter())
            .map(|f| f.name().as_str())
            .collect();
        if let DisplayFormatType::TreeRender = t {
            writeln!(f, "mode={mode}")?;
            return writeln!(f, "groups={}", shape.join("×"));
        }
        write!(
            f,
            "GridAggregateExec: mode={mode}, gby=[{}], aggr=[{}], groups={}, reads=[{}]",
            keys.join(", "),
            aggregates.join(", "),
            shape.join("×"),
            reads.join(", ")
        )?;
        // Sub-expressions evaluated once per index of their axis.
        let per_index: Vec<String> = (self.plan.broadcasts.iter())
            .map(|b| fmt_sql(b.expr.as_ref()).to_string())
            .collect();
        match per_index.is_empty() {
            true => Ok(()),
            false => write!(f, ", per_index=[{}]", per_index.join(", ")),
        }
    }
}

impl ExecutionPlan for GridAggregateExec {
    fn name(&self) -> &str {
        "GridAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.scan]
    }

    /// The fold reads the scan's partitions itself: nothing may come between.
    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let [scan] = children.as_slice() else {
            return internal_err!("GridAggregateExec has one child");
        };
        let partial = with_scan(&self.partial, scan)?;
        let Some(partial) = partial.downcast_ref::<AggregateExec>() else {
            return internal_err!("GridAggregateExec lost its partial aggregate");
        };
        let partial = Arc::new(partial.clone());
        match &self.output {
            Output::Partial => match GridAggregateExec::partial(&partial)? {
                Some(folded) => Ok(Arc::new(folded)),
                None => Ok(partial),
            },
            Output::Final { aggregate, .. } => {
                let aggregate =
                    Arc::clone(aggregate).with_new_children(vec![Arc::clone(&partial) as _])?;
                let Some(aggregate) = aggregate.downcast_ref::<AggregateExec>() else {
                    return internal_err!("GridAggregateExec lost its final aggregate");
                };
                let aggregate = Arc::new(aggregate.clone());
                match GridAggregateExec::single(&aggregate, None)? {
                    Some(folded) => Ok(Arc::new(folded)),
                    None => unfolded(&aggregate, &partial),
                }
            }
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        match &self.output {
            Output::Partial => self.execute_partial(partition, context),
            Output::Final {
                aggregate,
                fallback,
            } => {
                if partition != 0 {
                    return internal_err!("GridAggregateExec has one partition, not {partition}");
                }
                self.execute_single(aggregate, fallback, context)
            }
        }
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// At most the groups of the plan's shape (of a partition's window): what the planner
    /// sizes joins by (a climatology of 1.2M groups is the side a join builds, not the
    /// 10^8 cells it is joined with).
    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let groups = match (&self.output, partition) {
            (Output::Partial, Some(p)) => self.plan.partition_groups(p),
            _ => self.plan.groups(),
        };
        let rows = usize::try_from(groups).unwrap_or(usize::MAX);
        let statistics =
            Statistics::new_unknown(&self.schema()).with_num_rows(Precision::Inexact(rows));
        Ok(Arc::new(statistics))
    }
}

impl GridAggregateExec {
    fn execute_partial(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let reservation =
            MemoryConsumer::new(self.label(partition)).register(context.memory_pool());
        let Some((fold, mut stream)) = self.fold(partition, &context, reservation)? else {
            // The pool cannot hold the accumulators: DataFusion's plan.
            return self.partial.execute(partition, context);
        };
        let plan = Arc::clone(&self.plan);
        let schema = self.partial.schema();
        let batch_size = context.session_config().batch_size();
        let out = Arc::clone(&schema);
        let batches = async move {
            while let Some(batch) = stream.next().await {
                batch?;
            }
            drop(stream);
            let folded = fold.finish()?;
            Ok(partial_batches(plan, partition, folded, out, batch_size))
        };
        let baseline = BaselineMetrics::new(&self.metrics, partition);
        Ok(output(schema, baseline, batches))
    }

    fn execute_single(
        &self,
        aggregate: &Arc<AggregateExec>,
        fallback: &Arc<dyn ExecutionPlan>,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let plan = &self.plan;
        let partitions = plan.windows.len();
        // Everything reserved before any partition starts: each partition's accumulators,
        // then the merged ones.
        let pool = context.memory_pool();
        let mut folds = Vec::with_capacity(partitions);
        for p in 0..partitions {
            let reservation =
                MemoryConsumer::new(format!("GridAggregateExec[0] partition {p}")).register(pool);
            match self.fold(p, &context, reservation)? {
                Some(fold) => folds.push(fold),
                None => return fallback.execute(0, context),
            }
        }
        let merged = MemoryConsumer::new(self.label(0)).register(pool);
        let merged_bytes = plan.groups().saturating_mul(plan.group_bytes);
        if merged
            .try_grow(usize::try_from(merged_bytes).unwrap_or(usize::MAX))
            .is_err()
        {
            return fallback.execute(0, context);
        }
        let state_counts = (self.partial.aggr_expr().iter())
            .map(|a| a.state_fields().map(|f| f.len()))
            .collect::<Result<Vec<_>>>()?;
        let finals = Finals {
            plan: Arc::clone(plan),
            finals: aggregate.aggr_expr().to_vec(),
            state_counts,
            schema: aggregate.schema(),
            batch_size: context.session_config().batch_size(),
        };
        let batches = async move {
            // Each partition folds on a task of its own.
            let running = (folds.into_iter()).map(|(fold, mut stream)| {
                SpawnedTask::spawn(async move {
                    while let Some(batch) = stream.next().await {
                        batch?;
                    }
                    fold.finish()
                })
            });
            let folded = futures::future::try_join_all(running.map(|task| async move {
                task.await
                    .map_err(|e| DataFusionError::External(Box::new(e)))?
            }))
            .await?;
            // The merged accumulators stay reserved while the groups are given.
            let batches = finals.batches(folded)?.inspect(move |_| {
                let _ = &merged;
            });
            Ok(Box::new(batches) as Batches)
        };
        let baseline = BaselineMetrics::new(&self.metrics, 0);
        Ok(output(aggregate.schema(), baseline, batches))
    }
}

/// The batches `batches` gives once it is ready (its error alone when it fails), each made
/// as the stream is read and counted as the node's output.
fn output(
    schema: SchemaRef,
    baseline: BaselineMetrics,
    batches: impl std::future::Future<Output = Result<Batches>> + Send + 'static,
) -> SendableRecordBatchStream {
    let elapsed = baseline.elapsed_compute().clone();
    let stream = futures::stream::once(batches)
        .map(move |r| match r {
            Ok(batches) => {
                let elapsed = elapsed.clone();
                // Each batch timed as it is made.
                let timed = std::iter::from_fn({
                    let mut batches = batches;
                    move || {
                        let _timer = elapsed.timer();
                        batches.next()
                    }
                });
                futures::stream::iter(timed).boxed()
            }
            Err(e) => futures::stream::iter(vec![Err(e)]).boxed(),
        })
        .flatten()
        .map(
            move |batch| match baseline.record_poll(Poll::Ready(Some(batch))) {
                Poll::Ready(Some(batch)) => batch,
                _ => internal_err!("a batch was lost while counted"),
            },
        );
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

#[cfg(test)]
mod tests {
    use datafusion::execution::memory_pool::{
        GreedyMemoryPool, MemoryConsumer, MemoryLimit, MemoryPool,
    };
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;
    use datafusion::physical_plan::{collect, displayable};
    use datafusion::prelude::{SessionConfig, SessionContext};

    use super::*;

    /// Every cell of the daily fixture its own group: 19,200 groups.
    const QUERY: &str = "SELECT time, lat, lon, avg(temp), var(temp), min(temp), count(*) \
                         FROM daily GROUP BY time, lat, lon";

    /// A pool that refuses grid aggregates' reservations, as a pool other queries have
    /// filled would, and gives everyone else what they ask.
    #[derive(Debug)]
    struct RefusingGridAggregates(GreedyMemoryPool);

    impl fmt::Display for RefusingGridAggregates {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.name())
        }
    }

    impl MemoryPool for RefusingGridAggregates {
        fn name(&self) -> &str {
            "refusing grid aggregates"
        }
        fn grow(&self, reservation: &MemoryReservation, additional: usize) {
            self.0.grow(reservation, additional)
        }
        fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
            self.0.shrink(reservation, shrink)
        }
        fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
            match reservation
                .consumer()
                .name()
                .starts_with("GridAggregateExec")
            {
                true => Err(DataFusionError::ResourcesExhausted("refused".into())),
                false => self.0.try_grow(reservation, additional),
            }
        }
        fn reserved(&self) -> usize {
            self.0.reserved()
        }
        fn memory_limit(&self) -> MemoryLimit {
            MemoryLimit::Unknown
        }
    }

    /// Bytes of the tests' pools: more than they need.
    const PLENTY: usize = 1 << 30;

    async fn session(pool: Arc<dyn MemoryPool>) -> SessionContext {
        let runtime = RuntimeEnvBuilder::new().with_memory_pool(pool);
        let config = SessionConfig::new().with_target_partitions(2);
        let ctx = crate::new_session_context_with_runtime(config, runtime.build_arc().unwrap());
        let create = "CREATE EXTERNAL TABLE daily STORED AS ZARR \
                      LOCATION 'tests/data/grid/daily_v3.zarr'";
        ctx.sql(create).await.unwrap();
        ctx
    }

    async fn plan(ctx: &SessionContext) -> Arc<dyn ExecutionPlan> {
        ctx.sql(QUERY)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap()
    }

    fn text(plan: &Arc<dyn ExecutionPlan>) -> String {
        displayable(plan.as_ref()).indent(true).to_string()
    }

    /// The plan's grid aggregate, when it has one.
    fn grid(plan: &Arc<dyn ExecutionPlan>) -> Option<Arc<dyn ExecutionPlan>> {
        if plan.downcast_ref::<GridAggregateExec>().is_some() {
            return Some(Arc::clone(plan));
        }
        plan.children().into_iter().find_map(grid)
    }

    /// The rows of `plan`, sorted.
    async fn rows(plan: Arc<dyn ExecutionPlan>, ctx: &SessionContext) -> Vec<String> {
        let batches = collect(plan, ctx.task_ctx()).await.unwrap();
        let text = arrow::util::pretty::pretty_format_batches(&batches).unwrap();
        let mut rows: Vec<String> = text.to_string().lines().map(String::from).collect();
        rows.sort();
        rows
    }

    fn cells_folded(node: &Arc<dyn ExecutionPlan>) -> usize {
        let metrics = node.metrics().unwrap();
        metrics
            .sum_by_name("cells_folded")
            .map_or(0, |c| c.as_usize())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn accumulators_a_pool_cannot_hold_are_left_to_datafusion() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(64 << 20));
        let ctx = session(Arc::clone(&pool)).await;
        let folded = plan(&ctx).await;
        let node = grid(&folded).expect("a grid aggregate");
        let want = rows(folded, &ctx).await;
        assert_eq!(cells_folded(&node), 19_200);
        // Planned while another query holds all but 1 MiB: the accumulators (2.8 MB) would
        // not fit, the plan is DataFusion's, and answers the same once that query is gone.
        let other = MemoryConsumer::new("another query").register(&pool);
        other.try_grow(63 << 20).unwrap();
        let hashed = plan(&ctx).await;
        drop(other);
        assert!(grid(&hashed).is_none(), "{}", text(&hashed));
        assert_eq!(rows(hashed, &ctx).await, want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pool_short_when_the_query_runs_runs_datafusions_plan() {
        let want = {
            let ctx = session(Arc::new(GreedyMemoryPool::new(PLENTY))).await;
            rows(plan(&ctx).await, &ctx).await
        };
        let pool = RefusingGridAggregates(GreedyMemoryPool::new(PLENTY));
        let ctx = session(Arc::new(pool)).await;
        let folded = plan(&ctx).await;
        let node = grid(&folded).expect("a grid aggregate");
        assert_eq!(rows(folded, &ctx).await, want);
        assert_eq!(cells_folded(&node), 0, "{}", text(&node));
    }
}
