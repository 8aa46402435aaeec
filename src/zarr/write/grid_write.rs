//! Results that are already grids, written as datasets from their grids.
//!
//! - A grid aggregate: `COPY (SELECT date_trunc('month', time) AS time, lat, lon, avg(temp) AS
//!   temp FROM t GROUP BY 1, 2, 3) TO ... STORED AS ZARR OPTIONS ('dimensions'
//!   'time,lat,lon')`. Each key is one axis's groups, so [`GridWriteExec`] takes the final
//!   values laid out at their groups' positions ([`GridAggregateExec::dense`]) and the sink
//!   fills its chunks from them ([`GridSink::write_on_grid`]).
//! - A selection of a grid scan's cells: `COPY (SELECT time, lat, lon, temp FROM t WHERE time
//!   BETWEEN ...) ... ('dimensions' 'time,lat,lon')`. It is the grid aggregate whose every
//!   group is one cell (`min` of its one value, `bool_and` of a boolean), so the chunks the scan decodes are folded
//!   into the layout as blocks of cells, and written as above.
//!
//! Either way no row is made per cell or group, nothing is sorted by the dimensions, spilled,
//! or read to learn each dimension's values. [`GridWrites`] puts the exec in place of the
//! COPY's `DataSinkExec` where the COPY's columns allow (each dimension one key, the other
//! columns expressions of the values).
//!
//! The dataset is the one the rows would make (the same coordinates, cells, types and
//! missing values): where it would not be (a NULL key, one value at two indices of an axis)
//! or the memory pool cannot hold the values laid out, the COPY runs as DataFusion planned
//! it.

use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Schema};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{internal_err, Result};
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool};
use datafusion::execution::TaskContext;
use datafusion::functions_aggregate::bool_and_or::bool_and_udaf;
use datafusion::functions_aggregate::min_max::min_udaf;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::{col, Column};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode, PhysicalGroupBy};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};

use super::grid_sink::GridSink;
use crate::limits::SessionLimits;
use crate::nd::on_grid::{OnGrid, OnGridDim};
use crate::scan::{memory_left, GridAggregateExec, ScanExec};
use crate::yielding::unwrapped;

/// A column of the COPY: a dimension (an aggregate's key) or a variable.
#[derive(Debug, Clone)]
enum Written {
    /// The aggregate's key `key`.
    Dimension { key: usize },
    /// An expression over the aggregate's values (their columns numbered from 0).
    Variable { expr: Arc<dyn PhysicalExpr> },
}

/// A `COPY` of a grid aggregate, written from the aggregate's grid (see the module).
#[derive(Debug, Clone)]
pub(crate) struct GridWriteExec {
    /// The `COPY` as DataFusion planned it (a `DataSinkExec` over a `GridSink`): its sink
    /// writes, and it runs whole when the result cannot be laid out.
    planned: Arc<dyn ExecutionPlan>,
    /// The grid aggregate, the child.
    aggregate: Arc<dyn ExecutionPlan>,
    /// Per column of the sink's schema.
    columns: Vec<Written>,
    /// The schema of the aggregate's values alone (every one nullable), which variables are
    /// evaluated over.
    values: Arc<Schema>,
}

impl GridWriteExec {
    /// `planned` written from a grid, when its input is a grid aggregate whose columns allow
    /// or a selection of a grid scan's cells; `memory_left`: what the pool can still give,
    /// when it has a limit.
    fn new(planned: &Arc<dyn ExecutionPlan>, memory_left: Option<usize>) -> Result<Option<Self>> {
        let Some(sink_exec) = planned.downcast_ref::<DataSinkExec>() else {
            return Ok(None);
        };
        let Some(sink) = sink_exec.sink().downcast_ref::<GridSink>() else {
            return Ok(None);
        };
        // Both walks pass over what only orders or partitions rows (`passes`): it does not
        // matter to a grid.
        let top = sink_exec.input();
        match GridWriteExec::of_aggregate(planned, sink, top)? {
            Some(write) => Ok(Some(write)),
            None => GridWriteExec::of_selection(planned, sink, top, memory_left),
        }
    }

