//! The counters of a Zarr scan that EXPLAIN ANALYZE shows.

use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};

/// Per-partition counters of chunk reads.
#[derive(Debug, Clone)]
pub(crate) struct ChunkMetrics {
    /// Chunks fetched (whole, or the rows of their selection for plain remote chunks).
    pub chunks_fetched: Count,
    /// Chunks absent from the store: read as the fill value.
    pub chunks_missing: Count,
    /// Chunks of which only the box holding the selected rows was fetched and decoded.
    pub chunks_read_in_part: Count,
    /// Chunks fetched whole but decompressed only up to their last selected row (zstd).
    pub chunks_decoded_in_part: Count,
    /// Requests made to the store for chunk data.
    pub requests: Count,
    /// Bytes fetched (stored bytes), or decoded bytes of chunks read through zarrs' partial
    /// decoder.
    pub bytes_read: Count,
    pub decode_time: Time,
}

impl ChunkMetrics {
    pub(crate) fn new(metrics: &ExecutionPlanMetricsSet, partition: usize) -> Self {
        let counter = |name: &'static str| MetricBuilder::new(metrics).counter(name, partition);
        ChunkMetrics {
            chunks_fetched: counter("chunks_fetched"),
            chunks_missing: counter("chunks_missing"),
            chunks_decoded_in_part: counter("chunks_decoded_in_part"),
            chunks_read_in_part: counter("chunks_read_in_part"),
            requests: counter("requests"),
            bytes_read: counter("bytes_read"),
            decode_time: MetricBuilder::new(metrics).subset_time("decode_time", partition),
        }
    }
}
