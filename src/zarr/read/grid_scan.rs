//! [`GridScan`]: the scan of a chunk grid, the [`ScanSource`] of arrays (units: the array's
//! chunks) and of datasets (units: blocks of the dataset's grid). The grid's units that the
//! selection touches are split into contiguous runs, one per partition ([`ChunkPartitions`]);
//! a [`GridReader`] reads one unit's selected cells into batches.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::Result;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::DisplayFormatType;

use datafusion::physical_plan::ExecutionPlan;

use crate::scan::{
    column_names, fmt_options, OpenPartition, PartitionUnits, ScanExec, ScanShape, ScanSource,
    UnitRead,
};
use crate::zarr::options::ZarrOptions;
use crate::zarr::plan::chunk_partitions::ChunkPartitions;
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::selection::Selection;

/// How one kind of grid is read: one unit (a chunk, a block) at a time.
pub(crate) trait GridReader: fmt::Debug + Send + Sync + Sized + 'static {
    /// The scan's name in EXPLAIN.
    const NAME: &'static str;
    /// What the grid's units are called in EXPLAIN and its counters (`chunks`, `blocks`).
    const UNITS: &'static str;
    /// What the location is in EXPLAIN (`array`, `group`).
    const LOCATION: &'static str;

    /// The counters of one partition's reads.
    type Metrics: Clone + Send + Sync + 'static;

    fn schema(&self) -> &SchemaRef;
    fn location(&self) -> &str;
    fn remote(&self) -> bool;
    /// The grid's shape and the shape of its units.
    fn grid(&self) -> (Vec<u64>, Vec<u64>);
    /// The row filter, as EXPLAIN shows it.
    fn row_filter(&self) -> Option<&str>;
    /// What one unit holds while it is read (fetched and decoded).
    fn unit_bytes(&self) -> u64;

    /// `selection`, as EXPLAIN shows it.
    fn describe_selection(&self, selection: &Selection) -> String;
    /// What EXPLAIN adds after the selection (per-variable chunk counts).
    fn fmt_reads(&self, _selection: &Selection, _f: &mut fmt::Formatter) -> fmt::Result {
        Ok(())
    }
    /// What EXPLAIN VERBOSE adds after the options.
    fn verbose_details(&self) -> Option<String> {
        None
    }

    fn metrics(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self::Metrics;
    /// Reads one unit's selected cells.
    fn read_unit(self: &Arc<Self>, unit: ChunkSelection, metrics: &Self::Metrics) -> UnitRead;
}

/// What every grid scan is planned with.
#[derive(Debug, Clone)]
pub(crate) struct GridSettings {
    pub selection: Selection,
    pub limit: Option<usize>,
    pub target_partitions: usize,
    /// The session's batch size when the plan was made (EXPLAIN VERBOSE).
    pub session_batch_size: usize,
    pub options: ZarrOptions,
}

impl GridSettings {
    pub(crate) fn new(
        state: &dyn Session,
        selection: Selection,
        limit: Option<usize>,
        options: &ZarrOptions,
    ) -> Self {
        GridSettings {
            selection,
            limit,
            target_partitions: state.config().target_partitions(),
            session_batch_size: state.config().batch_size(),
            options: options.clone(),
        }
    }
}

/// The scan of a chunk grid.
#[derive(Debug)]
pub(crate) struct GridScan<R> {
    reader: Arc<R>,
    settings: GridSettings,
    partitions: ChunkPartitions,
}

impl<R: GridReader> GridScan<R> {
    /// The scan plan reading `reader`'s grid.
    pub(crate) fn plan(reader: R, settings: GridSettings) -> Arc<dyn ExecutionPlan> {
        Arc::new(ScanExec::new(Arc::new(GridScan::new(
            Arc::new(reader),
            settings,
        ))))
    }

    pub(crate) fn new(reader: Arc<R>, settings: GridSettings) -> Self {
        let (shape, unit_shape) = reader.grid();
        let partitions = ChunkPartitions::new(
            &shape,
            &unit_shape,
            &settings.selection,
            settings.target_partitions,
            settings.limit,
            reader.row_filter().is_some(),
        );
        GridScan {
            reader,
            settings,
            partitions,
        }
    }
}

impl<R: GridReader> ScanSource for GridScan<R> {
    fn shape(&self) -> ScanShape<'_> {
        ScanShape::new(R::NAME, self.reader.schema(), self.partitions.len())
    }

    fn fmt_details(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let reader = &self.reader;
        if let DisplayFormatType::TreeRender = t {
            writeln!(f, "{}={}", R::LOCATION, reader.location())?;
            return self.partitions.fmt_touched(R::UNITS, f);
        }
        let names = column_names(reader.schema());
        let location = reader.location();
        write!(f, "{}={location}, projection=[{}], ", R::LOCATION, names)?;
        self.partitions.fmt_counts(R::UNITS, f)?;
        let selection = &self.settings.selection;
        if !selection.is_all(&reader.grid().0) {
            write!(f, ", selection={}", reader.describe_selection(selection))?;
        }
        reader.fmt_reads(selection, f)?;
        if let Some(filter) = reader.row_filter() {
            write!(f, ", row_filter={filter}")?;
        }
        self.partitions.fmt_limit(R::UNITS, f)?;
        // EXPLAIN shows the options a user set; EXPLAIN VERBOSE all in force (the batch size
        // as the session's when not set).
        let options = &self.settings.options;
        let options = match t {
            DisplayFormatType::Verbose => {
                let all = options.describe(self.settings.session_batch_size, reader.remote());
                match reader.verbose_details() {
                    Some(more) => format!("{all}, {more}"),
                    None => all,
                }
            }
            _ => options.describe_set(),
        };
        fmt_options(f, &options)
    }

    fn open(&self, open: OpenPartition<'_>) -> Result<PartitionUnits> {
        let (partition, context, metrics) = (open.index, open.context, open.metrics);
        let (units, unit_count) = self.partitions.reads(partition)?;
        if partition == 0 {
            MetricBuilder::new(metrics)
                .counter(format!("{}_skipped", R::UNITS), partition)
                .add(self.partitions.skipped() as usize);
        }
        let unit_metrics = R::metrics(metrics, partition);
        let reader = Arc::clone(&self.reader);
        let options = &self.settings.options;
        Ok(PartitionUnits {
            units: Box::new(units.map(move |unit| reader.read_unit(unit, &unit_metrics))),
            unit_count,
            in_flight: options.chunks_in_flight(self.reader.remote()),
            unit_bytes: Some(self.reader.unit_bytes()),
            table: self.reader.location().to_string(),
            batch_size: Some(options.batch_size(context.session_config().batch_size())),
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
        let settings = GridSettings {
            limit,
            ..self.settings.clone()
        };
        Some(Arc::new(GridScan::new(Arc::clone(&self.reader), settings)))
    }
}
