//! [`ScanSource`]: what a table kind tells the one scan plan ([`super::ScanExec`]) about its
//! scan. The plan owns properties, the partition pipeline, limits, memory reservation,
//! metrics and the cluster origin; a source says how its partitions split into units of
//! work and how one unit becomes record batches.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::{Result, Statistics};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::DisplayFormatType;
use futures::future::BoxFuture;
use futures::stream::BoxStream;

use arrow::array::RecordBatch;

/// The batches one unit of a partition produces.
pub(crate) type UnitBatches = BoxStream<'static, Result<RecordBatch>>;

/// One unit of a partition being read: a chunk, a block, a member, a run of fragments. The
/// future starts no work until it is polled.
pub(crate) type UnitRead = BoxFuture<'static, Result<UnitBatches>>;

/// What a table kind scans. Implemented by the array, dataset, collection and lance-nd scans.
pub(crate) trait ScanSource: fmt::Debug + Send + Sync + 'static {
    /// The name EXPLAIN shows for the scan (`ZarrScanExec`, `LanceNdScanExec`, ...).
    fn name(&self) -> &'static str;

    /// The output schema.
    fn schema(&self) -> &SchemaRef;

    /// How many partitions the scan has (at least one).
    fn partition_count(&self) -> usize;

    /// Writes what EXPLAIN shows after the name (`array=..., chunks=2/9`).
    fn fmt_details(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result;

    /// The units of `partition`, in order. `metrics` is the plan's set, for the source's own
    /// counters.
    fn open(
        &self,
        partition: usize,
        context: &Arc<TaskContext>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Result<PartitionUnits>;

    /// Rows of `partition` (all partitions: `None`), as far as known.
    fn num_rows(&self, partition: Option<usize>) -> Result<Precision<usize>>;

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

    /// Statistics of `partition` beyond the row count (none by default).
    fn statistics(&self, partition: Option<usize>) -> Result<Statistics> {
        Ok(Statistics::new_unknown(self.schema()).with_num_rows(self.num_rows(partition)?))
    }
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