    /// A grid aggregate under `top` (one projection may name and compute the columns).
    fn of_aggregate(
        planned: &Arc<dyn ExecutionPlan>,
        sink: &GridSink,
        top: &Arc<dyn ExecutionPlan>,
    ) -> Result<Option<Self>> {
        let mut node = Arc::clone(top);
        let mut projection: Option<Vec<Arc<dyn PhysicalExpr>>> = None;
        let aggregate = loop {
            if let Some(aggregate) = node.downcast_ref::<GridAggregateExec>() {
                break aggregate;
            }
            match node.downcast_ref::<ProjectionExec>() {
                Some(p) if projection.is_none() => {
                    projection = Some(p.expr().iter().map(|e| Arc::clone(&e.expr)).collect());
                }
                _ if passes(&node) => {}
                _ => return Ok(None),
            }
            let [child] = node.children()[..] else {
                return Ok(None);
            };
            node = Arc::clone(child);
        };
        let Some(keys) = aggregate.final_keys() else {
            return Ok(None);
        };
        let schema = node.schema();
        let exprs = projection.unwrap_or_else(|| {
            (schema.fields().iter().enumerate())
                .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as _)
                .collect()
        });
        let mut columns = Vec::with_capacity(exprs.len());
        for expr in &exprs {
            columns.push(match expr.downcast_ref::<Column>() {
                Some(c) if c.index() < keys => Written::Dimension { key: c.index() },
                _ => match values_only(expr, keys)? {
                    Some(expr) => Written::Variable { expr },
                    None => return Ok(None),
                },
            });
        }
        GridWriteExec::checked(planned, sink, &node, columns)
    }

    /// A selection of a grid scan's cells under `top` (`SELECT time, lat, lon, temp FROM t
    /// WHERE time BETWEEN ...`), the COPY's dimensions being the scan's: a grid aggregate
    /// whose every group is one cell (keyed by the dimensions, each variable its cell's
    /// value, `min` of one value), written from its grid as an aggregate is. The cells a
    /// filter drops are no row; where an axis's value repeats the rows would meet on a
    /// cell, and the COPY runs as planned (the row path's error).
    fn of_selection(
        planned: &Arc<dyn ExecutionPlan>,
        sink: &GridSink,
        top: &Arc<dyn ExecutionPlan>,
        memory_left: Option<usize>,
    ) -> Result<Option<Self>> {
        // What only orders or partitions rows is dropped (a grid takes cells as they come),
        // and the sort the sink asked for may have laid the scan out to read first what
        // sorts first (`read_first`): the cells are read in the scan's own order again.
        let top = &Arc::clone(top)
            .transform_up(|node| {
                if passes(&node) {
                    if let [child] = node.children()[..] {
                        return Ok(Transformed::yes(Arc::clone(child)));
                    }
                }
                Ok(match node.downcast_ref::<ScanExec>() {
                    Some(scan) => match scan.without_read_first() {
                        Some(plain) => Transformed::yes(Arc::new(plain) as Arc<dyn ExecutionPlan>),
                        None => Transformed::no(node),
                    },
                    None => Transformed::no(node),
                })
            })
            .data()?;
        let schema = top.schema();
        let mut keys = Vec::new();
        for name in sink.dimensions() {
            keys.push((col(name, &schema)?, name.clone()));
        }
        let mut aggregates = Vec::new();
        let mut columns = Vec::new();
        for field in schema.fields() {
            let name = field.name();
            match sink.dimensions().iter().position(|d| d == name) {
                Some(key) => columns.push(Written::Dimension { key }),
                None => {
                    columns.push(Written::Variable {
                        expr: Arc::new(Column::new(name, aggregates.len())),
                    });
                    // A cell's one value: `min` of it (`bool_and` of a boolean, which the
                    // grid aggregate folds where it takes no `min`).
                    let function = match field.data_type() {
                        DataType::Boolean => bool_and_udaf(),
                        _ => min_udaf(),
                    };
                    let value = AggregateExprBuilder::new(function, vec![col(name, &schema)?])
                        .schema(Arc::clone(&schema))
                        .alias(name)
                        .build()?;
                    aggregates.push(Arc::new(value));
                }
            }
        }
        let group_by = PhysicalGroupBy::new_single(keys);
        let filters = vec![None; aggregates.len()];
        let partial = Arc::new(AggregateExec::try_new(
            AggregateMode::Partial,
            group_by.clone(),
            aggregates.clone(),
            filters.clone(),
            Arc::clone(top),
            Arc::clone(&schema),
        )?);
        let partial_schema = partial.schema();
        let aggregate = Arc::new(AggregateExec::try_new(
            AggregateMode::Final,
            group_by.as_final(),
            aggregates,
            filters,
            partial,
            partial_schema,
        )?);
        let Some(folded) = GridAggregateExec::single(&aggregate, memory_left)? else {
            return Ok(None);
        };
        if !folded.cell_per_group() {
            return Ok(None);
        }
        GridWriteExec::checked(planned, sink, &(Arc::new(folded) as _), columns)
    }

    /// The write of `aggregate` (a grid aggregate) with `columns`, when each of its keys is
    /// one dimension of the write and each dimension a key, and an axis without a key has
    /// one group.
    fn checked(
        planned: &Arc<dyn ExecutionPlan>,
        sink: &GridSink,
        node: &Arc<dyn ExecutionPlan>,
        columns: Vec<Written>,
    ) -> Result<Option<Self>> {
        let Some(aggregate) = node.downcast_ref::<GridAggregateExec>() else {
            return Ok(None);
        };
        let (Some(keys), Some(axes)) = (aggregate.final_keys(), aggregate.key_axes()) else {
            return Ok(None);
        };
        let fields = DataSink::schema(sink).fields();
        if fields.len() != columns.len() {
            return Ok(None);
        }
        let mut seen = vec![false; keys];
        for (field, column) in fields.iter().zip(&columns) {
            let is_dimension = sink.dimensions().contains(field.name());
            match column {
                Written::Dimension { key } if is_dimension && !seen[*key] => seen[*key] = true,
                Written::Variable { .. } if !is_dimension => {}
                _ => return Ok(None),
            }
        }
        let shape = aggregate.shape();
        let keyless = (0..shape.len()).filter(|a| !axes.iter().any(|(axis, _)| axis == a));
        if seen.contains(&false) || keyless.into_iter().any(|a| shape[a] != 1) {
            return Ok(None);
        }
        // Nullable: a group no row reached has no value (not even a count).
        let schema = node.schema();
        let values = Arc::new(Schema::new(
            (schema.fields().iter().skip(keys))
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(Some(GridWriteExec {
            planned: Arc::clone(planned),
            aggregate: Arc::clone(node),
            columns,
            values,
        }))
    }

    fn sink(&self) -> Result<&GridSink> {
        let sink = (self.planned.downcast_ref::<DataSinkExec>())
            .and_then(|exec| exec.sink().downcast_ref::<GridSink>());
        match sink {
            Some(sink) => Ok(sink),
            None => internal_err!("GridWriteExec lost its sink"),
        }
    }

    fn grid_aggregate(&self) -> Result<&GridAggregateExec> {
        match self.aggregate.downcast_ref::<GridAggregateExec>() {
            Some(aggregate) => Ok(aggregate),
            None => internal_err!("GridWriteExec lost its grid aggregate"),
        }
    }

    /// The aggregate run and its values laid out, written; `None` when they cannot be.
    async fn write(&self, context: &Arc<TaskContext>) -> Result<Option<u64>> {
        let (sink, aggregate) = (self.sink()?, self.grid_aggregate()?);
        let mut reservation =
            MemoryConsumer::new("GridWriteExec values").register(context.memory_pool());
        let Some(dense) = aggregate.dense(context, &mut reservation).await? else {
            return Ok(None);
        };
        let (Some(axes), shape) = (aggregate.key_axes(), aggregate.shape()) else {
            return internal_err!("GridWriteExec's aggregate lost its keys");
        };
        let strides: Vec<usize> = (0..shape.len())
            .map(|a| shape[a + 1..].iter().map(|&n| n as usize).product())
            .collect();
        let batch = RecordBatch::try_new(Arc::clone(&self.values), dense.values)?;
        let mut dims = Vec::new();
        let mut values: Vec<ArrayRef> = Vec::new();
        let names = DataSink::schema(sink).fields();
        for name in sink.dimensions() {
            let at = names.iter().position(|f| f.name() == name);
            let Some(Written::Dimension { key }) = at.map(|i| &self.columns[i]) else {
                return internal_err!("GridWriteExec lost dimension '{name}'");
            };
            let (axis, values) = &axes[*key];
            dims.push(OnGridDim {
                values: Arc::clone(values),
                stride: strides[*axis],
            });
        }
        for column in &self.columns {
            if let Written::Variable { expr } = column {
                values.push(expr.evaluate(&batch)?.into_array(batch.num_rows())?);
            }
        }
        let grid = OnGrid {
            dims,
            values,
            present: dense.reached,
        };
        let Some(placement) = grid.placement()? else {
            return Ok(None);
        };
        Ok(Some(sink.write_on_grid(&grid, placement, context).await?))
    }
}

/// Whether `plan` only orders or partitions its input's rows.
fn passes(plan: &Arc<dyn ExecutionPlan>) -> bool {
    plan.is::<SortExec>()
        || plan.is::<SortPreservingMergeExec>()
        || plan.is::<RepartitionExec>()
        || plan.is::<CoalescePartitionsExec>()
}

/// `expr` over the aggregate's output with its keys (the first `keys` columns) dropped;
/// `None` when it reads a key.
fn values_only(expr: &Arc<dyn PhysicalExpr>, keys: usize) -> Result<Option<Arc<dyn PhysicalExpr>>> {
    let mut reads_key = false;
    let moved = Arc::clone(expr)
        .transform_up(|e| match e.downcast_ref::<Column>() {
            Some(c) if c.index() < keys => {
                reads_key = true;
                Ok(Transformed::no(e))
            }
            Some(c) => Ok(Transformed::yes(
                Arc::new(Column::new(c.name(), c.index() - keys)) as _,
            )),
            None => Ok(Transformed::no(e)),
        })
        .data()?;
    Ok((!reads_key).then_some(moved))
}

impl DisplayAs for GridWriteExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "GridWriteExec: ")?;
        match self.sink() {
            Ok(sink) => sink.fmt_as(t, f),
            Err(_) => Ok(()),
        }
    }
}

