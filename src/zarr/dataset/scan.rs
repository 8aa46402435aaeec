//! `ZarrDatasetScanExec`: the scan of a dataset. The grid's blocks that the selection touches
//! are split into contiguous runs, one per partition; each block reads, for every variable the
//! query needs, the box of it under the block's selected cells (one chunk for variables chunked
//! like the primary one), on a blocking thread, then applies the row filter.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::{filter_record_batch, take};
use arrow::datatypes::SchemaRef;
use datafusion::common::{internal_err, Result as DfResult, Statistics};
use datafusion::error::DataFusionError;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use super::model::{Dataset, DatasetColumn};
use crate::error::{Error, Result};
use crate::read_buffers::ReadBuffers;
use crate::scan_util::{limit_rows, scan_statistics, slices};
use crate::table_source::OriginSlot;
use crate::zarr::chunk_plan::{chunk_count, ChunkPlan};
use crate::zarr::chunk_read::ChunkRead;
use crate::zarr::options::ZarrOptions;
use crate::zarr::row_filter::RowFilter;
use crate::zarr::scan::partition_rows;
use crate::zarr::selection::Selection;

/// What a dataset scan reads.
pub(crate) struct DatasetScanRequest {
    pub dataset: Arc<Dataset>,
    /// Indices into the dataset's columns.
    pub projection: Vec<usize>,
    pub schema: SchemaRef,
    pub filter: Option<Arc<RowFilter<usize>>>,
    pub selection: Selection,
    pub limit: Option<usize>,
    pub target_partitions: usize,
    /// The session's batch size when the plan was made (EXPLAIN VERBOSE).
    pub session_batch_size: usize,
    pub options: ZarrOptions,
}

#[derive(Debug)]
pub(crate) struct ZarrDatasetScanExec {
    reader: Arc<BlockReader>,
    selection: Selection,
    plan: Arc<ChunkPlan>,
    /// Block positions in `plan`, per partition.
    partitions: Vec<Range<u64>>,
    total_blocks: u64,
    /// Per variable read: (name, chunks touched, chunks in all).
    variable_chunks: Vec<(String, u64, u64)>,
    limit: Option<usize>,
    target_partitions: usize,
    session_batch_size: usize,
    options: ZarrOptions,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    /// The table's scan call that planned this, for a cluster's codec.
    origin: OriginSlot,
}

impl ZarrDatasetScanExec {
    /// The scan call that planned this scan (set by the table).
    pub(crate) fn origin(&self) -> &OriginSlot {
        &self.origin
    }

    pub(crate) fn new(request: DatasetScanRequest) -> Self {
        let DatasetScanRequest {
            dataset,
            projection,
            schema,
            filter,
            selection,
            limit,
            target_partitions,
            session_batch_size,
            options,
        } = request;
        let shape = dataset.shape();
        let plan = Arc::new(ChunkPlan::new(&shape, &dataset.block_shape, &selection));
        let trim_to = if filter.is_none() { limit } else { None };
        let partitions = plan.partitions(target_partitions.max(1), trim_to);
        let needed: Vec<usize> = {
            let mut n = projection.clone();
            for c in filter.iter().flat_map(|f| f.columns.iter()) {
                if !n.contains(c) {
                    n.push(*c);
                }
            }
            n
        };
        let variable_chunks = variables_read(&dataset, &needed)
            .into_iter()
            .map(|v| {
                let var = &dataset.variables[v];
                let boxes: Vec<_> = selection
                    .boxes()
                    .iter()
                    .map(|b| var.axes.iter().map(|&a| b[a].clone()).collect())
                    .collect();
                let touched = Selection::from_boxes(boxes)
                    .map(|s| ChunkPlan::new(&var.shape, &var.chunk_shape, &s).len())
                    .unwrap_or(0);
                let total = chunk_count(&var.shape, &var.chunk_shape);
                (var.name.clone(), touched, total)
            })
            .collect();
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        ZarrDatasetScanExec {
            total_blocks: chunk_count(&shape, &dataset.block_shape),
            reader: Arc::new(BlockReader {
                dataset,
                projection,
                needed,
                schema,
                filter,
            }),
            selection,
            plan,
            partitions,
            variable_chunks,
            limit,
            target_partitions,
            session_batch_size,
            options,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            origin: OriginSlot::default(),
        }
    }

    /// The selection per constrained axis, in index ranges and coordinate values.
    fn describe_selection(&self) -> String {
        let dataset = &self.reader.dataset;
        if self.selection.boxes().is_empty() {
            return "none".into();
        }
        let boxes: Vec<String> = self
            .selection
            .boxes()
            .iter()
            .map(|b| {
                let parts: Vec<String> = b
                    .iter()
                    .zip(&dataset.axes)
                    .filter(|(set, axis)| set.len() != axis.size)
                    .map(|(set, axis)| match &axis.coordinate {
                        Some(c) => format!("{}={} {set}", axis.name, c.describe(set.ranges())),
                        None => format!("{}={set}", axis.name),
                    })
                    .collect();
                if parts.is_empty() {
                    "all".into()
                } else {
                    parts.join(" x ")
                }
            })
            .collect();
        boxes.join(" | ")
    }
}

