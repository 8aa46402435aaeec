//! [`GridScan`]: the scan of a chunk grid, the [`ScanSource`] of arrays (units: the array's
//! chunks) and of datasets (units: blocks of the dataset's grid). The grid's units that the
//! selection touches are split into contiguous runs, one per partition ([`ChunkPartitions`]);
//! a [`GridReader`] reads one unit's selected cells into batches.

use std::fmt;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::stats::Precision;
use datafusion::common::{Result, Statistics};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder};
use datafusion::physical_plan::DisplayFormatType;

use datafusion::physical_plan::ExecutionPlan;

use crate::scan::CellRuns;
use crate::scan::{
    column_names, declares_order, fmt_options, nth_partition, pruned_unit, reversed_unit,
    FoldTarget, GridSource, LeadGate, OpenPartition, PartitionTarget, PartitionUnits, ScanExec,
    ScanShape, ScanSource, SortKey, UnitPruner, UnitRead,
};
use crate::zarr::options::ZarrOptions;
use crate::zarr::plan::axis_expression::AxisExpression;
use crate::zarr::plan::chunk_partitions::ChunkPartitions;
use crate::zarr::plan::chunk_plan::SlabOrder;
use crate::zarr::plan::chunk_selection::{ChunkSelection, RowIndex};
use crate::zarr::plan::derived_column::{ConstantColumn, DerivedColumn};
use crate::zarr::plan::grid_statistics::{
    axis_column_statistics, selected_indices, AxisColumn, AxisIndices, ValueOrder,
};
use crate::zarr::plan::index_set::IndexSet;
use crate::zarr::plan::output_order::{orderings, sorted_axes};
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
    /// Whether its chunks come over a network (the default of `chunks_in_flight`).
    fn over_network(&self) -> bool;
    /// The grid's shape and the shape of its units.
    fn grid(&self) -> (Vec<u64>, Vec<u64>);
    /// The row filter, as EXPLAIN shows it.
    fn row_filter(&self) -> Option<&str>;
    /// What one unit holds at most while it is read (fetched, decoded, made into batches)
    /// when the scan selects `selection` of the grid.
    fn unit_bytes(&self, selection: &Selection) -> u64;
    /// The decoded bytes of stored values one unit reads (what a cluster's task is sized
    /// by): 0 when no values are read (`count(*)`).
    fn unit_read_bytes(&self) -> u64;
    /// The output columns that are grid axes (or expressions of one), and what they hold.
    fn axis_columns(&self) -> Vec<AxisColumn<'_>>;
    /// The output columns that are constants, and what they hold.
    fn constant_columns(&self) -> Vec<(usize, &ConstantColumn)>;
    /// The output columns that never hold a NULL (by default those the schema says so of).
    fn null_free_columns(&self) -> Vec<usize> {
        (self.schema().fields().iter().enumerate())
            .filter(|(_, f)| !f.is_nullable())
            .map(|(i, _)| i)
            .collect()
    }
    /// The `__global_attrs__` output column and its one value, when projected.
    fn global_attrs(&self) -> Option<(usize, ArrayRef)>;
    /// The same reader with only its output columns `keep`, then `extra` columns; `None`
    /// when it has derived columns already.
    fn with_derived_columns(&self, extra: Vec<DerivedColumn>, keep: &[usize]) -> Option<Self>;

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
    /// Reads one unit's selected cells: into batches, or handed to `fold`'s fold (then the
    /// unit's stream yields no batch).
    fn read_unit(
        self: &Arc<Self>,
        unit: ChunkSelection,
        metrics: &Self::Metrics,
        fold: Option<&FoldTarget>,
    ) -> UnitRead;
}

/// What every grid scan is planned with.
#[derive(Debug, Clone)]
pub(crate) struct GridSettings {
    pub selection: Selection,
    pub limit: Option<usize>,
    /// The partitions the session aims for (and on a cluster, the bytes of a task).
    pub target: PartitionTarget,
    /// The session's batch size when the plan was made (EXPLAIN VERBOSE).
    pub session_batch_size: usize,
    pub options: ZarrOptions,
    /// Units and their rows read last to first (a sort pushed into the scan).
    pub reversed: bool,
    /// Whether the scan declares its order (not on a cluster: `scan/order_policy.rs`).
    pub declares_order: bool,
    /// Units dealt to the partitions slab by slab, those first in a sort's key first (a sort
    /// the scan cannot keep: `ScanSource::read_first`).
    pub read_first: Option<ReadFirst>,
}

