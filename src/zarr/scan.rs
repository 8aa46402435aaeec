//! `ZarrScanExec`: the physical scan of one Zarr array.
//!
//! The chunks a selection touches form a [`ChunkPlan`], split into contiguous runs of chunk
//! positions, one per DataFusion partition. Each partition works out its chunks' reads as it
//! reaches them, fetching the next while the previous one decodes, and slices each chunk's rows
//! into batches of the session batch size.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{internal_err, Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::coop::make_cooperative;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType, SchedulingType};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};

use crate::read_buffers::ReadBuffers;
use crate::scan_util::{limit_rows, scan_statistics, slices};
use crate::table_source::OriginSlot;

use super::array::ZarrArray;
use super::attributes::GlobalAttrs;
use super::chunk_plan::{chunk_count, ChunkPlan};
use super::chunk_reader::ChunkReader;
use super::metrics::ChunkMetrics;
use super::options::ZarrOptions;
use super::row_filter::RowFilter;
use super::schema::ColumnSource;
use super::selection::Selection;

/// The scan of a Zarr array: EXPLAIN shows it as `ZarrScanExec`.
#[derive(Debug)]
pub(crate) struct ZarrScanExec {
    reader: Arc<ChunkReader>,
    /// Projected column names, for EXPLAIN.
    column_names: Vec<String>,
    selection: Selection,
    plan: Arc<ChunkPlan>,
    /// Chunk positions in `plan`, per partition.
    partitions: Vec<Range<u64>>,
    total_chunks: u64,
    limit: Option<usize>,
    target_partitions: usize,
    session_batch_size: usize,
    options: ZarrOptions,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    /// The table's scan call that planned this, for a cluster's codec.
    origin: OriginSlot,
}

/// What a scan reads: the array, the projected columns, the row filter and selection.
pub(crate) struct ScanRequest {
    pub array: Arc<ZarrArray>,
    pub schema: SchemaRef,
    pub columns: Vec<ColumnSource>,
    pub filter: Option<Arc<RowFilter>>,
    pub selection: Selection,
    pub limit: Option<usize>,
    pub target_partitions: usize,
    /// The session's batch size when the plan was made (EXPLAIN VERBOSE).
    pub session_batch_size: usize,
    pub global_attrs: Option<GlobalAttrs>,
    pub options: ZarrOptions,
}

impl ZarrScanExec {
    /// The scan call that planned this scan (set by the table).
    pub(crate) fn origin(&self) -> &OriginSlot {
        &self.origin
    }

    pub(crate) fn new(request: ScanRequest) -> Self {
        let ScanRequest {
            array,
            schema,
            columns,
            filter,
            selection,
            limit,
            target_partitions,
            session_batch_size,
            global_attrs,
            options,
        } = request;
        let meta = &array.meta;
        let plan = Arc::new(ChunkPlan::new(&meta.shape, &meta.chunk_shape, &selection));
        // Row counts are known up front unless a row filter drops rows: then the limit is
        // applied to the filtered stream instead.
        let trim_to = if filter.is_none() { limit } else { None };
        let partitions = plan.partitions(target_partitions.max(1), trim_to);
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(partitions.len()),
            EmissionType::Incremental,
            Boundedness::Bounded,
        )
        .with_scheduling_type(SchedulingType::Cooperative);
        ZarrScanExec {
            column_names: schema.fields().iter().map(|f| f.name().clone()).collect(),
            total_chunks: chunk_count(&meta.shape, &meta.chunk_shape),
            reader: Arc::new(ChunkReader {
                array,
                columns,
                schema,
                filter,
                piece_bytes: options.piece_bytes(),
                global_attrs,
            }),
            selection,
            plan,
            partitions,
            limit,
            target_partitions,
            session_batch_size,
            options,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            origin: OriginSlot::default(),
        }
    }

    /// Rows of each partition (before a row filter), for statistics.
    fn partition_rows(&self) -> Vec<usize> {
        partition_rows(&self.plan, &self.partitions)
    }
}

/// Rows of each run of chunk positions in `plan`.
pub(crate) fn partition_rows(plan: &ChunkPlan, partitions: &[Range<u64>]) -> Vec<usize> {
    partitions
        .iter()
        .map(|r| (plan.rows_before(r.end) - plan.rows_before(r.start)) as usize)
        .collect()
}