/// The variables (indices) the columns `needed` read.
fn variables_read(dataset: &Dataset, needed: &[usize]) -> Vec<usize> {
    let mut vars = Vec::new();
    for &c in needed {
        if let DatasetColumn::Variable { var, .. } = dataset.columns[c] {
            if !vars.contains(&var) {
                vars.push(var);
            }
        }
    }
    vars
}

impl DisplayAs for ZarrDatasetScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let dataset = &self.reader.dataset;
        let names: Vec<&str> = self
            .reader
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "ZarrDatasetScanExec: group={}, projection=[{}], partitions={}, blocks={}/{}",
            dataset.location,
            names.join(", "),
            self.partitions.len(),
            self.plan.len(),
            self.total_blocks,
        )?;
        if !self.selection.is_all(&dataset.shape()) {
            write!(f, ", selection={}", self.describe_selection())?;
        }
        if !self.variable_chunks.is_empty() {
            let chunks: Vec<String> = self
                .variable_chunks
                .iter()
                .map(|(name, touched, total)| format!("{name} {touched}/{total}"))
                .collect();
            write!(f, ", chunks=[{}]", chunks.join(", "))?;
        }
        if let Some(filter) = &self.reader.filter {
            write!(f, ", row_filter={}", filter.display)?;
        }
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
            // Without a row filter only the leading blocks that hold the limit are read.
            if self.reader.filter.is_none() {
                let read = self.partitions.last().map_or(0, |r| r.end);
                write!(f, ", blocks_for_limit={read}")?;
            }
        }
        let options = match t {
            DisplayFormatType::Verbose => {
                let metadata = if dataset.consolidated {
                    "consolidated"
                } else {
                    "listed"
                };
                let options = self
                    .options
                    .describe(self.session_batch_size, dataset.remote);
                format!("{options}, metadata={metadata}")
            }
            _ => self.options.describe_set(),
        };
        if !options.is_empty() {
            write!(f, ", options=({options})")?;
        }
        Ok(())
    }
}

impl ExecutionPlan for ZarrDatasetScanExec {
    fn name(&self) -> &str {
        "ZarrDatasetScanExec"
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
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        if children.is_empty() {
            Ok(self)
        } else {
            internal_err!("ZarrDatasetScanExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let Some(positions) = self.partitions.get(partition).cloned() else {
            return internal_err!("ZarrDatasetScanExec has no partition {partition}");
        };
        let batch_size = self
            .options
            .batch_size(context.session_config().batch_size());
        let in_flight = self.options.chunks_in_flight(self.reader.dataset.remote);
        let buffers = ReadBuffers::reserve(
            context.memory_pool(),
            &self.metrics,
            partition,
            self.partitions.len(),
            format!("ZarrDatasetScanExec[{partition}]"),
            &self.reader.dataset.location,
            self.reader.block_bytes(),
            in_flight.min((positions.end - positions.start) as usize),
        )?;
        let in_flight = buffers.in_flight;
        let metrics = BlockMetrics::new(&self.metrics, partition);
        if partition == 0 {
            metrics
                .blocks_skipped
                .add(self.total_blocks.saturating_sub(self.plan.len()) as usize);
        }
        let reader = Arc::clone(&self.reader);
        // Without a row filter the reads are cut to the limit; with one, the filtered stream is.
        let (trim_to, limit) = match self.reader.filter {
            Some(_) => (None, self.limit),
            None => (self.limit, None),
        };
        let blocks = Arc::clone(&self.plan).reads(positions, trim_to);
        let stream = futures::stream::iter(blocks)
            .map(move |block| {
                let reader = Arc::clone(&reader);
                let metrics = metrics.clone();
                async move {
                    tokio::task::spawn_blocking(move || {
                        let _timer = metrics.read_time.timer();
                        metrics.blocks_read.add(1);
                        reader.read(&block)
                    })
                    .await
                    .map_err(|e| Error::Internal(format!("block reading task failed: {e}")))?
                }
            })
            .buffered(in_flight)
            .map_err(DataFusionError::from)
            .map_ok(move |batch| {
                futures::stream::iter(slices(&[batch], batch_size).into_iter().map(Ok))
            })
            .try_flatten()
            // The buffers stay reserved while the stream reads.
            .inspect(move |_| {
                let _ = &buffers;
            });
        let stream = limit_rows(stream, limit);
        Ok(make_cooperative(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.reader.schema),
            stream,
        ))))
    }

    fn supports_limit_pushdown(&self) -> bool {
        true
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }

    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let mut scan = ZarrDatasetScanExec::new(DatasetScanRequest {
            dataset: Arc::clone(&self.reader.dataset),
            projection: self.reader.projection.clone(),
            schema: Arc::clone(&self.reader.schema),
            filter: self.reader.filter.clone(),
            selection: self.selection.clone(),
            limit,
            target_partitions: self.target_partitions,
            session_batch_size: self.session_batch_size,
            options: self.options.clone(),
        });
        scan.origin = self.origin.with_limit(limit);
        Some(Arc::new(scan))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> DfResult<Arc<Statistics>> {
        let rows = partition_rows(&self.plan, &self.partitions);
        let filtered = self.reader.filter.is_some();
        scan_statistics(&self.reader.schema, &rows, partition, self.limit, filtered).map(Arc::new)
    }
}