/// A scan laid out for a sort by `key`, an axis column: slab by slab along its axis.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadFirst {
    pub key: SortKey,
    pub slabs: SlabOrder,
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
            target: PartitionTarget::of(state.config()),
            session_batch_size: state.config().batch_size(),
            options: options.clone(),
            reversed: false,
            declares_order: declares_order(state.config()),
            read_first: None,
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
            (settings.target).with_unit_bytes(reader.unit_read_bytes()),
            settings.limit,
            reader.row_filter().is_some(),
            settings.reversed,
        );
        let partitions = match settings.read_first {
            Some(first) => partitions.dealt(first.slabs),
            None => partitions,
        };
        GridScan {
            reader,
            settings,
            partitions,
        }
    }
}

/// A scan is read backwards only when a unit's whole output is at most this (a reversed unit
/// holds all its rows at once); larger ones are sorted by DataFusion, which can spill.
const MAX_REVERSED_UNIT_BYTES: u64 = 256 << 20;

impl<R: GridReader> GridScan<R> {
    /// The orders rows come in, reading forwards.
    fn forward_orderings(&self) -> Vec<Vec<SortKey>> {
        if !self.settings.declares_order {
            return Vec::new();
        }
        let (_, unit_shape) = self.reader.grid();
        let sorted = sorted_axes(&unit_shape, &self.settings.selection);
        orderings(sorted, &self.reader.axis_columns())
    }

    /// What a unit's rows make, at 8 bytes a cell of each output column.
    fn unit_output_bytes(&self) -> u64 {
        let (_, unit_shape) = self.reader.grid();
        let cells = unit_shape.iter().fold(1u64, |n, &d| n.saturating_mul(d));
        let columns = self.reader.schema().fields().len().max(1) as u64;
        cells.saturating_mul(columns).saturating_mul(8)
    }

    /// The indices each axis takes in `partition` (all partitions: `None`).
    fn axis_indices(&self, partition: Option<usize>) -> Result<Vec<AxisIndices>> {
        let (shape, _) = self.reader.grid();
        let selection = &self.settings.selection;
        let Some(p) = partition else {
            return Ok(selected_indices(selection, &shape));
        };
        nth_partition(self.partitions.runs(), p, R::NAME)?;
        let plan = self.partitions.plan();
        // A partition of a plan of several boxes, or of dealt units: bounded by the whole
        // selection's.
        let run = self.partitions.run(p);
        Ok(run
            .and_then(|run| plan.indices_of_run(run))
            .unwrap_or_else(|| {
                let mut all = selected_indices(selection, &shape);
                all.iter_mut().for_each(|a| {
                    a.exact = false;
                    a.rows_per_index = None;
                });
                all
            }))
    }
}

/// Statistics of one unit's rows, for a dynamic filter: the bounds of the axis columns over
/// the unit's selected indices.
fn unit_statistics<R: GridReader>(reader: &R, unit: &ChunkSelection) -> Statistics {
    let (shape, _) = reader.grid();
    let mut stats = Statistics::new_unknown(reader.schema());
    for column in reader.axis_columns() {
        let a = column.axis;
        let ranges = (unit.local.iter())
            .flat_map(|b| b[a].ranges().iter())
            .map(|r| unit.origin[a] + r.start..unit.origin[a] + r.end);
        let indices = AxisIndices {
            set: IndexSet::from_ranges(shape[a], ranges.collect()),
            exact: true,
            rows_per_index: None,
        };
        stats.column_statistics[column.column] = axis_column_statistics(column.values, &indices);
    }
    stats
}

