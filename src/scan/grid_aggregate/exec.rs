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

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{internal_err, DataFusionError, Result, Statistics};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{LexOrdering, PhysicalSortExpr};
use datafusion::physical_expr_common::physical_expr::fmt_sql;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::windows::WindowAggExec;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use super::emit::{partial_batches, Batches, DenseFinals, Finals};
use super::fold::{FoldMetrics, Folded, PartitionFold};
use super::input::Folding;
use super::lookup::{Lookup, LookupTable};
use super::plan::GridPlan;
use crate::scan::{FoldTarget, ScanExec};
use crate::yielding::unwrapped;

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
#[derive(Debug, Clone)]
pub(crate) struct GridAggregateExec {
    /// The partial aggregate folded: its keys, aggregates and FILTERs, and its input down to
    /// the scan.
    partial: Arc<AggregateExec>,
    output: Output,
    /// The grid scan, the first child.
    scan: Arc<dyn ExecutionPlan>,
    /// The tables looked up (the plan's lookups'), the other children.
    tables: Vec<Arc<dyn ExecutionPlan>>,
    plan: Arc<GridPlan>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GridAggregateExec {
    /// Whether `other` folds what this one folds: the same plan over the same scan (its
    /// tables may have been given again, as `with_new_children` takes them).
    pub(crate) fn folds_as(&self, other: &GridAggregateExec) -> bool {
        Arc::ptr_eq(&self.plan, &other.plan) && same(&self.scan, &other.scan)
    }

    /// `partial` (a partial aggregate) folded, when it can be: one output partition per scan
    /// partition, as `partial` has.
    pub(crate) fn partial(partial: &Arc<AggregateExec>) -> Result<Option<Self>> {
        let Some(plan) = GridPlan::new(partial, &Folds { memory_limit: None })? else {
            return Ok(None);
        };
        // A cluster's task folds its own cells: a table looked up would be run by each.
        if !plan.lookups.is_empty() {
            return Ok(None);
        }
        let scan = Arc::clone(&plan.scan);
        Ok(Some(GridAggregateExec {
            partial: Arc::clone(partial),
            output: Output::Partial,
            scan,
            tables: Vec::new(),
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
        // A table looked up is planned within the same limit.
        let Some(plan) = GridPlan::new(&partial, &Folds { memory_limit })? else {
            return Ok(None);
        };
        let scan = Arc::clone(&plan.scan);
        let fits = memory_limit.is_none_or(|limit| single_bytes(&plan) <= limit as u64);
        if !fits {
            return Ok(None);
        }
        let tables: Vec<_> = plan.lookups.iter().map(|l| Arc::clone(&l.table)).collect();
        let fallback = unfolded(aggregate, &runnable(&partial, &tables)?)?;
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
            tables,
            plan: Arc::new(plan),
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }

    /// The number of group keys, when this gives final values (one row per group, the keys
    /// first): what a join with it may look up.
    pub(crate) fn final_keys(&self) -> Option<usize> {
        match self.output {
            Output::Final { .. } => Some(self.partial.group_expr().expr().len()),
            Output::Partial => None,
        }
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
        lookups: &[Arc<LookupTable>],
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
            lookups.to_vec(),
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

/// Grid aggregates as the walk of an input asks for them (`input.rs`).
struct Folds {
    /// The bytes the pool can still give, when it has a limit.
    memory_limit: Option<usize>,
}

impl Folding for Folds {
    fn final_keys(&self, plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
        plan.downcast_ref::<GridAggregateExec>()?.final_keys()
    }

    fn single(&self, aggregate: Arc<AggregateExec>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let folded = GridAggregateExec::single(&aggregate, self.memory_limit)?;
        Ok(folded.map(|f| Arc::new(f) as _))
    }
}

/// Whether `a` and `b` are one node.
fn same(a: &Arc<dyn ExecutionPlan>, b: &Arc<dyn ExecutionPlan>) -> bool {
    let (a, b) = (unwrapped(a), unwrapped(b));
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// `plan` with each node that is one of `old` replaced by the `new` at its place.
fn with_replaced(
    plan: &Arc<AggregateExec>,
    old: &[&Arc<dyn ExecutionPlan>],
    new: &[Arc<dyn ExecutionPlan>],
) -> Result<Arc<dyn ExecutionPlan>> {
    (Arc::clone(plan) as Arc<dyn ExecutionPlan>)
        .transform_up(|node| match old.iter().position(|o| same(o, &node)) {
            Some(i) => Ok(Transformed::yes(Arc::clone(&new[i]))),
            None => Ok(Transformed::no(node)),
        })
        .data()
}

/// `partial`'s input made runnable as it stands, for the fallback of a fold with lookups
/// (DataFusion's later rules never see it): a join still `Auto` collects the table looked
/// up, a window reads its input sorted by its partition keys in one partition.
fn runnable(
    partial: &Arc<AggregateExec>,
    tables: &[Arc<dyn ExecutionPlan>],
) -> Result<Arc<AggregateExec>> {
    if tables.is_empty() {
        return Ok(Arc::clone(partial));
    }
    let is_table = |p: &Arc<dyn ExecutionPlan>| tables.iter().any(|t| same(t, p));
    let made = (Arc::clone(partial) as Arc<dyn ExecutionPlan>)
        .transform_up(|node| {
            if let Some(join) = node.downcast_ref::<HashJoinExec>() {
                if *join.partition_mode() != PartitionMode::Auto {
                    return Ok(Transformed::no(node));
                }
                return Ok(Transformed::yes(match is_table(join.right()) {
                    true => join.swap_inputs(PartitionMode::CollectLeft)?,
                    false => (join.builder())
                        .with_partition_mode(PartitionMode::CollectLeft)
                        .build_exec()?,
                }));
            }
            if let Some(window) = node.downcast_ref::<WindowAggExec>() {
                let ordering =
                    (window.partition_keys().into_iter()).map(PhysicalSortExpr::new_default);
                let input = Arc::new(CoalescePartitionsExec::new(Arc::clone(window.input())));
                let sorted: Arc<dyn ExecutionPlan> = match LexOrdering::new(ordering) {
                    Some(ordering) => Arc::new(SortExec::new(ordering, input)),
                    None => input,
                };
                let window = WindowAggExec::try_new(window.window_expr().to_vec(), sorted, false)?;
                return Ok(Transformed::yes(Arc::new(window) as _));
            }
            Ok(Transformed::no(node))
        })
        .data()?;
    match made.downcast_ref::<AggregateExec>() {
        Some(made) => Ok(Arc::new(made.clone())),
        None => internal_err!("a grid aggregate's fallback lost its aggregate"),
    }
}

/// Bytes a single grid aggregate holds at most: every partition's accumulators and the
/// merged ones (none when partitions are apart), and the tables looked up.
fn single_bytes(plan: &GridPlan) -> u64 {
    let partitions: u64 = (0..plan.windows.len())
        .map(|p| plan.partition_groups(p))
        .fold(0, u64::saturating_add);
    let lookups = (plan.lookups.iter().map(Lookup::bytes)).fold(0, u64::saturating_add);
    partitions
        .saturating_add(plan.merged_groups())
        .saturating_mul(plan.group_bytes)
        .saturating_add(lookups)
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
        if !per_index.is_empty() {
            write!(f, ", per_index=[{}]", per_index.join(", "))?;
        }
        // Tables looked up by grid position, with their dense shapes.
        let lookups: Vec<String> = (self.plan.lookups.iter())
            .map(|l| {
                let shape: Vec<String> = l.shape().iter().map(u32::to_string).collect();
                format!("{} ({})", l.label, shape.join("×"))
            })
            .collect();
        match lookups.is_empty() {
            true => Ok(()),
            false => write!(f, ", lookups=[{}]", lookups.join(", ")),
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

    /// The scan, then the tables looked up.
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        std::iter::once(&self.scan).chain(&self.tables).collect()
    }

    /// The fold reads the scan's partitions itself: nothing may come between.
    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false; 1 + self.tables.len()]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let old = self.children();
        if old.len() != children.len() {
            return internal_err!("GridAggregateExec has {} children", old.len());
        }
        // The same scan: the tables (each still one row per key, as DataFusion's rules
        // keep rows) taken as they are.
        if same(&self.scan, &children[0]) {
            for (old, new) in self.tables.iter().zip(&children[1..]) {
                if old.schema().fields() != new.schema().fields() {
                    return internal_err!("a table looked up by GridAggregateExec changed");
                }
            }
            let mut folded = self.as_ref().clone();
            folded.tables = children[1..].to_vec();
            return Ok(Arc::new(folded));
        }
        // Planned again over the new children (a window's tables are made again from its
        // input).
        let partial = with_replaced(&self.partial, &old, &children)?;
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
                    None => unfolded(&aggregate, &runnable(&partial, &children[1..])?),
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
        let Some((fold, mut stream)) = self.fold(partition, &context, reservation, &[])? else {
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
        if self.plan.lookups.is_empty() {
            return self.fold_single(aggregate, fallback, context, &[]);
        }
        // The tables looked up are run and laid out first; then the cells are folded.
        let this = self.clone();
        let (aggregate, fallback) = (Arc::clone(aggregate), Arc::clone(fallback));
        let schema = aggregate.schema();
        let stream = futures::stream::once(async move {
            match this.lookup_tables(&context).await? {
                Some(tables) => this.fold_single(&aggregate, &fallback, context, &tables),
                None => fallback.execute(0, context),
            }
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    /// The tables looked up, run and laid out; `None` when the pool cannot hold them.
    async fn lookup_tables(
        &self,
        context: &Arc<TaskContext>,
    ) -> Result<Option<Vec<Arc<LookupTable>>>> {
        let pool = context.memory_pool();
        let mut tables = Vec::with_capacity(self.plan.lookups.len());
        for (l, lookup) in self.plan.lookups.iter().enumerate() {
            let name = format!("GridAggregateExec[0] lookup {l}");
            let reservation = MemoryConsumer::new(name).register(pool);
            let table = Arc::clone(&self.tables[l]);
            match LookupTable::build(lookup, table, Arc::clone(context), reservation).await {
                Ok(table) => tables.push(Arc::new(table)),
                Err(DataFusionError::ResourcesExhausted(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        Ok(Some(tables))
    }

    /// Every partition of the scan folded at once (cells finding their rows in `lookups`),
    /// their states merged and finished.
    fn fold_single(
        &self,
        aggregate: &Arc<AggregateExec>,
        fallback: &Arc<dyn ExecutionPlan>,
        context: Arc<TaskContext>,
        lookups: &[Arc<LookupTable>],
    ) -> Result<SendableRecordBatchStream> {
        let Some(folding) = self.fold_all(aggregate, &context, lookups)? else {
            return fallback.execute(0, context);
        };
        let batches = async move {
            let (finals, folded, merged) = folding.await?;
            // The merged accumulators stay reserved while the groups are given.
            let batches = finals.batches(folded)?.inspect(move |_| {
                let _ = &merged;
            });
            Ok(Box::new(batches) as Batches)
        };
        let baseline = BaselineMetrics::new(&self.metrics, 0);
        Ok(output(aggregate.schema(), baseline, batches))
    }

    /// Every partition of the scan started folding (each on a task of its own, once the
    /// future is polled), with what finishes them: their folds, the final aggregate's
    /// functions and the merged accumulators' reservation. `None`, before anything runs,
    /// when the pool cannot hold the accumulators.
    #[allow(clippy::type_complexity)]
    fn fold_all(
        &self,
        aggregate: &Arc<AggregateExec>,
        context: &Arc<TaskContext>,
        lookups: &[Arc<LookupTable>],
    ) -> Result<
        Option<
            impl std::future::Future<Output = Result<(Finals, Vec<Folded>, MemoryReservation)>>
                + Send
                + 'static,
        >,
    > {
        let plan = &self.plan;
        let partitions = plan.windows.len();
        // Everything reserved before any partition starts: each partition's accumulators,
        // then the merged ones.
        let pool = context.memory_pool();
        let mut folds = Vec::with_capacity(partitions);
        for p in 0..partitions {
            let reservation =
                MemoryConsumer::new(format!("GridAggregateExec[0] partition {p}")).register(pool);
            match self.fold(p, context, reservation, lookups)? {
                Some(fold) => folds.push(fold),
                None => return Ok(None),
            }
        }
        let merged = MemoryConsumer::new(self.label(0)).register(pool);
        let merged_bytes = plan.merged_groups().saturating_mul(plan.group_bytes);
        if merged
            .try_grow(usize::try_from(merged_bytes).unwrap_or(usize::MAX))
            .is_err()
        {
            return Ok(None);
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
        Ok(Some(async move {
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
            Ok((finals, folded, merged))
        }))
    }

    /// The final values laid out on the aggregate's grid, for a `COPY` that writes them as
    /// a dataset (`nd/on_grid.rs`): `None`, before the scan is read, when this gives no
    /// final values or the pool cannot hold the accumulators, the tables looked up or the
    /// values laid out (`reservation` grows by the last).
    pub(crate) async fn dense(
        &self,
        context: &Arc<TaskContext>,
        reservation: &mut MemoryReservation,
    ) -> Result<Option<DenseFinals>> {
        let Output::Final { aggregate, .. } = &self.output else {
            return Ok(None);
        };
        // The values (and the final ones before they are placed), a row index per group.
        let width: u64 = (aggregate
            .schema()
            .fields()
            .iter()
            .skip(self.plan.keys.len()))
        .map(|f| f.data_type().primitive_width().unwrap_or(16) as u64)
        .sum();
        let bytes = self
            .plan
            .groups()
            .saturating_mul(width.saturating_mul(2) + 8);
        if reservation
            .try_grow(usize::try_from(bytes).unwrap_or(usize::MAX))
            .is_err()
        {
            return Ok(None);
        }
        let tables = match self.plan.lookups.is_empty() {
            true => Vec::new(),
            false => match self.lookup_tables(context).await? {
                Some(tables) => tables,
                None => return Ok(None),
            },
        };
        let Some(folding) = self.fold_all(aggregate, context, &tables)? else {
            return Ok(None);
        };
        let (finals, folded, _merged) = folding.await?;
        let values = SpawnedTask::spawn_blocking(move || finals.dense(folded))
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))??;
        Ok(Some(values))
    }

    /// Per group key (in the aggregate's order): its axis, and each of that axis's groups'
    /// key value; `None` when two keys read one axis.
    pub(crate) fn key_axes(&self) -> Option<Vec<(usize, ArrayRef)>> {
        let mut axes = Vec::with_capacity(self.plan.keys.len());
        for &(axis, k) in &self.plan.keys {
            if k != 0 || axes.iter().any(|(a, _)| *a == axis) {
                return None;
            }
            axes.push((axis, Arc::clone(self.plan.axes[axis].key(k)?)));
        }
        Some(axes)
    }

    /// Whether each group is one cell read (no two indices of an axis share a group).
    pub(crate) fn cell_per_group(&self) -> bool {
        !self.plan.axes.iter().any(|a| a.merges())
    }

    /// Groups along each axis.
    pub(crate) fn shape(&self) -> Vec<u32> {
        self.plan.shape()
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

    async fn plan(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
        ctx.sql(sql)
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
        let folded = plan(&ctx, QUERY).await;
        let node = grid(&folded).expect("a grid aggregate");
        let want = rows(folded, &ctx).await;
        assert_eq!(cells_folded(&node), 19_200);
        // Planned while another query holds all but 1 MiB: the accumulators (2.8 MB) would
        // not fit, the plan is DataFusion's, and answers the same once that query is gone.
        let other = MemoryConsumer::new("another query").register(&pool);
        other.try_grow(63 << 20).unwrap();
        let hashed = plan(&ctx, QUERY).await;
        drop(other);
        assert!(grid(&hashed).is_none(), "{}", text(&hashed));
        assert_eq!(rows(hashed, &ctx).await, want);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn partitions_apart_reserve_no_accumulators_of_the_whole_shape() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(64 << 20));
        let ctx = session(Arc::clone(&pool)).await;
        let want = rows(plan(&ctx, QUERY).await, &ctx).await;
        // Every day its own groups: the two partitions' windows follow one another along
        // time, and their accumulators (19,200 groups in all) are all the fold holds.
        let folded = plan(&ctx, QUERY).await;
        let node = grid(&folded).expect("a grid aggregate");
        let grid_plan = &node.downcast_ref::<GridAggregateExec>().unwrap().plan;
        assert!(grid_plan.apart());
        let held = single_bytes(grid_plan);
        assert_eq!(held, grid_plan.groups() * grid_plan.group_bytes);
        // Planned and run with a little more than that left: folded, not refused for
        // accumulators of the whole shape it never makes.
        let other = MemoryConsumer::new("another query").register(&pool);
        other.try_grow((64 << 20) - held as usize * 3 / 2).unwrap();
        let folded = plan(&ctx, QUERY).await;
        let node = grid(&folded).expect("a grid aggregate");
        assert_eq!(rows(folded, &ctx).await, want);
        assert_eq!(cells_folded(&node), 19_200);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pool_short_when_the_query_runs_runs_datafusions_plan() {
        let want = {
            let ctx = session(Arc::new(GreedyMemoryPool::new(PLENTY))).await;
            rows(plan(&ctx, QUERY).await, &ctx).await
        };
        let pool = RefusingGridAggregates(GreedyMemoryPool::new(PLENTY));
        let ctx = session(Arc::new(pool)).await;
        let folded = plan(&ctx, QUERY).await;
        let node = grid(&folded).expect("a grid aggregate");
        assert_eq!(rows(folded, &ctx).await, want);
        assert_eq!(cells_folded(&node), 0, "{}", text(&node));
    }

    /// An anomaly against a climatology of `daily`, joined on `on` (`d` the cells, `c` the
    /// climatology by month, lat and lon).
    fn anomaly_join(join: &str, on: &str) -> String {
        format!(
            "WITH c AS (SELECT extract(month FROM time) AS mo, lat, lon, avg(temp) AS m \
             FROM daily GROUP BY 1, 2, 3) \
             SELECT avg(abs(d.temp - c.m)), count(*), count(c.m) FROM daily d {join} c ON {on}"
        )
    }

    const ON_EVERY_KEY: &str =
        "extract(month FROM d.time) = c.mo AND d.lat = c.lat AND d.lon = c.lon";

    /// The window form, over `window`.
    fn anomaly_window(window: &str) -> String {
        format!(
            "SELECT avg(abs(temp - m)), count(*), count(m) FROM \
             (SELECT temp, avg(temp) OVER ({window}) AS m FROM daily) w"
        )
    }

    /// `rows` with their numbers to 12 digits (sums taken in another order).
    fn rounded(rows: Vec<String>) -> Vec<String> {
        (rows.iter())
            .map(|r| {
                (r.split('|'))
                    .map(|c| match c.trim().parse::<f64>() {
                        Ok(v) => format!("{v:.12}"),
                        Err(_) => c.trim().to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("|")
            })
            .collect()
    }

    /// The rows of `sql`, and whether its plan looks a table up.
    async fn answer(ctx: &SessionContext, sql: &str) -> (Vec<String>, bool) {
        let plan = plan(ctx, sql).await;
        let looked_up = text(&plan).contains("lookups=[");
        (rows(plan, ctx).await, looked_up)
    }

    /// `sql`'s rows with the grid aggregate switched off.
    async fn unfolded_answer(sql: &str) -> Vec<String> {
        let ctx = session(Arc::new(GreedyMemoryPool::new(PLENTY))).await;
        ctx.sql("SET ndfusion.grid_aggregate = false")
            .await
            .unwrap();
        answer(&ctx, sql).await.0
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn anomalies_look_their_climatology_up_where_a_cell_has_one_row_of_it() {
        let ctx = session(Arc::new(GreedyMemoryPool::new(PLENTY))).await;
        let partition = "PARTITION BY extract(month FROM time), lat, lon";
        let cases = [
            (anomaly_join("JOIN", ON_EVERY_KEY), true),
            (anomaly_window(partition), true),
            // A cell meets several rows of the climatology, or keeps cells without one, or
            // a window ordered within its partition: DataFusion's join or window.
            (
                anomaly_join("JOIN", "d.lat = c.lat AND d.lon = c.lon"),
                false,
            ),
            (anomaly_join("LEFT JOIN", ON_EVERY_KEY), false),
            (
                anomaly_join("JOIN", &format!("{ON_EVERY_KEY} AND d.temp > c.m")),
                false,
            ),
            (anomaly_window(&format!("{partition} ORDER BY time")), false),
            (
                anomaly_window(&format!(
                    "{partition} ORDER BY time ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING"
                )),
                false,
            ),
        ];
        for (sql, looks_up) in cases {
            let (got, looked_up) = answer(&ctx, &sql).await;
            assert_eq!(looked_up, looks_up, "{sql}");
            let want = unfolded_answer(&sql).await;
            assert_eq!(rounded(got), rounded(want), "{sql}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_windows_climatology_is_planned_within_the_pools_limit() {
        let sql = anomaly_window("PARTITION BY extract(month FROM time), lat, lon");
        let want = unfolded_answer(&sql).await;
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(64 << 20));
        let ctx = session(Arc::clone(&pool)).await;
        // 8 KiB left: the outer fold (one group) and the lookup (576 positions) would fit,
        // the climatology's accumulators (576 groups per partition, and the merge) not.
        let other = MemoryConsumer::new("another query").register(&pool);
        other.try_grow((64 << 20) - (8 << 10)).unwrap();
        let constrained = plan(&ctx, &sql).await;
        drop(other);
        assert!(
            !text(&constrained).contains("lookups=["),
            "{}",
            text(&constrained)
        );
        assert_eq!(
            rounded(rows(constrained, &ctx).await),
            rounded(want.clone())
        );
        // With the pool free again, looked up.
        let planned = plan(&ctx, &sql).await;
        assert!(text(&planned).contains("lookups=["), "{}", text(&planned));
        assert_eq!(rounded(rows(planned, &ctx).await), rounded(want));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_anomaly_the_pool_cannot_fold_when_it_runs_runs_datafusions_plan() {
        // Refused when the query runs, the fold falls back to the join and the window as
        // planned before DataFusion's later rules (the join collects the climatology, the
        // window sorts its input).
        for sql in [
            anomaly_join("JOIN", ON_EVERY_KEY),
            anomaly_window("PARTITION BY extract(month FROM time), lat, lon"),
        ] {
            let want = unfolded_answer(&sql).await;
            let pool = RefusingGridAggregates(GreedyMemoryPool::new(PLENTY));
            let ctx = session(Arc::new(pool)).await;
            let plan = plan(&ctx, &sql).await;
            assert!(text(&plan).contains("lookups=["), "{}", text(&plan));
            let got = rows(plan, &ctx).await;
            assert_eq!(rounded(got), rounded(want), "{sql}");
        }
    }
}
