//! [`ScanSource`]: what a table kind tells the one scan plan ([`super::ScanExec`]) about its
//! scan. The plan owns properties, the partition pipeline, limits, memory reservation,
//! metrics and the cluster origin; a source says how its partitions split into units of
//! work and how one unit becomes record batches.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::{internal_err, Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::DisplayFormatType;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

use arrow::array::RecordBatch;

use super::cells::{FoldTarget, GridSource};

/// The batches one unit of a partition produces.
pub(crate) type UnitBatches = BoxStream<'static, Result<RecordBatch>>;

/// One unit of a partition being read: a chunk, a block, a member, a run of fragments. The
/// future starts no work until it is polled.
pub(crate) type UnitRead = BoxFuture<'static, Result<UnitBatches>>;

/// What a table kind scans. Implemented by the array, dataset, collection and lance-nd scans.
pub(crate) trait ScanSource: fmt::Debug + Send + Sync + 'static {
    /// The scan's name, schema and partition count.
    fn shape(&self) -> ScanShape<'_>;

    /// Writes what EXPLAIN shows after the name (`array=..., chunks=2/9`).
    fn fmt_details(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result;

    /// The units of a partition, in order.
    fn open(&self, partition: OpenPartition<'_>) -> Result<PartitionUnits>;

    /// Rows of `partition` (all partitions: `None`), as far as known.
    fn num_rows(&self, partition: Option<usize>) -> Result<Precision<usize>>;

    /// The decoded bytes of stored values the whole scan reads, as metadata tells before
    /// anything is fetched (a collection sizes a cluster's tasks by its members'); `None`
    /// when unknown.
    fn read_bytes(&self) -> Option<u64> {
        None
    }

    /// Whether the scan stops at a limit itself (`with_limit`): then DataFusion pushes
    /// limits into it.
    fn takes_limits(&self) -> bool {
        false
    }

    /// The limit the scan stops at, when it takes limits.
    fn limit(&self) -> Option<usize> {
        None
    }

    /// The same scan stopping after `limit` rows; `None` when the source takes no limits.
    fn with_limit(&self, _limit: Option<usize>) -> Option<Arc<dyn ScanSource>> {
        None
    }

    /// The metrics EXPLAIN ANALYZE shows, given the plan's own (a collection adds its
    /// members').
    fn metrics(&self, own: MetricsSet) -> MetricsSet {
        own
    }

    /// The orders rows come in within each partition, each as keys of the output schema
    /// (none by default).
    fn orderings(&self) -> Vec<Vec<SortKey>> {
        Vec::new()
    }

    /// The same scan reading every partition backwards: its units last to first, each
    /// unit's rows last to first (so its orders are `orderings` reversed); `None` when the
    /// source cannot.
    fn reversed(&self) -> Option<Arc<dyn ScanSource>> {
        None
    }

    /// The same scan laid out for a sort it cannot keep but that stays above it (TopK): the
    /// units whose rows come first in `key`'s order read first, in every partition, so a
    /// TopK's threshold is set by them and prunes the rest ([`Self::prunes_units`]); `None`
    /// when the source cannot tell which units those are.
    fn read_first(&self, _key: SortKey) -> Option<Arc<dyn ScanSource>> {
        None
    }

    /// The same scan with its units in their own order again, undoing
    /// [`Self::read_first`]; `None` when they are (or the source lays out no other order).
    fn without_read_first(&self) -> Option<Arc<dyn ScanSource>> {
        None
    }

    /// Whether the source skips units by a dynamic filter given to [`Self::open`]
    /// (`OpenPartition::dynamic_filter`): then the scan takes the filters DataFusion pushes.
    fn prunes_units(&self) -> bool {
        false
    }

    /// The fewest rows in a row of equal values of the output `columns` (all of them grid
    /// axes, or expressions of one) within a unit, when known.
    fn rows_per_key_run(&self, _columns: &[usize]) -> Option<u64> {
        None
    }

    /// The same scan with only its output columns `keep` (in that order), then `exprs` (each
    /// with its output name, over this scan's columns) as extra columns computed at planning:
    /// once per index of the one grid axis an expression reads, or once per array or member
    /// for an expression of `__global_attrs__` alone; `None` unless the scan can compute
    /// every one.
    fn with_derived_columns(
        &self,
        _exprs: &[(Arc<dyn PhysicalExpr>, String)],
        _keep: &[usize],
    ) -> Option<Arc<dyn ScanSource>> {
        None
    }

    /// The grid the scan reads, when it reads one forwards, whole units at a time and without
    /// a limit (what a grid aggregate folds: [`GridSource`]); `None` by default.
    fn grid(&self) -> Option<&dyn GridSource> {
        None
    }

    /// Statistics of `partition` beyond the row count (none by default).
    fn statistics(&self, partition: Option<usize>) -> Result<Statistics> {
        let rows = self.num_rows(partition)?;
        Ok(Statistics::new_unknown(self.shape().schema).with_num_rows(rows))
    }
}

/// One key of the order rows come in: a column of the output and whether it descends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SortKey {
    pub column: usize,
    pub descending: bool,
}

