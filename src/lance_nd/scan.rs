//! `LanceNdScanExec`: scans a lance-nd table through Lance (projection and filter pushed
//! down) and materializes every row's nd record batch onto its grid.

use std::fmt;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{internal_err, Result};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use crate::scan_util::limit_rows;
use lance::Dataset;

use super::table::LanceNdError;
use crate::nd::arrow_encoding::{decode_dims, decode_nd_array, GLOBAL_ATTRS_COLUMN};
use crate::nd::batch::{broadcast, grid_index_column, infer_grid};
use crate::nd::{Dim, NdArrowArray};

/// Where an output column comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputColumn {
    /// The index along a dimension (NULL on rows whose grid lacks it).
    Index(String),
    /// An array's values broadcast onto the grid (NULL on rows without the array).
    Array(String),
    /// `__global_attrs__`, repeated on every cell of its row.
    GlobalAttrs,
}

/// The size Lance aims each scanned batch at: by rows alone (8,192), a batch of 1,000-value
/// arrays is 64 MiB, and materializing it onto the grid holds it twice.
const LANCE_BATCH_BYTES: u64 = 8 << 20;

/// Scanned batches smaller than this are materialized where they arrive: moving them to a
/// blocking thread costs more than the work (an id lookup returns one row).
const INLINE_MATERIALIZE_BYTES: usize = 1 << 20;

#[derive(Debug)]
pub struct LanceNdScanExec {
    uri: String,
    dataset: Arc<Dataset>,
    schema: SchemaRef,
    columns: Vec<OutputColumn>,
    /// All arrays of the table: each row's grid comes from all of them.
    arrays: Vec<(String, DataType)>,
    /// Exact filter, evaluated by Lance.
    lance_filter: Option<Expr>,
    /// Row-skipping test on `__stats__` columns, evaluated by Lance (inexact).
    stats_filter: Option<Expr>,
    limit: Option<usize>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl LanceNdScanExec {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        uri: String,
        dataset: Arc<Dataset>,
        schema: SchemaRef,
        columns: Vec<OutputColumn>,
        arrays: Vec<(String, DataType)>,
        lance_filter: Option<Expr>,
        stats_filter: Option<Expr>,
        limit: Option<usize>,
    ) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        LanceNdScanExec {
            uri,
            dataset,
            schema,
            columns,
            arrays,
            lance_filter,
            stats_filter,
            limit,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Arrays whose values are read (projected); the others are read as dimensions only.
    fn value_arrays(&self) -> Vec<String> {
        self.columns
            .iter()
            .filter_map(|c| match c {
                OutputColumn::Array(a) => Some(a.clone()),
                _ => None,
            })
            .collect()
    }

    /// What Lance reads: projected arrays whole, the other arrays' dim_names and dim_sizes,
    /// and the global attributes when projected.
    fn lance_projection(&self) -> Vec<String> {
        let values = self.value_arrays();
        let mut out = Vec::new();
        for (a, _) in &self.arrays {
            if values.contains(a) {
                out.push(a.clone());
            } else {
                out.push(format!("{a}.dim_names"));
                out.push(format!("{a}.dim_sizes"));
            }
        }
        if self.columns.contains(&OutputColumn::GlobalAttrs) {
            out.push(GLOBAL_ATTRS_COLUMN.to_string());
        }
        out
    }

    fn combined_filter(&self) -> Option<Expr> {
        match (&self.lance_filter, &self.stats_filter) {
            (Some(a), Some(b)) => Some(a.clone().and(b.clone())),
            (a, b) => a.clone().or_else(|| b.clone()),
        }
    }
}

impl DisplayAs for LanceNdScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "LanceNdScanExec: table={}, projection=[{}]",
            self.uri,
            names.join(", ")
        )?;
        if let Some(filter) = &self.lance_filter {
            write!(f, ", lance_filter={filter}")?;
        }
        if let Some(filter) = &self.stats_filter {
            write!(f, ", stats_filter={filter}")?;
        }
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for LanceNdScanExec {
    fn name(&self) -> &str {
        "LanceNdScanExec"
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
            internal_err!("LanceNdScanExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("LanceNdScanExec has one partition, not {partition}");
        }
        let uri = self.uri.clone();
        let dataset = Arc::clone(&self.dataset);
        let projection = self.lance_projection();
        let filter = self.combined_filter();
        // Lance reads ahead io_parallelism x 2 fragments by default (on local disk, every
        // fragment of a table of ten), so a full scan held most of the table in memory; one
        // fragment per core in flight keeps both busy and memory bounded by fragment size.
        let fragments_in_flight = context.session_config().target_partitions().max(1);
        let lance_error = {
            let uri = uri.clone();
            move |e: lance::Error| DataFusionError::from(LanceNdError::lance(&uri, e))
        };
        let open_error = lance_error.clone();
        let batches = futures::stream::once(async move {
            let mut scanner = dataset.scan();
            scanner.project(&projection).map_err(&open_error)?;
            scanner.with_row_id();
            scanner.batch_size_bytes(LANCE_BATCH_BYTES);
            scanner.fragment_readahead(fragments_in_flight);
            if let Some(filter) = filter {
                scanner.filter_expr(filter);
            }
            Ok::<_, DataFusionError>(
                scanner
                    .try_into_stream()
                    .await
                    .map_err(&open_error)?
                    .map_err(lance_error),
            )
        })
        .try_flatten();

        let materializer = Arc::new(Materializer {
            uri,
            schema: Arc::clone(&self.schema),
            columns: self.columns.clone(),
            arrays: self.arrays.clone(),
            values: self.value_arrays(),
        });
        let rows_read: Count =
            MetricBuilder::new(&self.metrics).counter("nd_batches_read", partition);
        let stream = batches
            .map(move |batch| {
                let materializer = Arc::clone(&materializer);
                let rows_read = rows_read.clone();
                async move {
                    let batch = batch?;
                    rows_read.add(batch.num_rows());
                    if batch.get_array_memory_size() < INLINE_MATERIALIZE_BYTES {
                        return materializer.materialize(&batch);
                    }
                    tokio::task::spawn_blocking(move || materializer.materialize(&batch))
                        .await
                        .map_err(|e| {
                            DataFusionError::Execution(format!("materializing task failed: {e}"))
                        })?
                }
            })
            .buffered(2);
        let stream = limit_rows(stream, self.limit);
        Ok(make_cooperative(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        ))))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

