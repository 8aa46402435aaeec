//! The scan of one Zarr array, as a [`ScanSource`]: EXPLAIN shows it as `ZarrScanExec`.
//!
//! The chunks a selection touches form a chunk plan, split into contiguous runs of chunk
//! positions, one per DataFusion partition. Each partition works out its chunks' reads as it
//! reaches them, fetching the next while the previous one decodes.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::DisplayFormatType;
use futures::{FutureExt, StreamExt};

use crate::scan::{PartitionUnits, ScanSource, UnitRead};

use super::array::ZarrArray;
use super::attributes::GlobalAttrs;
use super::chunk_partitions::ChunkPartitions;
use super::chunk_reader::ChunkReader;
use super::metrics::ChunkMetrics;
use super::options::ZarrOptions;
use super::row_filter::RowFilter;
use super::schema::ColumnSource;
use super::selection::Selection;

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

/// The scan of a Zarr array.
#[derive(Debug)]
pub(crate) struct ArrayScan {
    reader: Arc<ChunkReader>,
    selection: Selection,
    partitions: ChunkPartitions,
    target_partitions: usize,
    session_batch_size: usize,
    options: ZarrOptions,
}

impl ArrayScan {
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
        let partitions = ChunkPartitions::new(
            &meta.shape,
            &meta.chunk_shape,
            &selection,
            target_partitions,
            limit,
            filter.is_some(),
        );
        ArrayScan {
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
            target_partitions,
            session_batch_size,
            options,
        }
    }
}

impl ScanSource for ArrayScan {
    fn name(&self) -> &'static str {
        "ZarrScanExec"
    }

    fn schema(&self) -> &SchemaRef {
        &self.reader.schema
    }

    fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    fn fmt_details(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let array = &self.reader.array;
        let meta = &array.meta;
        if let DisplayFormatType::TreeRender = t {
            writeln!(f, "array={}", array.location)?;
            return self.partitions.fmt_touched("chunks", f);
        }
        let names: Vec<&str> = self
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "array={}, projection=[{}], ",
            array.location,
            names.join(", ")
        )?;
        self.partitions.fmt_counts("chunks", f)?;
        if !self.selection.is_all(&meta.shape) {
            let described = self.selection.describe(&meta.dimension_names, &meta.shape);
            write!(f, ", selection={described}")?;
        }
        if let Some(filter) = &self.reader.filter {
            write!(f, ", row_filter={}", filter.display)?;
        }
        self.partitions.fmt_limit("chunks", f)?;
        // EXPLAIN shows the options a user set; EXPLAIN VERBOSE all in force (the batch size
        // as the session's when not set).
        let options = match t {
            DisplayFormatType::Verbose => self
                .options
                .describe(self.session_batch_size, array.store.is_remote()),
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
    ) -> Result<PartitionUnits> {
        let (reads, unit_count) = self.partitions.reads(partition)?;
        let array = &self.reader.array;
        let metrics = ChunkMetrics::new(metrics, partition);
        if partition == 0 {
            metrics
                .chunks_skipped
                .add(self.partitions.skipped() as usize);
        }
        let reader = Arc::clone(&self.reader);
        let units = reads.map(move |read| -> UnitRead {
            Arc::clone(&reader)
                .read(read, metrics.clone())
                .map(|batches| {
                    let batches = batches?;
                    Ok(futures::stream::iter(batches.into_iter().map(Ok)).boxed())
                })
                .boxed()
        });
        Ok(PartitionUnits {
            units: Box::new(units),
            unit_count,
            in_flight: self.options.chunks_in_flight(array.store.is_remote()),
            // A read holds the fetched chunk and the decoded one.
            unit_bytes: Some(2 * array.meta.chunk_bytes()),
            table: array.location.clone(),
            batch_size: Some(
                self.options
                    .batch_size(context.session_config().batch_size()),
            ),
            limit: self.partitions.stream_limit(),
        })
    }

    fn num_rows(&self, partition: Option<usize>) -> Result<Precision<usize>> {
        self.partitions.num_rows(partition)
    }

    fn takes_limits(&self) -> bool {
        true
    }

    fn limit(&self) -> Option<usize> {
        self.partitions.limit()
    }

    fn with_limit(&self, limit: Option<usize>) -> Option<Arc<dyn ScanSource>> {
        Some(Arc::new(ArrayScan::new(ScanRequest {
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
}
