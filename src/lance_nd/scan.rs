//! The scan of a lance-nd table, as a [`ScanSource`]: EXPLAIN shows it as `LanceNdScanExec`.
//! Lance scans the table (projection and filter pushed down); every row's nd record batch is
//! materialized onto its grid.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{Result, Statistics};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::metrics::{Count, MetricBuilder};
use datafusion::physical_plan::DisplayFormatType;
use futures::{StreamExt, TryStreamExt};

use lance::Dataset;
use lance_table::format::Fragment;

use super::damage::read_error_naming_files;
use super::format::read_error;
use super::materialize::{ColumnSource, Materializer};
use super::options::LanceNdOptions;
use super::statistics::TableSummary;
use crate::nd::arrow_encoding::GLOBAL_ATTRS_COLUMN;
use crate::scan::{
    column_names, fmt_options, nth_partition, OpenPartition, PartitionUnits, ScanShape, ScanSource,
    UnitRead,
};

const NAME: &str = "LanceNdScanExec";

/// Scanned batches smaller than this are materialized where they arrive: moving them to a
/// blocking thread costs more than the work (an id lookup returns one row).
const INLINE_MATERIALIZE_BYTES: usize = 1 << 20;

/// What a lance-nd scan reads.
#[derive(Debug)]
pub(crate) struct ScanRequest {
    /// The table's location, for messages and EXPLAIN.
    pub uri: String,
    pub dataset: Arc<Dataset>,
    pub schema: SchemaRef,
    pub columns: Vec<ColumnSource>,
    /// All arrays of the table: each row's grid comes from all of them.
    pub arrays: Vec<(String, DataType)>,
    /// What each fragment's rows hold, for the scan's statistics.
    pub summary: Arc<TableSummary>,
    /// Exact filter, evaluated by Lance.
    pub lance_filter: Option<Expr>,
    /// Row-skipping test on `__stats__` columns, evaluated by Lance (inexact).
    pub stats_filter: Option<Expr>,
    pub limit: Option<usize>,
    /// The session's target partitions when the plan was made.
    pub target_partitions: usize,
    pub options: LanceNdOptions,
}

/// The scan of a lance-nd table. The table's Lance fragments are split into contiguous runs,
/// one per partition (a cluster runs them as separate tasks).
#[derive(Debug)]
pub(crate) struct LanceNdScan {
    request: ScanRequest,
    /// Fragments per partition; `None` for a table without fragments (one empty partition).
    partitions: Vec<Option<Vec<Fragment>>>,
    fragment_count: usize,
}

impl LanceNdScan {
    pub(crate) fn new(request: ScanRequest) -> Self {
        let fragments: Vec<Fragment> = request.dataset.manifest().fragments.to_vec();
        let fragment_count = fragments.len();
        let parts = request.target_partitions.clamp(1, fragment_count.max(1));
        let mut partitions: Vec<Option<Vec<Fragment>>> = vec![None; parts];
        for (i, fragment) in fragments.into_iter().enumerate() {
            partitions[i * parts / fragment_count]
                .get_or_insert_with(Vec::new)
                .push(fragment);
        }
        LanceNdScan {
            request,
            partitions,
            fragment_count,
        }
    }

    /// Arrays whose values are read (projected); the others are read as dimensions only.
    fn value_arrays(&self) -> Vec<String> {
        self.request
            .columns
            .iter()
            .filter_map(|c| match c {
                ColumnSource::Array(a) => Some(a.clone()),
                _ => None,
            })
            .collect()
    }

    /// What Lance reads: projected arrays whole, the other arrays' dim_names and dim_sizes,
    /// and the global attributes when projected.
    fn lance_projection(&self) -> Vec<String> {
        let values = self.value_arrays();
        let mut out = Vec::new();
        for (a, _) in &self.request.arrays {
            if values.contains(a) {
                out.push(a.clone());
            } else {
                out.push(format!("{a}.dim_names"));
                out.push(format!("{a}.dim_sizes"));
            }
        }
        if self.request.columns.contains(&ColumnSource::GlobalAttrs) {
            out.push(GLOBAL_ATTRS_COLUMN.to_string());
        }
        out
    }

    fn combined_filter(&self) -> Option<Expr> {
        match (&self.request.lance_filter, &self.request.stats_filter) {
            (Some(a), Some(b)) => Some(a.clone().and(b.clone())),
            (a, b) => a.clone().or_else(|| b.clone()),
        }
    }
}