impl DisplayAs for ZarrScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let meta = &self.reader.array.meta;
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "ZarrScanExec: array={}, projection=[{}], partitions={}, chunks={}/{}",
                    self.reader.array.location,
                    self.column_names.join(", "),
                    self.partitions.len(),
                    self.plan.len(),
                    self.total_chunks,
                )?;
                if !self.selection.is_all(&meta.shape) {
                    let described = self.selection.describe(&meta.dimension_names, &meta.shape);
                    write!(f, ", selection={described}")?;
                }
                if let Some(filter) = &self.reader.filter {
                    write!(f, ", row_filter={}", filter.display)?;
                }
                if let Some(limit) = self.limit {
                    write!(f, ", limit={limit}")?;
                    // Without a row filter only the leading chunks that hold the limit are read.
                    if self.reader.filter.is_none() {
                        let read = self.partitions.last().map_or(0, |r| r.end);
                        write!(f, ", chunks_for_limit={read}")?;
                    }
                }
                // EXPLAIN shows the options a user set; EXPLAIN VERBOSE all in force (the
                // batch size as the session's when not set).
                let options = match t {
                    DisplayFormatType::Verbose => self
                        .options
                        .describe(self.session_batch_size, self.reader.array.store.is_remote()),
                    _ => self.options.describe_set(),
                };
                if !options.is_empty() {
                    write!(f, ", options=({options})")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "array={}", self.reader.array.location)?;
                write!(f, "chunks={}/{}", self.plan.len(), self.total_chunks)
            }
        }
    }
}

impl ExecutionPlan for ZarrScanExec {
    fn name(&self) -> &str {
        "ZarrScanExec"
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
            internal_err!("ZarrScanExec has no children")
        }
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let Some(positions) = self.partitions.get(partition).cloned() else {
            return internal_err!("ZarrScanExec has no partition {partition}");
        };
        let batch_size = self
            .options
            .batch_size(context.session_config().batch_size());
        let in_flight = self
            .options
            .chunks_in_flight(self.reader.array.store.is_remote());
        // A read holds the fetched chunk and the decoded one.
        let buffers = ReadBuffers::reserve(
            context.memory_pool(),
            &self.metrics,
            partition,
            self.partitions.len(),
            format!("ZarrScanExec[{partition}]"),
            &self.reader.array.location,
            2 * self.reader.array.meta.chunk_bytes(),
            in_flight.min((positions.end - positions.start) as usize),
        )?;
        let in_flight = buffers.in_flight;
        let metrics = ChunkMetrics::new(&self.metrics, partition);
        if partition == 0 {
            metrics
                .chunks_skipped
                .add(self.total_chunks.saturating_sub(self.plan.len()) as usize);
        }
        let reader = Arc::clone(&self.reader);
        // Without a row filter the reads are cut to the limit; with one, the filtered stream is.
        let (trim_to, limit) = match self.reader.filter {
            Some(_) => (None, self.limit),
            None => (self.limit, None),
        };
        let reads = Arc::clone(&self.plan).reads(positions, trim_to);
        let stream = futures::stream::iter(reads)
            .map(move |read| Arc::clone(&reader).read(read, metrics.clone()))
            .buffered(in_flight)
            .map_err(datafusion::error::DataFusionError::from)
            .map_ok(move |batches| {
                futures::stream::iter(slices(&batches, batch_size).into_iter().map(Ok))
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
        let mut scan = ZarrScanExec::new(ScanRequest {
            array: Arc::clone(&self.reader.array),
            schema: Arc::clone(&self.reader.schema),
            columns: self.reader.columns.clone(),
            filter: self.reader.filter.clone(),
            selection: self.selection.clone(),
            limit,
            target_partitions: self.target_partitions,
            session_batch_size: self.session_batch_size,
            global_attrs: self.reader.global_attrs.clone(),
            options: self.options.clone(),
        });
        scan.origin = self.origin.with_limit(limit);
        Some(Arc::new(scan))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let rows = self.partition_rows();
        let filtered = self.reader.filter.is_some();
        scan_statistics(&self.reader.schema, &rows, partition, self.limit, filtered).map(Arc::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_split_into_contiguous_runs() {
        let shape = [5];
        let plan = ChunkPlan::new(&shape, &[1], &Selection::all(&shape));
        assert_eq!(plan.partitions(2, None), vec![0..3, 3..5]);
        let none = ChunkPlan::new(&shape, &[1], &Selection::none());
        assert_eq!(none.partitions(4, None), vec![0..0]);
    }

    #[test]
    fn a_limit_keeps_only_the_chunks_it_needs() {
        let shape = [16];
        let plan = Arc::new(ChunkPlan::new(&shape, &[4], &Selection::all(&shape)));
        let parts = plan.partitions(4, Some(6));
        assert_eq!(parts, vec![0..1, 1..2]);
        assert_eq!(partition_rows(&plan, &parts), vec![4, 4]);
        let rows: Vec<usize> = plan.clone().reads(0..4, Some(6)).map(|r| r.rows).collect();
        assert_eq!(rows, vec![4, 2]);
        assert_eq!(plan.partitions(4, Some(3)), vec![0..1]);
    }
}
