//! How many partitions a scan is cut into, and so how many tasks its stage makes on a
//! Ballista cluster (one task per partition).
//!
//! Locally a scan has the session's target partitions (one per core: more would only queue).
//! On a cluster a partition is a task, and a task's length matters: a long one is lost whole
//! with its executor and holds a slot that other queries wait for, and a fixed count makes a
//! 10 GB archive's tasks a thousand times longer than a 10 MB one's. So a scheduler's
//! sessions carry a target size ([`TargetTaskBytes`], `--target-task-bytes`): a scan has at
//! least the target partitions, and more when that keeps each task's reads near the target.
//! The size counted is the decoded (uncompressed) bytes of the stored values a task reads,
//! which metadata gives before anything is fetched; each task's units stay contiguous.

use std::sync::Arc;

use datafusion::prelude::SessionConfig;

/// The decoded bytes a cluster's task aims to read: an extension of the scheduler's sessions,
/// set by `--target-task-bytes` (not a setting: clients do not choose it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TargetTaskBytes(pub u64);

impl TargetTaskBytes {
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    /// 1 GiB: 10 to 60 s of reading at the 17–100 MB/s one stream gets from object storage
    /// across a network, decoding included.
    pub(crate) const DEFAULT: TargetTaskBytes = TargetTaskBytes(1 << 30);

    /// `config` with this target: the scans it plans are sized by it.
    #[cfg_attr(not(feature = "cluster"), allow(dead_code))]
    pub(crate) fn on(self, config: SessionConfig) -> SessionConfig {
        config.with_extension(Arc::new(self))
    }
}

/// Partitions a scan is cut into at most, whatever its size and target: a task per partition
/// must stay a plan the scheduler can hold (64 Ki tasks of 1 GiB are 64 TiB).
const MAX_PARTITIONS: u64 = 1 << 16;

/// How many partitions a scan aims for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionTarget {
    /// The session's target partitions: the fewest, data permitting.
    pub partitions: usize,
    /// The decoded bytes a partition aims to read, on a cluster's scheduler.
    pub task_bytes: Option<u64>,
    /// The decoded bytes one unit of the scan reads (a chunk, a block; a member on average),
    /// as the scan works it out from metadata.
    pub unit_bytes: u64,
}

impl PartitionTarget {
    /// The target of scans planned in a session of `config`.
    pub(crate) fn of(config: &SessionConfig) -> Self {
        PartitionTarget {
            partitions: config.target_partitions(),
            task_bytes: config.get_extension::<TargetTaskBytes>().map(|t| t.0),
            unit_bytes: 0,
        }
    }

    /// The same target for a scan whose units read `unit_bytes` each.
    pub(crate) fn with_unit_bytes(self, unit_bytes: u64) -> Self {
        PartitionTarget { unit_bytes, ..self }
    }

    /// A target of `partitions` alone.
    #[cfg(test)]
    pub(crate) fn count(partitions: usize) -> Self {
        PartitionTarget {
            partitions,
            task_bytes: None,
            unit_bytes: 0,
        }
    }

    /// Partitions for `units` units: the target partitions, or more so that no partition
    /// reads more than the task bytes (unless one unit does: a unit is not split); never
    /// more than the units, always at least one.
    pub(crate) fn partitions_for(&self, units: u64) -> u64 {
        let by_size = match self.task_bytes {
            Some(task) => {
                let per_task = (task / self.unit_bytes.max(1)).max(1);
                units.div_ceil(per_task).min(MAX_PARTITIONS)
            }
            None => 0,
        };
        (self.partitions as u64).max(by_size).min(units).max(1)
    }

    /// The decoded bytes `units` units read.
    pub(crate) fn bytes_of(&self, units: u64) -> u64 {
        units.saturating_mul(self.unit_bytes)
    }

    /// What EXPLAIN adds after the partition count of a scan of `units` units on a
    /// cluster's scheduler: ` (tasks of 1.0 GiB, 9.3 GiB read)`.
    pub(crate) fn describe(&self, units: u64) -> String {
        match self.task_bytes {
            Some(task) => format!(
                " (tasks of {}, {} read)",
                crate::limits::format_size(task),
                crate::limits::format_size(self.bytes_of(units))
            ),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_grow_with_the_bytes_read_beyond_the_target_count() {
        let mib = 1u64 << 20;
        let sized = |partitions, unit_bytes| PartitionTarget {
            partitions,
            task_bytes: Some(1 << 30),
            unit_bytes,
        };
        // (target, units) -> partitions
        let cases = [
            (sized(4, mib / 10), 100, 4),           // 10 MiB: the target count
            (sized(4, 8 * mib), 1280, 10),          // 10 GiB: ten tasks of 1 GiB
            (sized(4, 8 * mib), 1281, 11),          // a chunk more: one more task
            (sized(4, 10 * mib), 1024, 11),         // 102 chunks of 10 MiB fit in 1 GiB
            (sized(4, 10 << 30), 6, 6),             // never more than the units
            (sized(4, 10 * mib), 0, 1),             // at least one
            (sized(1, u64::MAX), 1 << 40, 1 << 16), // a crafted size: capped
            (PartitionTarget::count(4).with_unit_bytes(10 * mib), 1024, 4),
            (PartitionTarget::count(8), 3, 3),
        ];
        for (target, units, want) in cases {
            assert_eq!(
                target.partitions_for(units),
                want,
                "{target:?}, {units} units"
            );
        }
    }

    #[test]
    fn the_target_comes_from_the_session() {
        let config = SessionConfig::new().with_target_partitions(3);
        assert_eq!(PartitionTarget::of(&config), PartitionTarget::count(3));
        let sized = TargetTaskBytes(5 << 20).on(config);
        let target = PartitionTarget::of(&sized).with_unit_bytes(3 << 20);
        assert_eq!(target.task_bytes, Some(5 << 20));
        assert_eq!(target.describe(4), " (tasks of 5.0 MiB, 12.0 MiB read)");
        assert_eq!(PartitionTarget::count(3).describe(4), "");
    }
}
