//! A chunk plan split over a scan's partitions: contiguous runs of chunk positions (of an
//! array's chunks, or of a dataset's blocks), and the limit the scan keeps.
//!
//! Without a row filter a partition's row count is known up front, so a limit cuts the reads
//! themselves (a `LIMIT 10` reads one chunk); with one, the filtered stream is cut instead.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use datafusion::common::stats::Precision;
use datafusion::common::{internal_err, Result};

use crate::scan::{row_count, PartitionTarget};
use crate::zarr::plan::chunk_plan::{chunk_count, ChunkPlan, SlabOrder};
use crate::zarr::plan::chunk_selection::ChunkSelection;
use crate::zarr::plan::selection::Selection;

#[derive(Debug)]
pub(crate) struct ChunkPartitions {
    plan: Arc<ChunkPlan>,
    /// Chunk positions in `plan`, per partition.
    partitions: Vec<Range<u64>>,
    /// Chunks of the whole grid.
    total: u64,
    limit: Option<usize>,
    /// Whether a row filter drops rows.
    filtered: bool,
    /// Whether each partition reads its chunks last to first.
    reversed: bool,
    /// What the partition count was worked out from (EXPLAIN shows a cluster's task size).
    target: PartitionTarget,
    /// Chunks dealt to the partitions in turn, slab by slab in this order, in place of the
    /// runs (a sort that stays above the scan sees first the chunks it most likely keeps).
    dealt: Option<SlabOrder>,
}

impl ChunkPartitions {
    pub(crate) fn new(
        shape: &[u64],
        chunk_shape: &[u64],
        selection: &Selection,
        target: PartitionTarget,
        limit: Option<usize>,
        filtered: bool,
        reversed: bool,
    ) -> Self {
        let plan = Arc::new(ChunkPlan::new(shape, chunk_shape, selection));
        let trim_to = if filtered { None } else { limit };
        let count = target.partitions_for(plan.len()) as usize;
        let partitions = if reversed {
            plan.partitions_from_end(count, trim_to)
        } else {
            plan.partitions(count, trim_to)
        };
        ChunkPartitions {
            plan,
            partitions,
            total: chunk_count(shape, chunk_shape),
            limit,
            filtered,
            reversed,
            target,
            dealt: None,
        }
    }

    /// The same chunks dealt to the partitions in turn (chunk `k` of `order` to partition
    /// `k % partitions`), so every partition reads first its share of the first slab. Only a
    /// plan of one box read forwards without a limit is dealt; any other keeps its runs.
    ///
    /// The partition count stays: the sort above may have no limit, and then every
    /// partition reads. With more partitions than a slab has chunks, the last ones start on
    /// the next slab.
    pub(crate) fn dealt(mut self, order: SlabOrder) -> Self {
        if self.plan.slab_len(order.axis).is_some() && self.limit.is_none() && !self.reversed {
            self.dealt = Some(order);
        }
        self
    }

    /// The order chunks are dealt in, when they are.
    pub(crate) fn dealt_order(&self) -> Option<SlabOrder> {
        self.dealt
    }

    /// `partition`'s run of chunk positions, when partitions are runs (not dealt).
    pub(crate) fn run(&self, partition: usize) -> Option<Range<u64>> {
        match self.dealt {
            Some(_) => None,
            None => self.partitions.get(partition).cloned(),
        }
    }

    /// How many of `partition`'s first chunks are read before its others, when chunks are
    /// dealt: its share of the first slab, or its first chunk when it has no share (0 when
    /// not dealt).
    pub(crate) fn lead_chunks(&self, partition: usize) -> usize {
        let Some(order) = self.dealt else {
            return 0;
        };
        let per_slab = self.plan.slab_len(order.axis).unwrap_or(0);
        let parts = self.len() as u64;
        let share = per_slab.saturating_sub(partition as u64).div_ceil(parts);
        let chunks = self
            .plan
            .len()
            .saturating_sub(partition as u64)
            .div_ceil(parts);
        share.max(1).min(chunks) as usize
    }