impl ExecutionPlan for GridWriteExec {
    fn name(&self) -> &str {
        "GridWriteExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.planned.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.aggregate]
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        // The same fold, also behind a wrapper that changes only how its stream is polled
        // (`yielding.rs`; this exec folds the aggregate itself, never polls it) or with its
        // tables given again: the child taken as it is.
        match children.as_slice() {
            [child] if same_fold(unwrapped(child), unwrapped(&self.aggregate)) => {
                Ok(Arc::new(GridWriteExec {
                    aggregate: Arc::clone(unwrapped(child)),
                    ..self.as_ref().clone()
                }))
            }
            // Another input: the COPY as DataFusion planned it.
            _ => Ok(Arc::clone(&self.planned)),
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("GridWriteExec has one partition, not {partition}");
        }
        let this = self.clone();
        let schema = self.schema();
        let out = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            match this.write(&context).await? {
                Some(rows) => {
                    let count = Arc::new(UInt64Array::from(vec![rows])) as ArrayRef;
                    let batch = RecordBatch::try_new(out, vec![count])?;
                    let done: SendableRecordBatchStream = Box::pin(RecordBatchStreamAdapter::new(
                        batch.schema(),
                        futures::stream::iter(vec![Ok(batch)]),
                    ));
                    Ok(done)
                }
                None => this.planned.execute(0, context),
            }
        });
        use futures::TryStreamExt;
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            schema,
            stream.try_flatten(),
        )))
    }

    fn metrics(&self) -> Option<datafusion::physical_plan::metrics::MetricsSet> {
        self.planned.metrics()
    }
}

