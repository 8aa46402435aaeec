//! The scan of a dataset, as a [`ScanSource`]: EXPLAIN shows it as `ZarrDatasetScanExec`.
//! The grid's blocks that the selection touches are split into contiguous runs, one per
//! partition; each block reads, for every variable the query needs, the box of it under the
//! block's selected cells (one chunk for variables chunked like the primary one), on a
//! blocking thread, then applies the row filter.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::{filter_record_batch, take};
use arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use datafusion::physical_plan::DisplayFormatType;
use futures::{FutureExt, StreamExt};

use super::model::{Dataset, DatasetColumn};
use crate::error::{Error, Result};
use crate::scan::{PartitionUnits, ScanSource, UnitRead};
use crate::zarr::chunk_partitions::ChunkPartitions;
use crate::zarr::chunk_plan::{chunk_count, ChunkPlan};
use crate::zarr::chunk_read::ChunkRead;
use crate::zarr::options::ZarrOptions;
use crate::zarr::row_filter::RowFilter;
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

/// The scan of a dataset.
#[derive(Debug)]
pub(crate) struct DatasetScan {
    reader: Arc<BlockReader>,
    selection: Selection,
    partitions: ChunkPartitions,
    /// Per variable read: (name, chunks touched, chunks in all).
    variable_chunks: Vec<(String, u64, u64)>,
    target_partitions: usize,
    session_batch_size: usize,
    options: ZarrOptions,
}

impl DatasetScan {
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
        let partitions = ChunkPartitions::new(
            &dataset.shape(),
            &dataset.block_shape,
            &selection,
            target_partitions,
            limit,
            filter.is_some(),
        );
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
        DatasetScan {
            reader: Arc::new(BlockReader {
                dataset,
                projection,
                needed,
                schema,
                filter,
            }),
            selection,
            partitions,
            variable_chunks,
            target_partitions,
            session_batch_size,
            options,
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

impl ScanSource for DatasetScan {
    fn name(&self) -> &'static str {
        "ZarrDatasetScanExec"
    }

    fn schema(&self) -> &SchemaRef {
        &self.reader.schema
    }

    fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    fn fmt_details(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let dataset = &self.reader.dataset;
        let names: Vec<&str> = self
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "group={}, projection=[{}], ",
            dataset.location,
            names.join(", ")
        )?;
        self.partitions.fmt_counts("blocks", f)?;
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
        self.partitions.fmt_limit("blocks", f)?;
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

    fn open(
        &self,
        partition: usize,
        context: &Arc<TaskContext>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> DfResult<PartitionUnits> {
        let (blocks, unit_count) = self.partitions.reads(partition)?;
        let metrics = BlockMetrics::new(metrics, partition);
        if partition == 0 {
            metrics
                .blocks_skipped
                .add(self.partitions.skipped() as usize);
        }
        let reader = Arc::clone(&self.reader);
        let units = blocks.map(move |block| -> UnitRead {
            let reader = Arc::clone(&reader);
            let metrics = metrics.clone();
            tokio::task::spawn_blocking(move || {
                let _timer = metrics.read_time.timer();
                metrics.blocks_read.add(1);
                reader.read(&block)
            })
            .map(|joined| {
                let batch = joined
                    .map_err(|e| Error::Internal(format!("block reading task failed: {e}")))??;
                Ok(futures::stream::once(async { Ok(batch) }).boxed())
            })
            .boxed()
        });
        let dataset = &self.reader.dataset;
        Ok(PartitionUnits {
            units: Box::new(units),
            unit_count,
            in_flight: self.options.chunks_in_flight(dataset.remote),
            unit_bytes: Some(self.reader.block_bytes()),
            table: dataset.location.clone(),
            batch_size: Some(
                self.options
                    .batch_size(context.session_config().batch_size()),
            ),
            limit: self.partitions.stream_limit(),
        })
    }

    fn num_rows(&self, partition: Option<usize>) -> DfResult<Precision<usize>> {
        self.partitions.num_rows(partition)
    }

    fn takes_limits(&self) -> bool {
        true
    }

    fn limit(&self) -> Option<usize> {
        self.partitions.limit()
    }

    fn with_limit(&self, limit: Option<usize>) -> Option<Arc<dyn ScanSource>> {
        Some(Arc::new(DatasetScan::new(DatasetScanRequest {
            dataset: Arc::clone(&self.reader.dataset),
            projection: self.reader.projection.clone(),
            schema: Arc::clone(&self.reader.schema),
            filter: self.reader.filter.clone(),
            selection: self.selection.clone(),
            limit,
            target_partitions: self.target_partitions,
            session_batch_size: self.session_batch_size,
            options: self.options.clone(),
        })))
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