/// Per-partition counters shown by EXPLAIN ANALYZE.
#[derive(Debug, Clone)]
struct BlockMetrics {
    blocks_read: Count,
    blocks_skipped: Count,
    read_time: Time,
}

impl BlockMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        BlockMetrics {
            blocks_read: MetricBuilder::new(metrics).counter("blocks_read", partition),
            blocks_skipped: MetricBuilder::new(metrics).counter("blocks_skipped", partition),
            read_time: MetricBuilder::new(metrics).subset_time("read_time", partition),
        }
    }
}

/// Reads blocks into batches of the projected columns.
#[derive(Debug)]
struct BlockReader {
    dataset: Arc<Dataset>,
    /// The output columns (indices into the dataset's columns).
    projection: Vec<usize>,
    /// The projection, then the filter's other columns.
    needed: Vec<usize>,
    schema: SchemaRef,
    filter: Option<Arc<RowFilter<usize>>>,
}

impl BlockReader {
    /// The rows of one block (blocking: it reads and decodes).
    /// What reading one block holds at most: each needed variable's box under the block,
    /// fetched and decoded (strings counted at 16 bytes a cell).
    fn block_bytes(&self) -> u64 {
        let dataset = &self.dataset;
        variables_read(dataset, &self.needed)
            .into_iter()
            .map(|v| {
                let var = &dataset.variables[v];
                let cells = var
                    .axes
                    .iter()
                    .fold(1u64, |n, &a| n.saturating_mul(dataset.block_shape[a]));
                cells.saturating_mul(var.cell_bytes()).saturating_mul(2)
            })
            .fold(0u64, u64::saturating_add)
    }

    fn read(&self, block: &ChunkRead) -> Result<RecordBatch> {
        let dataset = &self.dataset;
        // The box of the block holding its selected cells, in grid coordinates.
        let read = match block.bounding_box() {
            Some((start, shape)) => block.within(&start, &shape),
            None => block.clone(),
        };
        let rows = read.rows;
        let mut values: HashMap<usize, ArrayRef> = HashMap::new();
        let mut dims: Option<Vec<ArrayRef>> = None;
        // Each variable is read once for all of its needed columns.
        let mut by_var: Vec<(usize, Vec<(usize, usize)>)> = Vec::new();
        for &c in &self.needed {
            match dataset.columns[c] {
                DatasetColumn::Axis(a) => {
                    let indices = dims.get_or_insert_with(|| read.dimension_columns())[a].clone();
                    let column = match &dataset.axes[a].coordinate {
                        Some(coordinate) => take(coordinate.values.as_ref(), &indices, None)
                            .map_err(|e| Error::arrow("coordinate values", e))?,
                        None => indices,
                    };
                    values.insert(c, column);
                }
                DatasetColumn::Variable { var, column } => {
                    match by_var.iter_mut().find(|(v, _)| *v == var) {
                        Some((_, cols)) => cols.push((c, column)),
                        None => by_var.push((var, vec![(c, column)])),
                    }
                }
                DatasetColumn::GlobalAttrs => {
                    let attrs = dataset
                        .global_attrs
                        .as_ref()
                        .ok_or_else(|| Error::Internal("no global attributes".into()))?;
                    values.insert(c, attrs.repeated(rows)?);
                }
            }
        }
        for (var, cols) in by_var {
            let wanted: Vec<usize> = cols.iter().map(|&(_, column)| column).collect();
            let arrays = dataset.variables[var].read_columns(&read, &wanted)?;
            for ((c, _), array) in cols.into_iter().zip(arrays) {
                values.insert(c, array);
            }
        }
        let keep = match &self.filter {
            Some(filter) => {
                let inputs = filter
                    .columns
                    .iter()
                    .map(|c| Arc::clone(&values[c]))
                    .collect();
                Some(filter.keep(inputs, rows)?)
            }
            None => None,
        };
        let columns = self
            .projection
            .iter()
            .map(|c| Arc::clone(&values[c]))
            .collect();
        let options = RecordBatchOptions::new().with_row_count(Some(rows));
        let batch = RecordBatch::try_new_with_options(Arc::clone(&self.schema), columns, &options)
            .map_err(|e| Error::arrow("assembling a block's batch", e))?;
        match keep {
            Some(mask) => {
                filter_record_batch(&batch, &mask).map_err(|e| Error::arrow("filtering a block", e))
            }
            None => Ok(batch),
        }
    }
}