impl ScanSource for LanceNdScan {
    fn shape(&self) -> ScanShape<'_> {
        ScanShape::new(
            NAME,
            &self.request.schema,
            self.partitions.len(),
            "fragment_scans",
        )
    }

    fn fmt_details(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let request = &self.request;
        let names = column_names(&request.schema);
        write!(
            f,
            "table={}, projection=[{}], partitions={}, fragments={}",
            request.uri,
            names,
            self.partitions.len(),
            self.fragment_count,
        )?;
        if let Some(filter) = &request.lance_filter {
            write!(f, ", lance_filter={filter}")?;
        }
        if let Some(filter) = &request.stats_filter {
            write!(f, ", stats_filter={filter}")?;
        }
        if let Some(limit) = request.limit {
            write!(f, ", limit={limit}")?;
        }
        // EXPLAIN shows the options a user set; EXPLAIN VERBOSE all in force.
        let options = match t {
            DisplayFormatType::Verbose => request
                .options
                .describe(request.target_partitions.div_ceil(self.partitions.len())),
            _ => request.options.describe_set(),
        };
        fmt_options(f, &options)
    }

    fn open(&self, open: OpenPartition<'_>) -> Result<PartitionUnits> {
        let (partition, context, metrics) = (open.index, open.context, open.metrics);
        let fragments = nth_partition(&self.partitions, partition, NAME)?.clone();
        let request = &self.request;
        let uri = request.uri.clone();
        let dataset = Arc::clone(&request.dataset);
        let projection = self.lance_projection();
        let filter = self.combined_filter();
        // Lance reads ahead io_parallelism x 2 fragments by default (on local disk, every
        // fragment of a table of ten), so a full scan held most of the table in memory; one
        // fragment per core in flight, shared by the partitions, keeps both busy and memory
        // bounded by fragment size.
        let per_partition = context
            .session_config()
            .target_partitions()
            .div_ceil(self.partitions.len());
        let fragments_in_flight = request.options.fragments_in_flight(per_partition);
        let batch_bytes = request.options.batch_bytes() as u64;
        let open_error = {
            let uri = uri.clone();
            move |e: lance::Error| DataFusionError::from(read_error(&uri, e))
        };
        // A failed read names the damaged data files, if any (checked only then).
        let read_failed = {
            let (uri, dataset) = (uri.clone(), Arc::clone(&dataset));
            move |e: lance::Error| {
                let (uri, dataset) = (uri.clone(), Arc::clone(&dataset));
                async move {
                    Err(DataFusionError::from(
                        read_error_naming_files(&dataset, &uri, e).await,
                    ))
                }
            }
        };
        let batches = futures::stream::once(async move {
            let mut scanner = dataset.scan();
            scanner.project(&projection).map_err(&open_error)?;
            scanner.with_row_id();
            scanner.batch_size_bytes(batch_bytes);
            scanner.fragment_readahead(fragments_in_flight);
            if let Some(fragments) = fragments {
                scanner.with_fragments(fragments);
            }
            if let Some(filter) = filter {
                scanner.filter_expr(filter);
            }
            Ok::<_, DataFusionError>(
                scanner
                    .try_into_stream()
                    .await
                    .map_err(&open_error)?
                    .or_else(read_failed),
            )
        })
        .try_flatten();

        let materializer = Arc::new(Materializer {
            uri,
            schema: Arc::clone(&request.schema),
            columns: request.columns.clone(),
            arrays: request.arrays.clone(),
            values: self.value_arrays(),
        });
        let rows_read: Count = MetricBuilder::new(metrics).counter("nd_batches_read", partition);
        let stream = batches
            .map(move |batch| {
                let materializer = Arc::clone(&materializer);
                let rows_read = rows_read.clone();
                async move {
                    let batch = batch?;
                    rows_read.add(batch.num_rows());
                    if batch.get_array_memory_size() < INLINE_MATERIALIZE_BYTES {
                        return Ok(materializer.materialize(&batch)?);
                    }
                    tokio::task::spawn_blocking(move || materializer.materialize(&batch))
                        .await
                        .map_err(|e| {
                            DataFusionError::Execution(format!("materializing task failed: {e}"))
                        })?
                        .map_err(DataFusionError::from)
                }
            })
            .buffered(2);
        let unit: UnitRead = Box::pin(futures::future::ready(Ok(stream.boxed())));
        // Lance keeps its own reads in flight (`fragments_in_flight`).
        Ok(PartitionUnits::sequential(
            std::iter::once(unit),
            1,
            request.limit,
        ))
    }

    fn num_rows(&self, partition: Option<usize>) -> Result<Precision<usize>> {
        Ok(self.statistics(partition)?.num_rows)
    }

    fn statistics(&self, partition: Option<usize>) -> Result<Statistics> {
        let request = &self.request;
        let fragments: Vec<u64> = match partition {
            Some(p) => nth_partition(&self.partitions, p, NAME)?
                .iter()
                .flatten()
                .map(|f| f.id)
                .collect(),
            None => self
                .partitions
                .iter()
                .flatten()
                .flatten()
                .map(|f| f.id)
                .collect(),
        };
        let types: Vec<DataType> = request
            .schema
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let filtered = request.lance_filter.is_some() || request.stats_filter.is_some();
        Ok(request
            .summary
            .statistics(
                &fragments,
                &request.columns,
                &types,
                filtered,
                request.limit,
            )
            .unwrap_or_else(|| Statistics::new_unknown(&request.schema)))
    }
}