    /// The plan the partitions are runs of.
    pub(crate) fn plan(&self) -> &ChunkPlan {
        &self.plan
    }

    /// Each partition's run of chunk positions (dealt chunks: only their count holds; see
    /// [`Self::run`]).
    pub(crate) fn runs(&self) -> &[Range<u64>] {
        &self.partitions
    }

    /// How many partitions (at least one).
    pub(crate) fn len(&self) -> usize {
        self.partitions.len()
    }

    pub(crate) fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The decoded bytes the selected chunks read.
    pub(crate) fn read_bytes(&self) -> u64 {
        self.target.bytes_of(self.plan.len())
    }

    /// Chunks the selection does not touch.
    pub(crate) fn skipped(&self) -> u64 {
        self.total.saturating_sub(self.plan.len())
    }

    /// The reads of `partition`, worked out as they are reached, and how many there are.
    pub(crate) fn reads(
        &self,
        partition: usize,
    ) -> Result<(Box<dyn Iterator<Item = ChunkSelection> + Send>, usize)> {
        let Some(positions) = self.partitions.get(partition).cloned() else {
            return internal_err!("no partition {partition} in a plan of {}", self.len());
        };
        let plan = Arc::clone(&self.plan);
        if let Some(order) = self.dealt {
            let (len, parts) = (plan.len(), self.len() as u64);
            let ranks = (partition as u64..len).step_by(parts as usize);
            let count = (len.saturating_sub(partition as u64)).div_ceil(parts) as usize;
            let reads = ranks.map(move |rank| plan.read(plan.slab_position(rank, order)));
            return Ok((Box::new(reads), count));
        }
        let count = (positions.end - positions.start) as usize;
        if self.reversed {
            // Without a row filter, the limit is kept from the end: a chunk's leading rows
            // beyond it are not made.
            let mut remaining = if self.filtered { None } else { self.limit };
            let reads = positions.rev().map_while(move |p| {
                let mut read = plan.read(p);
                if let Some(left) = remaining.as_mut() {
                    if *left == 0 {
                        return None;
                    }
                    let keep = read.rows.min(*left);
                    read.skip = read.rows - keep;
                    *left -= keep;
                }
                Some(read)
            });
            return Ok((Box::new(reads), count));
        }
        let trim_to = if self.filtered { None } else { self.limit };
        Ok((Box::new(plan.reads(positions, trim_to)), count))
    }

    /// The limit the batch stream keeps (the reads keep it when nothing is filtered).
    pub(crate) fn stream_limit(&self) -> Option<usize> {
        self.limit.filter(|_| self.filtered)
    }

    /// Rows of `partition` (or of all), before a row filter; a partition of dealt chunks
    /// does not know its own.
    pub(crate) fn num_rows(&self, partition: Option<usize>) -> Result<Precision<usize>> {
        if let (Some(_), Some(p)) = (self.dealt, partition) {
            if p >= self.len() {
                return internal_err!("the scan has no partition {p}");
            }
            return Ok(Precision::Absent);
        }
        let rows: Vec<usize> = self
            .partitions
            .iter()
            .map(|r| (self.plan.rows_before(r.end) - self.plan.rows_before(r.start)) as usize)
            .collect();
        row_count(&rows, partition, self.limit, self.filtered)
    }

    /// `partitions=2, chunks=3/9` (`unit` names what is counted).
    pub(crate) fn fmt_counts(&self, unit: &str, f: &mut fmt::Formatter) -> fmt::Result {
        let sizing = self.target.describe(self.plan.len());
        write!(
            f,
            "partitions={}{sizing}, {unit}={}/{}",
            self.len(),
            self.plan.len(),
            self.total
        )
    }