/// What a scan looks like from outside.
pub(crate) struct ScanShape<'a> {
    /// The name EXPLAIN shows for the scan (`ZarrScanExec`, `LanceNdScanExec`, ...).
    pub name: &'static str,
    /// The output schema.
    pub schema: &'a SchemaRef,
    /// How many partitions the scan has (at least one).
    pub partitions: usize,
    /// What the scan's units are called (`chunks`, `blocks`, `members`), in the counters of
    /// units planned and done that the CLI's progress line reads.
    pub units: &'static str,
}

impl<'a> ScanShape<'a> {
    pub(crate) fn new(
        name: &'static str,
        schema: &'a SchemaRef,
        partitions: usize,
        units: &'static str,
    ) -> Self {
        ScanShape {
            name,
            schema,
            partitions,
            units,
        }
    }
}

/// Partition `partition` of `partitions`, or an error naming the scan.
pub(crate) fn nth_partition<'a, T>(
    partitions: &'a [T],
    partition: usize,
    name: &str,
) -> Result<&'a T> {
    match partitions.get(partition) {
        Some(p) => Ok(p),
        None => internal_err!(
            "{name} has {} partitions, not {partition}",
            partitions.len()
        ),
    }
}

/// The partition a scan starts.
pub(crate) struct OpenPartition<'a> {
    pub index: usize,
    pub context: &'a Arc<TaskContext>,
    /// The plan's metrics, for the source's own counters.
    pub metrics: &'a ExecutionPlanMetricsSet,
    /// The dynamic filters pushed into the scan, as one conjunction (only when the source
    /// [`prunes_units`](ScanSource::prunes_units)): a unit no row of which can pass is skipped.
    pub dynamic_filter: Option<&'a Arc<dyn PhysicalExpr>>,
    /// Where the units hand their cells instead of making batches (only when the source has
    /// a [`grid`](ScanSource::grid)): then their streams yield no batch.
    pub fold: Option<&'a FoldTarget>,
}

/// The schema's column names, comma-separated (EXPLAIN's `projection=[...]`).
pub(crate) fn column_names(schema: &SchemaRef) -> String {
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    names.join(", ")
}

/// Writes `, options=(...)` when `options` says anything.
pub(crate) fn fmt_options(f: &mut fmt::Formatter, options: &str) -> fmt::Result {
    if options.is_empty() {
        return Ok(());
    }
    write!(f, ", options=({options})")
}

/// The work of one partition, as a source lays it out.
pub(crate) struct PartitionUnits {
    /// The units, read `in_flight` at a time (each started when reached).
    pub units: Box<dyn Iterator<Item = UnitRead> + Send>,
    /// How many units `units` yields (reads in flight never exceed it).
    pub unit_count: usize,
    /// Units the source wants in flight.
    pub in_flight: usize,
    /// What one unit holds while in flight, reserved from the session's memory pool for each
    /// unit in flight; `None` when the unit accounts for itself (a member's own scan).
    pub unit_bytes: Option<u64>,
    /// What is read, for the error when not even one unit fits in memory.
    pub table: String,
    /// Batches are cut to at most this many rows (`None`: as the unit made them).
    pub batch_size: Option<usize>,
    /// The stream stops after this many rows (a limit the units do not already keep to).
    pub limit: Option<usize>,
}

impl PartitionUnits {
    /// Units read one after another, each keeping its own reads in flight and reserving its
    /// own memory (a member's scan, Lance's scanner), stopped after `limit` rows.
    pub(crate) fn sequential(
        units: impl Iterator<Item = UnitRead> + Send + 'static,
        unit_count: usize,
        limit: Option<usize>,
    ) -> Self {
        PartitionUnits {
            units: Box::new(units),
            unit_count,
            in_flight: 1,
            unit_bytes: None,
            table: String::new(),
            batch_size: None,
            limit,
        }
    }
}
