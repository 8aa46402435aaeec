//! `ZarrScanExec`: the physical scan of one Zarr array.
//!
//! The chunks a selection touches are planned up front and split into contiguous runs, one per
//! DataFusion partition. Each partition streams its chunks, fetching the next while the
//! previous one decodes, and slices each chunk's rows into batches of the session batch size.

use std::fmt;
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

use crate::scan_util::{limit_rows, scan_statistics, slices};

use super::array::ZarrArray;
use super::attributes::GlobalAttrs;
use super::chunk_plan::{chunk_count, plan_chunk_reads};
use super::chunk_read::ChunkRead;
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
    partitions: Vec<Vec<ChunkRead>>,
    total_chunks: u64,
    selected_chunks: usize,
    limit: Option<usize>,
    target_partitions: usize,
    session_batch_size: usize,
    options: ZarrOptions,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
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
        let reads = plan_chunk_reads(&meta.shape, &meta.chunk_shape, &selection);
        let selected_chunks = reads.len();
        // Row counts are known up front unless a row filter drops rows: then the limit is
        // applied to the filtered stream instead.
        let trim_to = if filter.is_none() { limit } else { None };
        let partitions = split_into_partitions(reads, target_partitions.max(1), trim_to);
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
            partitions,
            selected_chunks,
            limit,
            target_partitions,
            session_batch_size,
            options,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    fn rows_in(reads: &[ChunkRead]) -> usize {
        reads.iter().map(|r| r.rows).sum()
    }
}

/// Contiguous runs of chunks, one per partition (at most `target` partitions, at least one).
/// With a limit, each partition keeps only the chunks (and rows) needed to reach it.
pub(crate) fn split_into_partitions(
    reads: Vec<ChunkRead>,
    target: usize,
    limit: Option<usize>,
) -> Vec<Vec<ChunkRead>> {
    let n = reads.len();
    let parts = target.min(n).max(1);
    let mut out: Vec<Vec<ChunkRead>> = (0..parts).map(|_| Vec::new()).collect();
    for (i, read) in reads.into_iter().enumerate() {
        out[i * parts / n.max(1)].push(read);
    }
    if let Some(limit) = limit {
        for part in &mut out {
            let mut remaining = limit;
            part.retain_mut(|read| {
                if remaining == 0 {
                    return false;
                }
                read.rows = read.rows.min(remaining);
                remaining -= read.rows;
                true
            });
        }
    }
    out
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
                    self.selected_chunks,
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
                write!(f, "chunks={}/{}", self.selected_chunks, self.total_chunks)
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
        let Some(reads) = self.partitions.get(partition) else {
            return internal_err!("ZarrScanExec has no partition {partition}");
        };
        let batch_size = self
            .options
            .batch_size(context.session_config().batch_size());
        let in_flight = self
            .options
            .chunks_in_flight(self.reader.array.store.is_remote());
        let metrics = ChunkMetrics::new(&self.metrics, partition);
        if partition == 0 {
            metrics
                .chunks_skipped
                .add((self.total_chunks as usize).saturating_sub(self.selected_chunks));
        }
        let reader = Arc::clone(&self.reader);
        let limit = if self.reader.filter.is_some() {
            self.limit
        } else {
            None
        };
        let stream = futures::stream::iter(reads.clone())
            .map(move |read| Arc::clone(&reader).read(read, metrics.clone()))
            .buffered(in_flight)
            .map_err(datafusion::error::DataFusionError::from)
            .map_ok(move |batches| {
                futures::stream::iter(slices(&batches, batch_size).into_iter().map(Ok))
            })
            .try_flatten();
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
        Some(Arc::new(ZarrScanExec::new(ScanRequest {
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
        })))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let rows: Vec<usize> = self.partitions.iter().map(|p| Self::rows_in(p)).collect();
        let filtered = self.reader.filter.is_some();
        scan_statistics(&self.reader.schema, &rows, partition, self.limit, filtered).map(Arc::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(rows: &[usize]) -> Vec<ChunkRead> {
        rows.iter()
            .enumerate()
            .map(|(i, &rows)| ChunkRead {
                indices: vec![i as u64],
                origin: vec![0],
                shape: vec![rows as u64],
                local: vec![vec![crate::zarr::index_set::IndexSet::full(rows as u64)]],
                rows,
            })
            .collect()
    }

    #[test]
    fn chunks_are_split_into_contiguous_runs() {
        let parts = split_into_partitions(reads(&[1, 1, 1, 1, 1]), 2, None);
        let idx: Vec<Vec<u64>> = parts
            .iter()
            .map(|p| p.iter().map(|r| r.indices[0]).collect())
            .collect();
        assert_eq!(idx, vec![vec![0, 1, 2], vec![3, 4]]);
        assert_eq!(split_into_partitions(vec![], 4, None).len(), 1);
    }

    #[test]
    fn a_limit_keeps_only_the_rows_each_partition_needs() {
        let parts = split_into_partitions(reads(&[4, 4, 4, 4]), 1, Some(6));
        assert_eq!(
            parts[0].iter().map(|r| r.rows).collect::<Vec<_>>(),
            vec![4, 2]
        );
    }
}