    /// `, limit=3, chunks_for_limit=1`: without a row filter only the leading chunks that
    /// hold the limit are read.
    pub(crate) fn fmt_limit(&self, unit: &str, f: &mut fmt::Formatter) -> fmt::Result {
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
            if !self.filtered {
                let read = match self.partitions.first() {
                    Some(first) if self.reversed => self.plan.len() - first.start,
                    _ => self.partitions.last().map_or(0, |r| r.end),
                };
                write!(f, ", {unit}_for_limit={read}")?;
            }
        }
        Ok(())
    }

    /// `chunks=3/9` alone (EXPLAIN's tree view).
    pub(crate) fn fmt_touched(&self, unit: &str, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{unit}={}/{}", self.plan.len(), self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::plan::index_set::IndexSet;

    fn count(partitions: usize) -> PartitionTarget {
        PartitionTarget::count(partitions)
    }

    /// On a cluster's scheduler a large selection makes more partitions than the target
    /// count, each a contiguous run of chunks reading at most about the task bytes.
    #[test]
    fn a_task_size_makes_more_partitions_for_more_data() {
        let shape = [64];
        let all = Selection::all(&shape);
        let sized = |unit_bytes| PartitionTarget {
            partitions: 2,
            task_bytes: Some(1000),
            unit_bytes,
        };
        // 16 chunks of 4 elements, 300 bytes each: 4800 bytes in tasks of 1000 at most, so
        // of 3 chunks at most.
        let parts = ChunkPartitions::new(&shape, &[4], &all, sized(300), None, false, false);
        assert_eq!(parts.len(), 6);
        let runs = parts.runs();
        assert_eq!(runs.first().unwrap().start, 0);
        assert_eq!(runs.last().unwrap().end, 16);
        assert!(runs.windows(2).all(|w| w[0].end == w[1].start), "{runs:?}");
        assert!(
            runs.iter().all(|r| (r.end - r.start) * 300 <= 1000),
            "{runs:?}"
        );
        // A small selection keeps the target count.
        let small = Selection::from_boxes(vec![vec![IndexSet::interval(64, 0, 8)]]).unwrap();
        let few = ChunkPartitions::new(&shape, &[4], &small, sized(300), None, false, false);
        assert_eq!(few.len(), 2);
        struct Counts<'a>(&'a ChunkPartitions);
        impl fmt::Display for Counts<'_> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                self.0.fmt_counts("chunks", f)
            }
        }
        assert_eq!(
            Counts(&parts).to_string(),
            "partitions=6 (tasks of 1000 B, 4.7 KiB read), chunks=16/16"
        );
        let local = ChunkPartitions::new(&shape, &[4], &all, count(2), None, false, false);
        assert_eq!(Counts(&local).to_string(), "partitions=2, chunks=16/16");
    }

    /// Dealt slab by slab from the end, every partition reads its share of the last slab
    /// first; a partition's row count is not known, the scan's is.
    #[test]
    fn dealt_chunks_start_with_the_first_slab_in_every_partition() {
        let shape = [6, 4];
        let all = Selection::all(&shape);
        // 3 slabs of 2 chunks along axis 0.
        let order = SlabOrder {
            axis: 0,
            from_end: true,
        };
        let parts =
            ChunkPartitions::new(&shape, &[2, 2], &all, count(2), None, false, false).dealt(order);
        assert_eq!(parts.dealt_order(), Some(order));
        let origins = |p: usize| -> Vec<Vec<u64>> {
            let (reads, n) = parts.reads(p).unwrap();
            let reads: Vec<Vec<u64>> = reads.map(|r| r.origin).collect();
            assert_eq!(reads.len(), n);
            reads
        };
        assert_eq!(origins(0), vec![vec![4, 0], vec![2, 0], vec![0, 0]]);
        assert_eq!(origins(1), vec![vec![4, 2], vec![2, 2], vec![0, 2]]);
        assert_eq!((parts.lead_chunks(0), parts.lead_chunks(1)), (1, 1));
        assert_eq!(parts.run(0), None);
        assert_eq!(parts.num_rows(Some(1)).unwrap(), Precision::Absent);
        assert_eq!(parts.num_rows(None).unwrap(), Precision::Exact(24));
        // More partitions than a slab has chunks: the last ones start on the next slab, and
        // read their first chunk before the others.
        let four =
            ChunkPartitions::new(&shape, &[2, 2], &all, count(4), None, false, false).dealt(order);
        assert_eq!(four.len(), 4);
        let leads: Vec<usize> = (0..4).map(|p| four.lead_chunks(p)).collect();
        assert_eq!(leads, vec![1, 1, 1, 1]);
        let reads: usize = (0..4).map(|p| four.reads(p).unwrap().1).sum();
        assert_eq!(reads, 6);
        let one =
            ChunkPartitions::new(&shape, &[2, 2], &all, count(1), None, false, false).dealt(order);
        assert_eq!((one.len(), one.lead_chunks(0)), (1, 2));
        assert_eq!(one.reads(0).unwrap().1, 6);
        // A limit keeps the runs.
        let limited = ChunkPartitions::new(&shape, &[2, 2], &all, count(2), Some(3), false, false)
            .dealt(order);
        assert_eq!(limited.dealt_order(), None);
    }

    #[test]
    fn chunks_are_split_into_contiguous_runs() {
        let shape = [5];
        let parts = ChunkPartitions::new(
            &shape,
            &[1],
            &Selection::all(&shape),
            count(2),
            None,
            false,
            false,
        );
        assert_eq!(parts.partitions, vec![0..3, 3..5]);
        let none = ChunkPartitions::new(
            &shape,
            &[1],
            &Selection::none(),
            count(4),
            None,
            false,
            false,
        );
        assert_eq!(none.partitions, vec![0..0]);
        assert_eq!(none.skipped(), 5);
    }

    #[test]
    fn a_limit_keeps_only_the_chunks_it_needs() {
        let shape = [16];
        let all = Selection::all(&shape);
        let parts = ChunkPartitions::new(&shape, &[4], &all, count(4), Some(6), false, false);
        assert_eq!(parts.partitions, vec![0..1, 1..2]);
        assert_eq!(parts.num_rows(Some(1)).unwrap(), Precision::Exact(4));
        assert_eq!(parts.num_rows(None).unwrap(), Precision::Exact(6));
        let rows: Vec<usize> = (0..2)
            .flat_map(|p| parts.reads(p).unwrap().0)
            .map(|r| r.rows)
            .collect();
        // Each partition keeps to the limit on its own; the plan above cuts the rest.
        assert_eq!(rows, vec![4, 4]);
        assert_eq!(parts.stream_limit(), None);
        let filtered = ChunkPartitions::new(&shape, &[4], &all, count(4), Some(3), true, false);
        assert_eq!(filtered.len(), 4);
        assert_eq!(filtered.stream_limit(), Some(3));
        assert_eq!(filtered.num_rows(None).unwrap(), Precision::Inexact(3));
        let one = ChunkPartitions::new(&shape, &[4], &all, count(4), Some(3), false, false);
        assert_eq!(one.partitions, vec![0..1]);
    }

    #[test]
    fn read_backwards_a_limit_keeps_the_trailing_chunks() {
        let shape = [18];
        let all = Selection::all(&shape);
        // Chunks of 4 rows: 0..4, ..., 16..18 (2 rows). 7 rows are in the last 3 chunks.
        let parts = ChunkPartitions::new(&shape, &[4], &all, count(2), Some(7), false, true);
        assert_eq!(parts.partitions, vec![2..4, 4..5]);
        let origins: Vec<u64> = (0..2)
            .flat_map(|p| parts.reads(p).unwrap().0)
            .map(|r| r.origin[0])
            .collect();
        assert_eq!(origins, vec![12, 8, 16]);
        // Each partition makes no more than the limit, from its end: 4 + 3 rows, 2 rows.
        let made: Vec<usize> = (0..2)
            .flat_map(|p| parts.reads(p).unwrap().0)
            .map(|r| r.rows - r.skip)
            .collect();
        assert_eq!(made, vec![4, 3, 2]);
        assert_eq!(parts.stream_limit(), None);
        let exact = ChunkPartitions::new(&shape, &[4], &all, count(1), Some(6), false, true);
        assert_eq!(exact.partitions, vec![3..5]);
        let more = ChunkPartitions::new(&shape, &[4], &all, count(1), Some(50), false, true);
        assert_eq!(more.partitions, vec![0..5]);
    }
}
