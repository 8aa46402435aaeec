//! What a partition's reads in flight hold, reserved from the session's memory pool.
//!
//! A scan partition keeps up to `chunks_in_flight` chunk reads going; each holds the fetched
//! bytes, the decoded chunk and the batches made of it, so a partition's buffers are bounded by
//! `in_flight x read_bytes`. The partition reserves that from DataFusion's memory pool before
//! it reads: under a memory limit (`ndfusion --memory-limit`, or an application's
//! `RuntimeEnv`) a partition keeps no more reads in flight than its share of the pool (the
//! limit over the scan's partitions) and than the pool has left, and one that cannot have a
//! single read fails with an error saying what it needed, instead of the process running out
//! of memory.

use std::sync::Arc;

use datafusion::error::DataFusionError;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder};

/// The reservation of one partition's read buffers; released when dropped.
#[derive(Debug)]
pub(crate) struct ReadBuffers {
    /// Reads the partition keeps in flight: at most what was asked, as many as fit.
    pub in_flight: usize,
    _reservation: MemoryReservation,
}

impl ReadBuffers {
    /// Reserves `in_flight` reads of `read_bytes` each for `consumer` (partition `partition`
    /// of a scan of `partitions`), or as many as its share of the pool allows; reports the
    /// bytes reserved as the `read_buffer_bytes` metric. `table` names what is read, for the
    /// error.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn reserve(
        pool: &Arc<dyn MemoryPool>,
        metrics: &ExecutionPlanMetricsSet,
        partition: usize,
        partitions: usize,
        consumer: String,
        table: &str,
        read_bytes: u64,
        in_flight: usize,
    ) -> Result<Self, DataFusionError> {
        let reservation = MemoryConsumer::new(consumer).register(pool);
        if in_flight == 0 {
            // Nothing to read: nothing reserved (one "in flight" keeps a stream well-formed).
            return Ok(ReadBuffers {
                in_flight: 1,
                _reservation: reservation,
            });
        }
        let read_bytes = usize::try_from(read_bytes).unwrap_or(usize::MAX).max(1);
        let share = match pool.memory_limit() {
            MemoryLimit::Finite(limit) => limit / partitions.max(1) / read_bytes,
            MemoryLimit::Infinite | MemoryLimit::Unknown => usize::MAX,
        };
        let mut last_error = None;
        for n in (1..=in_flight.min(share).max(1)).rev() {
            match reservation.try_grow(read_bytes.saturating_mul(n)) {
                Ok(()) => {
                    MetricBuilder::new(metrics)
                        .gauge("read_buffer_bytes", partition)
                        .set(reservation.size());
                    return Ok(ReadBuffers {
                        in_flight: n,
                        _reservation: reservation,
                    });
                }
                Err(e) => last_error = Some(e),
            }
        }
        let reason = last_error.map_or_else(String::new, |e| e.to_string());
        Err(DataFusionError::ResourcesExhausted(format!(
            "reading {table}: one chunk read needs {read_bytes} bytes (fetched, decoded and \
             made into batches), more than the memory pool can give ({reason})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::GreedyMemoryPool;

    #[test]
    fn reads_in_flight_shrink_to_what_the_pool_holds() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1000));
        let metrics = ExecutionPlanMetricsSet::new();
        let reserve = |n, partitions| {
            ReadBuffers::reserve(&pool, &metrics, 0, partitions, "scan".into(), "t", 300, n)
        };
        let first = reserve(4, 1).unwrap();
        assert_eq!(first.in_flight, 3);
        assert_eq!(pool.reserved(), 900);
        let err = reserve(2, 1).unwrap_err().to_string();
        assert!(
            err.contains("reading t: one chunk read needs 300 bytes"),
            "{err}"
        );
        drop(first);
        assert_eq!(pool.reserved(), 0);
        // Two partitions: each keeps to its share (500 bytes, one read), so both fit.
        let (a, b) = (reserve(4, 2).unwrap(), reserve(4, 2).unwrap());
        assert_eq!((a.in_flight, b.in_flight), (1, 1));
        assert_eq!(reserve(0, 2).unwrap().in_flight, 1);
        assert_eq!(pool.reserved(), 600);
    }
}