/// [`GridWriteExec`] in place of a gridded `COPY` of a grid aggregate or of a selection of a
/// grid scan's cells (see the module), unless the session says `SET ndfusion.grid_aggregate
/// = false`.
#[derive(Debug)]
pub(crate) struct GridWrites {
    /// The session's memory pool: a selection whose values would not fit in it is written
    /// from rows.
    pool: Arc<dyn MemoryPool>,
}

impl GridWrites {
    pub(crate) fn new(pool: Arc<dyn MemoryPool>) -> Self {
        GridWrites { pool }
    }
}

impl PhysicalOptimizerRule for GridWrites {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !SessionLimits::grid_aggregate(config) {
            return Ok(plan);
        }
        let memory_left = memory_left(self.pool.as_ref());
        plan.transform_down(|node| match GridWriteExec::new(&node, memory_left)? {
            Some(write) => Ok(Transformed::yes(Arc::new(write) as _)),
            None => Ok(Transformed::no(node)),
        })
        .data()
    }

    fn name(&self) -> &str {
        "GridWrites"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// Whether two grid aggregates fold the same cells the same way.
fn same_fold(a: &Arc<dyn ExecutionPlan>, b: &Arc<dyn ExecutionPlan>) -> bool {
    match (
        a.downcast_ref::<GridAggregateExec>(),
        b.downcast_ref::<GridAggregateExec>(),
    ) {
        (Some(a), Some(b)) => a.folds_as(b),
        _ => false,
    }
}