impl<R: GridReader> ScanSource for GridScan<R> {
    fn shape(&self) -> ScanShape<'_> {
        ScanShape::new(
            R::NAME,
            self.reader.schema(),
            self.partitions.len(),
            R::UNITS,
        )
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
        if self.settings.reversed {
            write!(f, ", reversed")?;
        }
        if let (Some(first), Some(_)) = (self.settings.read_first, self.partitions.dealt_order()) {
            let name = reader.schema().field(first.key.column).name();
            let direction = if first.key.descending { "DESC" } else { "ASC" };
            write!(f, ", read_first={name} {direction}")?;
        }
        self.partitions.fmt_limit(R::UNITS, f)?;
        // EXPLAIN shows the options a user set; EXPLAIN VERBOSE all in force (the batch size
        // as the session's when not set).
        let options = &self.settings.options;
        let options = match t {
            DisplayFormatType::Verbose => {
                let all = options.describe(self.settings.session_batch_size, reader.over_network());
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
        let reversed = self.settings.reversed;
        let mut unit_bytes = self.reader.unit_bytes(&self.settings.selection);
        if reversed {
            unit_bytes = unit_bytes.saturating_add(self.unit_output_bytes());
        }
        let pruner = (open.dynamic_filter).map(|filter| {
            let schema = Arc::clone(self.reader.schema());
            Arc::new(UnitPruner::new(
                Arc::clone(filter),
                schema,
                R::UNITS,
                metrics,
                partition,
            ))
        });
        // Dealt units: the partition's share of the first slab is read before the rest, so a
        // TopK above has its threshold before the rest are checked against it.
        let lead = self.partitions.lead_chunks(partition);
        let gate = (pruner.is_some() && lead > 0).then(|| LeadGate::new(lead));
        let fold = open.fold.cloned();
        let units = units.enumerate().map(move |(i, unit)| {
            let read = match &pruner {
                Some(pruner) => {
                    let statistics = {
                        let (reader, unit) = (Arc::clone(&reader), unit.clone());
                        move || unit_statistics(reader.as_ref(), &unit)
                    };
                    let later = gate.as_ref().filter(|_| i >= lead).cloned();
                    let read = {
                        let (reader, metrics) = (Arc::clone(&reader), unit_metrics.clone());
                        let fold = fold.clone();
                        move || reader.read_unit(unit, &metrics, fold.as_ref())
                    };
                    let read = pruned_unit(read, Arc::clone(pruner), statistics, later);
                    match &gate {
                        Some(gate) if i < lead => gate.lead(read),
                        _ => read,
                    }
                }
                None => reader.read_unit(unit, &unit_metrics, fold.as_ref()),
            };
            if reversed {
                reversed_unit(read)
            } else {
                read
            }
        });
        Ok(PartitionUnits {
            units: Box::new(units),
            unit_count,
            in_flight: options.chunks_in_flight(self.reader.over_network()),
            unit_bytes: Some(unit_bytes),
            table: self.reader.location().to_string(),
            batch_size: Some(options.batch_size(context.session_config().batch_size())),
            limit: self.partitions.stream_limit(),
        })
    }

    fn num_rows(&self, partition: Option<usize>) -> Result<Precision<usize>> {
        self.partitions.num_rows(partition)
    }

    fn read_bytes(&self) -> Option<u64> {
        Some(self.partitions.read_bytes())
    }

    fn orderings(&self) -> Vec<Vec<SortKey>> {
        if self.partitions.dealt_order().is_some() {
            // Dealt units come slab by slab along another axis: no order holds.
            return Vec::new();
        }
        let mut orderings = self.forward_orderings();
        if self.settings.reversed {
            (orderings.iter_mut().flatten()).for_each(|k| k.descending = !k.descending);
        }
        orderings
    }

    /// Within a unit a key of axis `a` keeps its value while the axes after it run through
    /// the unit's selected extent (one selection box: C order).
    fn rows_per_key_run(&self, columns: &[usize]) -> Option<u64> {
        let [b] = self.settings.selection.boxes() else {
            return None;
        };
        let axis_columns = self.reader.axis_columns();
        let last = (columns.iter())
            .map(|c| axis_columns.iter().find(|a| a.column == *c).map(|a| a.axis))
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()?;
        let (_, unit_shape) = self.reader.grid();
        Some(
            (last + 1..unit_shape.len())
                .map(|d| unit_shape[d].min(b[d].len()))
                .product(),
        )
    }

    fn with_derived_columns(
        &self,
        exprs: &[(Arc<dyn PhysicalExpr>, String)],
        keep: &[usize],
    ) -> Option<Arc<dyn ScanSource>> {
        let reader = &self.reader;
        let (shape, _) = reader.grid();
        let columns = reader.axis_columns();
        let attrs = reader.global_attrs();
        let schema = reader.schema();
        let extra = (exprs.iter())
            .map(|(expr, name)| {
                let axis = || AxisExpression::evaluate(expr, name, schema, &columns, |a| shape[a]);
                let constant = || {
                    let (column, value) = attrs.as_ref()?;
                    ConstantColumn::evaluate(expr, name, schema, *column, value)
                };
                (axis().map(DerivedColumn::Axis))
                    .or_else(|| constant().map(DerivedColumn::Constant))
            })
            .collect::<Option<Vec<_>>>()?;
        let reader = Arc::new(reader.with_derived_columns(extra, keep)?);
        Some(Arc::new(GridScan::new(reader, self.settings.clone())))
    }

    /// Units dealt slab by slab along the key's axis, from the end its order puts first;
    /// only when the key is an axis column whose values run one way, over a selection of one
    /// box with more than one slab.
    fn read_first(&self, key: SortKey) -> Option<Arc<dyn ScanSource>> {
        let settings = &self.settings;
        // A cluster's sessions (which declare no orders) replay a scan from its origin, which
        // knows no layout, and their executors get no dynamic filter to gain from one.
        let cluster = !settings.declares_order;
        if cluster || settings.limit.is_some() || settings.reversed || settings.read_first.is_some()
        {
            return None;
        }
        let columns = self.reader.axis_columns();
        let column = columns.iter().find(|c| c.column == key.column)?;
        let ascending = match column.values.order() {
            ValueOrder::Ascending { .. } => true,
            ValueOrder::Descending { .. } => false,
            ValueOrder::Unordered => return None,
        };
        let plan = self.partitions.plan();
        if plan.slab_len(column.axis)? >= plan.len() {
            return None;
        }
        let slabs = SlabOrder {
            axis: column.axis,
            from_end: key.descending == ascending,
        };
        let settings = GridSettings {
            read_first: Some(ReadFirst { key, slabs }),
            ..settings.clone()
        };
        Some(Arc::new(GridScan::new(Arc::clone(&self.reader), settings)))
    }

    fn without_read_first(&self) -> Option<Arc<dyn ScanSource>> {
        self.settings.read_first?;
        let settings = GridSettings {
            read_first: None,
            ..self.settings.clone()
        };
        Some(Arc::new(GridScan::new(Arc::clone(&self.reader), settings)))
    }

    fn prunes_units(&self) -> bool {
        true
    }

    fn reversed(&self) -> Option<Arc<dyn ScanSource>> {
        if self.forward_orderings().is_empty() || self.unit_output_bytes() > MAX_REVERSED_UNIT_BYTES
        {
            return None;
        }
        let settings = GridSettings {
            reversed: !self.settings.reversed,
            ..self.settings.clone()
        };
        Some(Arc::new(GridScan::new(Arc::clone(&self.reader), settings)))
    }

    /// Exact bounds and counts of the axis columns (from the selection); bounds only when a
    /// row filter or a limit keeps some rows out.
    fn statistics(&self, partition: Option<usize>) -> Result<Statistics> {
        let rows = self.num_rows(partition)?;
        let mut stats = Statistics::new_unknown(self.reader.schema()).with_num_rows(rows);
        let indices = self.axis_indices(partition)?;
        for column in self.reader.axis_columns() {
            stats.column_statistics[column.column] =
                axis_column_statistics(column.values, &indices[column.axis]);
        }
        for (column, constant) in self.reader.constant_columns() {
            stats.column_statistics[column] = constant.statistics(rows);
        }
        for column in self.reader.null_free_columns() {
            let stats = &mut stats.column_statistics[column];
            if stats.null_count == Precision::Absent {
                stats.null_count = Precision::Exact(0);
            }
        }
        let cut = self.reader.row_filter().is_some() || self.settings.limit.is_some();
        Ok(if cut {
            let rows = stats.num_rows;
            stats.to_inexact().with_num_rows(rows)
        } else {
            stats
        })
    }

    fn grid(&self) -> Option<&dyn GridSource> {
        let settings = &self.settings;
        let forwards = !settings.reversed && settings.read_first.is_none();
        (forwards && settings.limit.is_none()).then_some(self as &dyn GridSource)
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

impl<R: GridReader> GridSource for GridScan<R> {
    fn shape(&self) -> Vec<u64> {
        self.reader.grid().0
    }

    fn per_index(&self, expr: &Arc<dyn PhysicalExpr>) -> Option<(usize, ArrayRef)> {
        let (shape, _) = self.reader.grid();
        let columns = self.reader.axis_columns();
        let schema = self.reader.schema();
        let evaluated = AxisExpression::evaluate(expr, "", schema, &columns, |a| shape[a])?;
        Some((evaluated.axis, evaluated.values))
    }

    fn indices(&self, partition: Option<usize>) -> Result<Vec<Vec<std::ops::Range<u64>>>> {
        let indices = self.axis_indices(partition)?;
        Ok(indices.iter().map(|a| a.set.ranges().to_vec()).collect())
    }

    fn cells(&self) -> u64 {
        self.settings.selection.len()
    }
}

/// Rows `rows` of a unit's read (numbered among its selected rows) as a grid aggregate sees
/// them: runs along the grid's last axis ([`ChunkSelection::for_each_run`]).
pub(crate) struct ReadRuns<'a> {
    pub read: &'a ChunkSelection,
    pub index: &'a RowIndex,
    pub rows: std::ops::Range<usize>,
}

impl CellRuns for ReadRuns<'_> {
    fn for_each_run(&self, f: &mut dyn FnMut(usize, &[u64], usize)) {
        self.read.for_each_run(self.index, self.rows.clone(), f)
    }
}

/// The constants among `derived`, output columns from `offset` on.
pub(crate) fn constants(derived: &[DerivedColumn], offset: usize) -> Vec<(usize, &ConstantColumn)> {
    (derived.iter().enumerate())
        .filter_map(|(i, d)| match d {
            DerivedColumn::Constant(c) => Some((offset + i, c)),
            DerivedColumn::Axis(_) => None,
        })
        .collect()
}
