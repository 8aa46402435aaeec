//! A grid aggregate written as a dataset from its grid: `COPY (SELECT date_trunc('month',
//! time) AS time, lat, lon, avg(temp) AS temp FROM t GROUP BY 1, 2, 3) TO ... STORED AS ZARR
//! OPTIONS ('dimensions' 'time,lat,lon')`. The aggregate's result is already a grid (each
//! key one axis's groups), so [`GridWriteExec`] takes its final values laid out at their
//! groups' positions ([`GridAggregateExec::dense`]) and the sink fills its chunks from them
//! ([`GridSink::write_on_grid`]): no row per group, no sort by the dimensions, no spill, no
//! pass that learns each dimension's values. [`GridWrites`] puts it in place of the COPY's
//! `DataSinkExec` where the COPY's columns are the aggregate's keys (each a dimension) and
//! expressions of its values.
//!
//! The dataset is the one the rows would make (the same coordinates, cells, types and
//! missing values): where it would not be (a NULL key, two groups with one key value) or
//! the memory pool cannot hold the values laid out, the COPY runs as DataFusion planned it.

use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::Schema;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::common::{internal_err, Result};
use datafusion::datasource::sink::{DataSink, DataSinkExec};
use datafusion::execution::memory_pool::MemoryConsumer;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
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
use crate::nd::on_grid::{OnGrid, OnGridDim};
use crate::scan::GridAggregateExec;

/// A column of the COPY: a dimension (an aggregate's key) or a variable.
#[derive(Debug, Clone)]
enum Written {
    /// The aggregate's key `key`.
    Dimension { key: usize },
    /// An expression over the aggregate's values (their columns numbered from 0).
    Variable { expr: Arc<dyn PhysicalExpr> },
}

/// A `COPY` of a grid aggregate, written from the aggregate's grid (see the module).
#[derive(Debug)]
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
    /// `planned` written from the grid of the aggregate under it, when its columns allow.
    fn new(planned: &Arc<dyn ExecutionPlan>) -> Result<Option<Self>> {
        let Some(sink_exec) = planned.downcast_ref::<DataSinkExec>() else {
            return Ok(None);
        };
        let Some(sink) = sink_exec.sink().downcast_ref::<GridSink>() else {
            return Ok(None);
        };
        // Down to the aggregate: orders and partitionings do not matter to a grid, one
        // projection names and computes the columns.
        let mut node = Arc::clone(sink_exec.input());
        let mut projection: Option<Vec<Arc<dyn PhysicalExpr>>> = None;
        let aggregate = loop {
            if let Some(aggregate) = node.downcast_ref::<GridAggregateExec>() {
                break aggregate;
            }
            let passes = node.is::<SortExec>()
                || node.is::<SortPreservingMergeExec>()
                || node.is::<RepartitionExec>()
                || node.is::<CoalescePartitionsExec>();
            if let Some(p) = node.downcast_ref::<ProjectionExec>() {
                if projection.is_some() {
                    return Ok(None);
                }
                projection = Some(p.expr().iter().map(|e| Arc::clone(&e.expr)).collect());
            } else if !passes {
                return Ok(None);
            }
            let [child] = node.children()[..] else {
                return Ok(None);
            };
            node = Arc::clone(child);
        };
        let Some(keys) = aggregate.final_keys() else {
            return Ok(None);
        };
        let Some(axes) = aggregate.key_axes() else {
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
        // Each key one dimension of the write and each dimension a key; an axis without a
        // key has one group.
        let fields = DataSink::schema(sink).fields();
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
        let values = Arc::new(Schema::new(
            (schema.fields().iter().skip(keys))
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        Ok(Some(GridWriteExec {
            planned: Arc::clone(planned),
            aggregate: Arc::clone(&node),
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
        match children.first() {
            Some(child) if children.len() == 1 && Arc::ptr_eq(child, &self.aggregate) => Ok(self),
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
        let this = GridWriteExec {
            planned: Arc::clone(&self.planned),
            aggregate: Arc::clone(&self.aggregate),
            columns: self.columns.clone(),
            values: Arc::clone(&self.values),
        };
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

/// [`GridWriteExec`] in place of a gridded `COPY` of a grid aggregate (see the module).
#[derive(Debug, Default)]
pub(crate) struct GridWrites;

impl PhysicalOptimizerRule for GridWrites {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_down(|node| match GridWriteExec::new(&node)? {
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