/// Turns scanned table rows into the materialized cells of their grids.
struct Materializer {
    uri: String,
    schema: SchemaRef,
    columns: Vec<OutputColumn>,
    arrays: Vec<(String, DataType)>,
    values: Vec<String>,
}

impl Materializer {
    fn materialize(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let row_ids = batch.column_by_name("_rowid").and_then(|c| {
            c.as_primitive_opt::<arrow::datatypes::UInt64Type>()
                .cloned()
        });
        let mut parts: Vec<Vec<ArrayRef>> = vec![Vec::new(); self.columns.len()];
        let mut total = 0;
        for row in 0..batch.num_rows() {
            let row_id = row_ids.as_ref().map_or(row as u64, |ids| ids.value(row));
            let data_error = |e: String| {
                DataFusionError::from(LanceNdError::Data(format!(
                    "{}: row {row_id}: {e}",
                    self.uri
                )))
            };
            // Every array's dimensions (values only for the projected ones).
            let mut present: Vec<(&str, NdArrowArray)> = Vec::new();
            let mut all_dims: Vec<Vec<Dim>> = Vec::new();
            for (a, _) in &self.arrays {
                if self.values.contains(a) {
                    let column = batch
                        .column_by_name(a)
                        .and_then(|c| c.as_struct_opt())
                        .ok_or_else(|| data_error(format!("array '{a}' missing from the scan")))?;
                    if let Some(array) =
                        decode_nd_array(column, row, a).map_err(|e| data_error(e.to_string()))?
                    {
                        all_dims.push(array.dims().to_vec());
                        present.push((a.as_str(), array));
                    }
                } else {
                    let names = column(batch, a, "dim_names")
                        .ok_or_else(|| data_error(format!("array '{a}' has no dim_names")))?;
                    let sizes = column(batch, a, "dim_sizes")
                        .ok_or_else(|| data_error(format!("array '{a}' has no dim_sizes")))?;
                    let dims = decode_dims(&names, &sizes, row)
                        .map_err(|e| data_error(e.in_array(a).to_string()))?;
                    all_dims.push(dims);
                }
            }
            let grid = infer_grid(all_dims.iter().map(Vec::as_slice))
                .map_err(|e| data_error(e.to_string()))?;
            let cells: usize = grid.iter().map(|d| d.size).product();
            total += cells;
            for (i, column) in self.columns.iter().enumerate() {
                let data_type = self.schema.field(i).data_type();
                let part: ArrayRef = match column {
                    OutputColumn::Index(d) => match grid.iter().position(|g| &g.name == d) {
                        Some(p) => Arc::new(grid_index_column(&grid, p)),
                        None => new_null_array(data_type, cells),
                    },
                    OutputColumn::Array(a) => match present.iter().find(|(n, _)| n == a) {
                        Some((_, array)) => broadcast(array, &grid)
                            .map_err(|e| data_error(e.in_array(a).to_string()))?,
                        None => new_null_array(data_type, cells),
                    },
                    OutputColumn::GlobalAttrs => {
                        let globals = batch
                            .column_by_name(GLOBAL_ATTRS_COLUMN)
                            .ok_or_else(|| data_error("no global attributes in the scan".into()))?;
                        let repeat = UInt32Array::from(vec![row as u32; cells]);
                        arrow::compute::take(globals.as_ref(), &repeat, None)?
                    }
                };
                parts[i].push(part);
            }
        }
        let columns = parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if p.is_empty() {
                    Ok(new_null_array(self.schema.field(i).data_type(), 0))
                } else {
                    let refs: Vec<&dyn Array> = p.iter().map(|a| a.as_ref()).collect();
                    Ok(arrow::compute::concat(&refs)?)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(total));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }
}

/// `<array>.<child>`, whether Lance returned it flattened or inside the array's struct.
fn column(batch: &RecordBatch, array: &str, child: &str) -> Option<ArrayRef> {
    batch
        .column_by_name(&format!("{array}.{child}"))
        .cloned()
        .or_else(|| {
            batch
                .column_by_name(array)?
                .as_struct_opt()?
                .column_by_name(child)
                .cloned()
        })
}
