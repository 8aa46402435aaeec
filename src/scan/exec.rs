//! [`ScanExec`]: the one physical scan plan of every table kind, after DataFusion's
//! `DataSourceExec`. EXPLAIN shows it under its source's name.
//!
//! A partition's units are read `in_flight` at a time, each started as the stream reaches it,
//! with the bytes they hold reserved from the session's memory pool (`read_buffers.rs`);
//! their batches are cut to the batch size and the stream stops at the limit. The stream
//! yields to the runtime cooperatively.

use std::fmt;
use std::sync::Arc;

use arrow::compute::SortOptions;
use arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::{internal_err, Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{
    conjunction, EquivalenceProperties, LexOrdering, PhysicalExpr, PhysicalSortExpr,
};
use datafusion::physical_expr_common::physical_expr::is_dynamic_physical_expr;
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::SortOrderPushdownResult;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use super::batches::{limit_rows, on_unit_end, slices};
use super::cells::{FoldTarget, GridSource};
use super::origin::{OriginSlot, ScanCall};
use super::read_buffers::ReadBuffers;
use super::source::{OpenPartition, PartitionUnits, ScanSource, SortKey, UnitRead};

/// `keys` as sort expressions over `schema` (DataFusion's default null placement: an order
/// of non-null keys satisfies either).
fn sort_exprs(schema: &SchemaRef, keys: &[SortKey]) -> Vec<PhysicalSortExpr> {
    keys.iter()
        .filter_map(|key| {
            let field = schema.fields().get(key.column)?;
            let column = Arc::new(Column::new(field.name(), key.column));
            let options = SortOptions {
                descending: key.descending,
                nulls_first: key.descending,
            };
            Some(PhysicalSortExpr::new(column, options))
        })
        .collect()
}

/// The scan of one table of any kind.
#[derive(Debug)]
pub(crate) struct ScanExec {
    source: Arc<dyn ScanSource>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    /// The table's scan call that planned this, for a cluster's codec.
    origin: OriginSlot,
    /// DataFusion's dynamic filters pushed into the scan (TopK thresholds, join bounds), as
    /// one conjunction: the source skips units they rule out (`dynamic_filter.rs`). They do
    /// not travel to a cluster's executors, which read every unit.
    dynamic_filter: Option<Arc<dyn PhysicalExpr>>,
}

impl ScanExec {
    pub(crate) fn new(source: Arc<dyn ScanSource>) -> Self {
        let shape = source.shape();
        let orderings = (source.orderings().iter())
            .filter_map(|keys| LexOrdering::new(sort_exprs(shape.schema, keys)))
            .collect::<Vec<_>>();
        let properties = PlanProperties::new(
            EquivalenceProperties::new_with_orderings(Arc::clone(shape.schema), orderings),
            Partitioning::UnknownPartitioning(shape.partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        ScanExec {
            source,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            origin: OriginSlot::default(),
            dynamic_filter: None,
        }
    }

    /// This scan with `source`, its origin changed by `change` (a limit, reading backwards)
    /// and its dynamic filters kept.
    fn derived(
        &self,
        source: Arc<dyn ScanSource>,
        change: impl FnOnce(&dyn ScanCall) -> Arc<dyn ScanCall>,
    ) -> Self {
        let mut scan = ScanExec::new(source);
        scan.origin = self.origin.derived(change);
        scan.dynamic_filter = self.dynamic_filter.clone();
        scan
    }

    /// This scan with the same source and origin.
    fn same(&self, source: Arc<dyn ScanSource>) -> Self {
        let limit = self.source.limit();
        self.derived(source, |o| o.with_limit(limit))
    }

    /// The same scan with its units in their own order again (see
    /// [`ScanSource::without_read_first`]): a sort pushed into it for rows that a grid now
    /// takes as cells; `None` when they are.
    pub(crate) fn without_read_first(&self) -> Option<ScanExec> {
        Some(self.same(self.source.without_read_first()?))
    }

    /// The same scan with `exprs` as extra columns computed at planning (see
    /// [`ScanSource::with_derived_columns`]). The copy has no origin: a cluster's codec
    /// refuses it rather than replay a different scan.
    pub(crate) fn with_derived_columns(
        &self,
        exprs: &[(Arc<dyn PhysicalExpr>, String)],
        keep: &[usize],
    ) -> Option<ScanExec> {
        Some(ScanExec::new(
            self.source.with_derived_columns(exprs, keep)?,
        ))
    }

    /// See [`ScanSource::read_bytes`].
    pub(crate) fn read_bytes(&self) -> Option<u64> {
        self.source.read_bytes()
    }

    /// See [`ScanSource::rows_per_key_run`].
    pub(crate) fn rows_per_key_run(&self, columns: &[usize]) -> Option<u64> {
        self.source.rows_per_key_run(columns)
    }

    /// The scan read backwards, when its source can be (a cluster replaying a sort pushed
    /// into the scan).
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn reversed(&self) -> Option<Arc<dyn ExecutionPlan>> {
        let source = self.source.reversed()?;
        Some(Arc::new(self.derived(source, |o| o.reversed())))
    }

    /// The grid the scan reads, for a grid aggregate (see [`ScanSource::grid`]).
    pub(crate) fn grid(&self) -> Option<&dyn GridSource> {
        self.source.grid()
    }

    /// Partition `partition` read with its cells handed to `target`'s fold as they are
    /// decoded: the stream yields no batch and ends when every unit has been folded. The
    /// units are read as `execute` reads them (in flight, reserved, counted, pruned by
    /// dynamic filters), and EXPLAIN ANALYZE shows their counters on this scan.
    pub(crate) fn execute_folding(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
        target: &FoldTarget,
    ) -> Result<SendableRecordBatchStream> {
        if self.source.grid().is_none() {
            return internal_err!("{} reads no grid to fold", self.source.shape().name);
        }
        self.stream(partition, context, Some(target))
    }

    /// The stream of `partition`: its batches, or none when its cells go to `fold`.
    fn stream(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
        fold: Option<&FoldTarget>,
    ) -> Result<SendableRecordBatchStream> {
        let shape = self.source.shape();
        let (name, partitions, unit_name) = (shape.name, shape.partitions, shape.units);
        if partition >= partitions {
            return internal_err!("{name} has {partitions} partitions, not {partition}");
        }
        let PartitionUnits {
            units,
            unit_count,
            in_flight,
            unit_bytes,
            table,
            batch_size,
            limit,
        } = self.source.open(OpenPartition {
            index: partition,
            context: &context,
            metrics: &self.metrics,
            dynamic_filter: self.dynamic_filter.as_ref(),
            fold,
        })?;
        let units = count_units(units, unit_count, unit_name, &self.metrics, partition);
        let wanted = in_flight.min(unit_count);
        let (in_flight, buffers) = match unit_bytes {
            Some(bytes) => {
                let buffers = ReadBuffers::reserve(
                    context.memory_pool(),
                    &self.metrics,
                    partition,
                    partitions,
                    format!("{name}[{partition}]"),
                    &table,
                    bytes,
                    wanted,
                )?;
                (buffers.in_flight, Some(buffers))
            }
            None => (wanted.max(1), None),
        };
        let stream = futures::stream::iter(units)
            .buffered(in_flight)
            .try_flatten()
            // The buffers stay reserved while the stream reads.
            .inspect(move |_| {
                let _ = &buffers;
            });
        let stream = match batch_size {
            Some(size) => stream
                .map_ok(move |batch| {
                    futures::stream::iter(slices(&[batch], size).into_iter().map(Ok))
                })
                .try_flatten()
                .boxed(),
            None => stream.boxed(),
        };
        let stream = limit_rows(stream, limit);
        Ok(make_cooperative(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(shape.schema),
            stream,
        ))))
    }

    /// The scan call that planned this scan (set by the table).
    pub(crate) fn origin(&self) -> &OriginSlot {
        &self.origin
    }
}

/// `units`, counted: `{unit}_planned` when the partition opens, `{unit}_done` as each unit's
/// batches end (the CLI's progress line reads both while the query runs). Gauges, so EXPLAIN
/// ANALYZE shows them after the sources' own counters.
fn count_units(
    units: Box<dyn Iterator<Item = UnitRead> + Send>,
    unit_count: usize,
    unit_name: &str,
    metrics: &ExecutionPlanMetricsSet,
    partition: usize,
) -> impl Iterator<Item = UnitRead> + Send {
    MetricBuilder::new(metrics)
        .gauge(format!("{unit_name}_planned"), partition)
        .add(unit_count);
    let done = MetricBuilder::new(metrics).gauge(format!("{unit_name}_done"), partition);
    units.map(move |unit| {
        let done = done.clone();
        on_unit_end(unit, move || done.add(1))
    })
}

impl DisplayAs for ScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        if !matches!(t, DisplayFormatType::TreeRender) {
            write!(f, "{}: ", self.source.shape().name)?;
        }
        self.source.fmt_details(t, f)
    }
}

impl ExecutionPlan for ScanExec {
    fn name(&self) -> &str {
        self.source.shape().name
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("{} has no children", self.source.shape().name)
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.stream(partition, context, None)
    }

    fn supports_limit_pushdown(&self) -> bool {
        self.source.takes_limits()
    }

    fn fetch(&self) -> Option<usize> {
        self.source.limit()
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let source = self.source.with_limit(limit)?;
        Some(Arc::new(self.derived(source, |o| o.with_limit(limit))))
    }

    /// An order the scan keeps is kept (the sort goes); the reverse of it is kept by the scan
    /// read backwards, so `ORDER BY time DESC LIMIT 10` reads the last chunks only. Any other
    /// sort stays, over the scan laid out to read first the units its first key puts first
    /// (`ScanSource::read_first`): a TopK's threshold then prunes the rest.
    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
    ) -> Result<SortOrderPushdownResult<Arc<dyn ExecutionPlan>>> {
        let satisfied = |scan: &ScanExec| {
            (scan.properties.equivalence_properties()).ordering_satisfy(order.iter().cloned())
        };
        if !self.source.orderings().is_empty() {
            if satisfied(self)? {
                let same = self.same(Arc::clone(&self.source));
                return Ok(SortOrderPushdownResult::Exact {
                    inner: Arc::new(same),
                });
            }
            if let Some(backwards) = self.reversed() {
                let scan = backwards.downcast_ref::<ScanExec>();
                if scan.map(satisfied).transpose()? == Some(true) {
                    return Ok(SortOrderPushdownResult::Exact { inner: backwards });
                }
            }
        }
        let first_key = order.first().and_then(|first| {
            let column = first.expr.downcast_ref::<Column>()?;
            Some(SortKey {
                column: column.index(),
                descending: first.options.descending,
            })
        });
        match first_key.and_then(|key| self.source.read_first(key)) {
            Some(source) => Ok(SortOrderPushdownResult::Inexact {
                inner: Arc::new(self.same(source)),
            }),
            None => Ok(SortOrderPushdownResult::Unsupported),
        }
    }

    /// Dynamic filters (DataFusion's TopK thresholds and join bounds, pushed after the other
    /// rules) are taken when the source prunes units by them; rows are still filtered above,
    /// so every filter is reported as not pushed down.
    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters = (child_pushdown_result.parent_filters.into_iter()).map(|f| f.filter);
        let filters: Vec<Arc<dyn PhysicalExpr>> = filters.collect();
        let kept = FilterPushdownPropagation::with_parent_pushdown_result(vec![
            PushedDown::No;
            filters.len()
        ]);
        let dynamic = (filters.into_iter()).filter(is_dynamic_physical_expr);
        let dynamic: Vec<Arc<dyn PhysicalExpr>> = dynamic.collect();
        if phase != FilterPushdownPhase::Post || dynamic.is_empty() || !self.source.prunes_units() {
            return Ok(kept);
        }
        let mut scan = self.same(Arc::clone(&self.source));
        scan.dynamic_filter = Some(conjunction(
            self.dynamic_filter.iter().cloned().chain(dynamic),
        ));
        Ok(kept.with_updated_node(Arc::new(scan)))
    }

    /// A projection that only picks and reorders the scan's columns becomes the scan's own
    /// (what a `SELECT temp, time` over a scan of `time, temp` plans): with no projection
    /// between them, a sort or limit above reaches the scan (`ORDER BY time DESC LIMIT 10`
    /// then reads the last chunk, not two per partition made whole).
    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        let schema = self.schema();
        let keep = (projection.expr().iter())
            .map(|p| {
                let column = p.expr.downcast_ref::<Column>()?;
                (schema.field(column.index()).name() == &p.alias).then_some(column.index())
            })
            .collect::<Option<Vec<usize>>>();
        let Some(keep) = keep else {
            return Ok(None);
        };
        let Some(source) = self.source.with_derived_columns(&[], &keep) else {
            return Ok(None);
        };
        Ok(Some(Arc::new(
            self.derived(source, |o| o.with_projection(&keep)),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.source.metrics(self.metrics.clone_inner()))
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.source.statistics(partition).map(Arc::new)
    }
}
