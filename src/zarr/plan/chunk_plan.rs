//! The chunks a selection touches, in C order of the chunk grid, and each chunk's read worked
//! out when the scan reaches it.
//!
//! One box of a selection touches the cartesian product of, per dimension, the chunks its index
//! set meets; the k-th chunk of that product and the rows before it follow from per-dimension
//! arithmetic. So a plan costs memory and time in the number of dimensions and index ranges,
//! not in the number of chunks: an array of 10 million chunks plans in microseconds, and a
//! partition is a range of chunk positions.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use crate::zarr::plan::chunk_selection::{for_each_index, ChunkSelection};
use crate::zarr::plan::grid_statistics::AxisIndices;
use crate::zarr::plan::index_set::IndexSet;
use crate::zarr::plan::selection::{box_is_empty, box_len, IndexBox, Selection};

/// Selections of several boxes touching at most this many chunks are listed up front, so a
/// chunk two boxes share is read once; beyond it each box's chunks are worked out in turn and
/// a shared chunk is read once per box (each time for that box's elements only).
const MAX_LISTED_CHUNKS: u64 = 100_000;

/// A plan read slab by slab along one axis ([`ChunkPlan::slab_position`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlabOrder {
    pub axis: usize,
    /// Last slab first.
    pub from_end: bool,
}

/// The chunks a selection touches, in C order of the chunk grid (box by box when the selection
/// has many boxes over many chunks).
#[derive(Debug)]
pub(crate) struct ChunkPlan {
    chunk_shape: Vec<u64>,
    layout: Layout,
}

#[derive(Debug)]
enum Layout {
    /// Each box's chunks in turn. `starts[i]` is the position of box `i`'s first chunk and
    /// `row_starts[i]` the rows before it; both end with the totals.
    Boxes {
        boxes: Vec<BoxChunks>,
        starts: Vec<u64>,
        row_starts: Vec<u64>,
    },
    /// Every read listed, with the rows before each (ending with the total).
    Listed {
        reads: Vec<ChunkSelection>,
        row_starts: Vec<u64>,
    },
}

impl ChunkPlan {
    pub(crate) fn new(shape: &[u64], chunk_shape: &[u64], selection: &Selection) -> Self {
        Self::listing_at_most(shape, chunk_shape, selection, MAX_LISTED_CHUNKS)
    }

    fn listing_at_most(
        shape: &[u64],
        chunk_shape: &[u64],
        selection: &Selection,
        max_listed: u64,
    ) -> Self {
        let boxes: Vec<BoxChunks> = selection
            .boxes()
            .iter()
            .filter(|b| !box_is_empty(b))
            .map(|b| BoxChunks::new(b, chunk_shape))
            .collect();
        let chunks: u64 = boxes.iter().map(|b| b.count).sum();
        let layout = if shape.is_empty() || (boxes.len() > 1 && chunks <= max_listed) {
            let reads = list_chunk_reads(shape, chunk_shape, selection);
            let row_starts = prefix_sums(reads.iter().map(|r| r.rows as u64));
            Layout::Listed { reads, row_starts }
        } else {
            let starts = prefix_sums(boxes.iter().map(|b| b.count));
            let row_starts = prefix_sums(boxes.iter().map(|b| b.rows));
            Layout::Boxes {
                boxes,
                starts,
                row_starts,
            }
        };
        ChunkPlan {
            chunk_shape: chunk_shape.to_vec(),
            layout,
        }
    }

    /// Number of chunk reads.
    pub(crate) fn len(&self) -> u64 {
        match &self.layout {
            Layout::Boxes { starts, .. } => *starts.last().unwrap_or(&0),
            Layout::Listed { reads, .. } => reads.len() as u64,
        }
    }

    /// The read at position `p < len()`.
    pub(crate) fn read(&self, p: u64) -> ChunkSelection {
        match &self.layout {
            Layout::Boxes { boxes, starts, .. } => {
                let i = starts.partition_point(|&s| s <= p) - 1;
                boxes[i].read(p - starts[i], &self.chunk_shape)
            }
            Layout::Listed { reads, .. } => reads[p as usize].clone(),
        }
    }

    /// Rows of the reads before position `p <= len()`.
    pub(crate) fn rows_before(&self, p: u64) -> u64 {
        match &self.layout {
            Layout::Boxes {
                boxes,
                starts,
                row_starts,
            } => {
                let i = starts.partition_point(|&s| s <= p) - 1;
                match boxes.get(i) {
                    Some(b) => row_starts[i] + b.rows_before(p - starts[i]),
                    None => row_starts[i],
                }
            }
            Layout::Listed { row_starts, .. } => row_starts[p as usize],
        }
    }

    /// Per axis, the indices the reads at `positions` select, when the plan is one box's
    /// chunks (else `None`). Along an axis the run's first and last chunk agree on every axis
    /// before it, the run covers the chunks between them there (an exact set); where they
    /// differ before it, the run passes through both ends of the box along it (its first and
    /// last index are selected, but not necessarily all between).
    pub(crate) fn indices_of_run(&self, positions: Range<u64>) -> Option<Vec<AxisIndices>> {
        let Layout::Boxes { boxes, .. } = &self.layout else {
            return None;
        };
        let ([b], false) = (boxes.as_slice(), positions.is_empty()) else {
            return None;
        };
        let (first, last) = (b.digits(positions.start), b.digits(positions.end - 1));
        let mut agreed = true;
        let sets: Vec<(IndexSet, bool)> = (b.axes.iter().enumerate())
            .map(|(a, axis)| {
                let whole = (axis.set.clone(), axis.count == 1);
                let run = if agreed {
                    let start = axis.chunk_at(first[a]) * axis.chunk;
                    let end = (axis.chunk_at(last[a]) + 1) * axis.chunk;
                    let n = axis.set.ranges().last().map_or(0, |r| r.end);
                    (axis.set.intersect(&IndexSet::interval(n, start, end)), true)
                } else {
                    whole
                };
                agreed &= first[a] == last[a];
                run
            })
            .collect();
        let lens: Vec<u64> = sets.iter().map(|(s, _)| s.len()).collect();
        let all_exact = sets.iter().all(|(_, exact)| *exact);
        Some(
            sets.into_iter()
                .enumerate()
                .map(|(a, (set, exact))| AxisIndices {
                    set,
                    exact,
                    // Each selected index then has the product of the others' rows.
                    rows_per_index: all_exact.then(|| {
                        (lens.iter().enumerate())
                            .filter(|&(d, _)| d != a)
                            .map(|(_, n)| n)
                            .product()
                    }),
                })
                .collect(),
        )
    }

    /// Chunks per slab along `axis` (the chunks sharing one chunk index there), when the plan
    /// is one box's chunks; `None` otherwise.
    pub(crate) fn slab_len(&self, axis: usize) -> Option<u64> {
        let Layout::Boxes { boxes, .. } = &self.layout else {
            return None;
        };
        let [b] = boxes.as_slice() else {
            return None;
        };
        let along = b.axes.get(axis)?.count;
        Some(b.count / along)
    }

    /// The position of the chunk at `rank` when a one-box plan ([`Self::slab_len`]) is read
    /// slab by slab along `order.axis` (first to last, or last to first), each slab in C
    /// order; `rank` itself for any other plan.
    pub(crate) fn slab_position(&self, rank: u64, order: SlabOrder) -> u64 {
        let (Layout::Boxes { boxes, .. }, Some(per_slab)) =
            (&self.layout, self.slab_len(order.axis))
        else {
            return rank;
        };
        let axes = &boxes[0].axes;
        let slab = rank / per_slab;
        let slab = if order.from_end {
            axes[order.axis].count - 1 - slab
        } else {
            slab
        };
        let mut rest = rank % per_slab;
        let (mut position, mut stride) = (0, 1);
        for (d, axis) in axes.iter().enumerate().rev() {
            let digit = if d == order.axis {
                slab
            } else {
                let digit = rest % axis.count;
                rest /= axis.count;
                digit
            };
            position += digit * stride;
            stride *= axis.count;
        }
        position
    }

    /// Contiguous runs of chunk positions, one per partition (at most `target`, at least one).
    /// With a limit (and no row filter) only the leading chunks that hold `limit` rows are
    /// read: a `LIMIT 10` reads one chunk.
    pub(crate) fn partitions(&self, target: usize, limit: Option<usize>) -> Vec<Range<u64>> {
        self.split(
            0,
            target,
            limit.map_or(self.len(), |l| self.chunks_holding(l as u64)),
        )
    }

    /// As `partitions`, for a scan reading backwards: with a limit only the trailing chunks
    /// that hold it are read.
    pub(crate) fn partitions_from_end(
        &self,
        target: usize,
        limit: Option<usize>,
    ) -> Vec<Range<u64>> {
        let first = limit.map_or(0, |l| self.first_of_trailing_chunks_holding(l as u64));
        self.split(first, target, self.len())
    }

    /// `start..end` in at most `target` contiguous runs (at least one).
    fn split(&self, start: u64, target: usize, end: u64) -> Vec<Range<u64>> {
        let n = end - start;
        let parts = (target as u64).min(n).max(1);
        let boundary = |j: u64| start + ((j as u128 * n as u128).div_ceil(parts as u128)) as u64;
        (0..parts).map(|j| boundary(j)..boundary(j + 1)).collect()
    }

    /// The position of the first of the fewest trailing chunks whose reads hold `rows` rows
    /// (0 if all hold fewer).
    fn first_of_trailing_chunks_holding(&self, rows: u64) -> u64 {
        let total = self.rows_before(self.len());
        let Some(before) = total.checked_sub(rows) else {
            return 0;
        };
        // The last position whose chunks before it hold at most `before` rows.
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.rows_before(mid) <= before {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// The fewest leading chunks whose reads hold `rows` rows (all of them if fewer).
    fn chunks_holding(&self, rows: u64) -> u64 {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.rows_before(mid) >= rows {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        lo
    }

    /// The reads at `positions`, the last one cut so that no more than `limit` rows are made.
    pub(crate) fn reads(
        self: Arc<Self>,
        positions: Range<u64>,
        limit: Option<usize>,
    ) -> impl Iterator<Item = ChunkSelection> {
        let mut remaining = limit.unwrap_or(usize::MAX);
        positions.map_while(move |p| {
            if remaining == 0 {
                return None;
            }
            let mut read = self.read(p);
            read.rows = read.rows.min(remaining);
            remaining -= read.rows;
            Some(read)
        })
    }
}

/// `0, a, a + b, ...` for `[a, b, ...]`.
fn prefix_sums(values: impl Iterator<Item = u64>) -> Vec<u64> {
    let mut sums = vec![0];
    for v in values {
        sums.push(sums[sums.len() - 1] + v);
    }
    sums
}

/// The chunks one box touches: the cartesian product of its axes' chunks, in C order.
#[derive(Debug)]
struct BoxChunks {
    axes: Vec<AxisChunks>,
    count: u64,
    rows: u64,
}

impl BoxChunks {
    fn new(b: &IndexBox, chunk_shape: &[u64]) -> Self {
        let axes: Vec<AxisChunks> = b
            .iter()
            .zip(chunk_shape)
            .map(|(set, &c)| AxisChunks::new(set, c))
            .collect();
        // Both are at most the element count, which the metadata checks fit in u64.
        let count = axes.iter().map(|a| a.count).product();
        BoxChunks {
            axes,
            count,
            rows: box_len(b),
        }
    }

    /// Position `p` in mixed radix: per axis, the position among its chunks.
    fn digits(&self, mut p: u64) -> Vec<u64> {
        let mut digits = vec![0; self.axes.len()];
        for (digit, axis) in digits.iter_mut().zip(&self.axes).rev() {
            *digit = p % axis.count;
            p /= axis.count;
        }
        digits
    }

    fn read(&self, p: u64, chunk_shape: &[u64]) -> ChunkSelection {
        let digits = self.digits(p);
        let indices: Vec<u64> = digits
            .iter()
            .zip(&self.axes)
            .map(|(&d, axis)| axis.chunk_at(d))
            .collect();
        let origin: Vec<u64> = indices
            .iter()
            .zip(chunk_shape)
            .map(|(k, c)| k * c)
            .collect();
        let local: IndexBox = self
            .axes
            .iter()
            .zip(&origin)
            .map(|(axis, &o)| axis.set.local(o, axis.chunk))
            .collect();
        ChunkSelection {
            rows: box_len(&local) as usize,
            skip: 0,
            indices,
            origin,
            shape: chunk_shape.to_vec(),
            local: vec![local],
        }
    }

    /// Rows in the chunks before position `p <= count`. In C order, the chunks before `p` are:
    /// along axis 0, every chunk row before digit 0 (whole), then within that row, along axis
    /// 1, every chunk before digit 1, and so on; each term is a product over the axes.
    fn rows_before(&self, p: u64) -> u64 {
        if p >= self.count {
            return self.rows;
        }
        let digits = self.digits(p);
        let mut rows = 0;
        // Rows of the chunks fixed by the leading digits so far.
        let mut leading = 1;
        for (d, axis) in self.axes.iter().enumerate() {
            let trailing: u64 = self.axes[d + 1..].iter().map(|a| a.set.len()).product();
            rows += leading * axis.rows_before(digits[d]) * trailing;
            leading *= axis.rows_at(digits[d]);
        }
        rows
    }
}

/// The chunks an index set touches along one axis, as runs of chunk indices.
#[derive(Debug)]
struct AxisChunks {
    set: IndexSet,
    chunk: u64,
    runs: Vec<Range<u64>>,
    /// Position of each run's first chunk among the axis's touched chunks.
    run_starts: Vec<u64>,
    count: u64,
}

impl AxisChunks {
    fn new(set: &IndexSet, chunk: u64) -> Self {
        let mut runs: Vec<Range<u64>> = Vec::new();
        for r in set.ranges() {
            let touched = r.start / chunk..r.end.div_ceil(chunk);
            match runs.last_mut() {
                Some(last) if touched.start <= last.end => last.end = last.end.max(touched.end),
                _ => runs.push(touched),
            }
        }
        let run_starts = prefix_sums(runs.iter().map(|r| r.end - r.start));
        let count = run_starts[run_starts.len() - 1];
        AxisChunks {
            set: set.clone(),
            chunk,
            runs,
            run_starts,
            count,
        }
    }

    /// The chunk index at position `p < count`.
    fn chunk_at(&self, p: u64) -> u64 {
        let i = self.run_starts.partition_point(|&s| s <= p) - 1;
        self.runs[i].start + (p - self.run_starts[i])
    }

    /// Selected indices in the chunks before position `p < count` (untouched chunks hold none).
    fn rows_before(&self, p: u64) -> u64 {
        self.set.count_below(self.chunk_at(p) * self.chunk)
    }

    /// Selected indices in the chunk at position `p < count`.
    fn rows_at(&self, p: u64) -> u64 {
        self.set
            .local(self.chunk_at(p) * self.chunk, self.chunk)
            .len()
    }
}

/// Every chunk's read, listed; a chunk several boxes touch is one read of all their elements.
pub(crate) fn list_chunk_reads(
    shape: &[u64],
    chunk_shape: &[u64],
    selection: &Selection,
) -> Vec<ChunkSelection> {
    if shape.is_empty() {
        // A 0-d array is one chunk of one element.
        return vec![ChunkSelection {
            indices: vec![],
            origin: vec![],
            shape: vec![],
            local: vec![vec![]],
            rows: 1,
            skip: 0,
        }];
    }
    let mut reads: BTreeMap<Vec<u64>, ChunkSelection> = BTreeMap::new();
    for b in selection.boxes() {
        let per_dim: Vec<Vec<u64>> = b
            .iter()
            .zip(chunk_shape)
            .map(|(set, &c)| {
                let axis = AxisChunks::new(set, c);
                axis.runs.into_iter().flatten().collect()
            })
            .collect();
        for_each_index(&per_dim, |ks| {
            let origin: Vec<u64> = ks.iter().zip(chunk_shape).map(|(k, c)| k * c).collect();
            let local: IndexBox = b
                .iter()
                .zip(&origin)
                .zip(chunk_shape)
                .map(|((set, &o), &c)| set.local(o, c))
                .collect();
            if box_is_empty(&local) {
                return;
            }
            let read = reads.entry(ks.to_vec()).or_insert_with(|| ChunkSelection {
                indices: ks.to_vec(),
                origin: origin.clone(),
                shape: chunk_shape.to_vec(),
                local: vec![],
                rows: 0,
                skip: 0,
            });
            read.rows += box_len(&local) as usize;
            read.local.push(local);
        });
    }
    reads.into_values().collect()
}

/// Number of chunks in the grid of an array.
pub(crate) fn chunk_count(shape: &[u64], chunk_shape: &[u64]) -> u64 {
    shape
        .iter()
        .zip(chunk_shape)
        .map(|(&n, &c)| n.div_ceil(c))
        .product()
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::zarr::plan::gather::Gather;
    use proptest::prelude::*;

    fn set(n: u64, r: Vec<std::ops::Range<u64>>) -> IndexSet {
        IndexSet::from_ranges(n, r)
    }

    /// Read slab by slab along any axis, from either end, a one-box plan visits each of its
    /// chunks once, slab after slab, and C order within a slab.
    #[test]
    fn slab_order_visits_every_chunk_slab_by_slab() {
        let shape = [5u64, 4, 6];
        let b = vec![set(5, vec![1..5]), set(4, vec![0..4]), set(6, vec![2..6])];
        let selection = Selection::from_boxes(vec![b]).unwrap();
        let plan = ChunkPlan::new(&shape, &[2, 3, 2], &selection);
        // Chunks touched per axis: 3 (1..5 in chunks of 2: 0, 1, 2), 2, 2.
        assert_eq!(plan.len(), 12);
        for axis in 0..3 {
            let per_slab = plan.slab_len(axis).unwrap();
            assert_eq!(per_slab * [3, 2, 2][axis], 12);
            for from_end in [false, true] {
                let order = SlabOrder { axis, from_end };
                let reads: Vec<ChunkSelection> = (0..plan.len())
                    .map(|rank| plan.read(plan.slab_position(rank, order)))
                    .collect();
                let mut positions: Vec<Vec<u64>> =
                    reads.iter().map(|r| r.indices.clone()).collect();
                // Slab after slab along the axis, from the chosen end.
                let slabs: Vec<u64> = positions.iter().map(|p| p[axis]).collect();
                let mut expected = slabs.clone();
                expected.sort();
                if from_end {
                    expected.reverse();
                }
                assert_eq!(slabs, expected, "axis {axis}, from_end {from_end}");
                // C order within a slab.
                for slab in reads.chunks(per_slab as usize) {
                    let indices: Vec<&Vec<u64>> = slab.iter().map(|r| &r.indices).collect();
                    assert!(indices.windows(2).all(|w| w[0] < w[1]), "{indices:?}");
                }
                positions.sort();
                positions.dedup();
                assert_eq!(positions.len(), 12);
            }
        }
        // Plans of several boxes are not read by slabs.
        let two = vec![
            vec![set(5, vec![0..1]), set(4, vec![0..2]), set(6, vec![0..6])],
            vec![set(5, vec![4..5]), set(4, vec![2..4]), set(6, vec![0..3])],
        ];
        let plan = ChunkPlan::new(&shape, &[2, 3, 2], &Selection::from_boxes(two).unwrap());
        assert_eq!(plan.slab_len(0), None);
    }

    /// Every run of every small one-box plan: the indices `indices_of_run` says each axis
    /// takes against those of the run's reads.
    #[test]
    fn the_indices_of_a_run_are_those_its_reads_select() {
        let spans = |n: u64| (0..n).flat_map(move |s| (s + 1..=n).map(move |e| s..e));
        let shape = [4u64, 3, 2];
        for chunk in [[1u64, 1, 1], [2, 2, 2], [3, 1, 2], [4, 2, 1]] {
            for r0 in spans(4) {
                for r1 in spans(3) {
                    let b = vec![
                        set(4, vec![r0.clone()]),
                        set(3, vec![r1.clone()]),
                        set(2, vec![1..2]),
                    ];
                    let selection = Selection::from_boxes(vec![b]).unwrap();
                    let plan = ChunkPlan::new(&shape, &chunk, &selection);
                    for start in 0..plan.len() {
                        for end in start + 1..=plan.len() {
                            check_run(&plan, start..end);
                        }
                    }
                }
            }
        }
    }

    fn check_run(plan: &ChunkPlan, run: Range<u64>) {
        let axes = plan.indices_of_run(run.clone()).unwrap();
        let mut taken: Vec<BTreeMap<u64, u64>> = vec![BTreeMap::new(); axes.len()];
        for p in run.clone() {
            let read = plan.read(p);
            for b in &read.local {
                let lists: Vec<Vec<u64>> = b.iter().map(|s| s.indices().collect()).collect();
                for_each_index(&lists, |i| {
                    for (a, (&i, o)) in i.iter().zip(&read.origin).enumerate() {
                        *taken[a].entry(i + o).or_default() += 1;
                    }
                });
            }
        }
        for (a, (axis, taken)) in axes.iter().zip(&taken).enumerate() {
            let what = format!("axis {a} of run {run:?}: {axis:?} vs {taken:?}");
            let ranges = axis.set.ranges();
            assert_eq!(ranges[0].start, *taken.keys().next().unwrap(), "{what}");
            assert_eq!(
                ranges.last().unwrap().end - 1,
                *taken.keys().last().unwrap(),
                "{what}"
            );
            assert!(
                taken
                    .keys()
                    .all(|&i| axis.set.count_below(i + 1) > axis.set.count_below(i)),
                "{what}"
            );
            if axis.exact {
                assert_eq!(axis.set.len(), taken.len() as u64, "{what}");
            }
            if let Some(per_index) = axis.rows_per_index {
                assert!(taken.values().all(|&n| n == per_index), "{what}");
            }
        }
    }

    #[test]
    fn whole_array_reads_every_chunk_with_edge_chunks_bounded() {
        let shape = [5, 3];
        let reads = list_chunk_reads(&shape, &[2, 2], &Selection::all(&shape));
        assert_eq!(reads.len(), 6);
        assert_eq!(reads.iter().map(|r| r.rows).sum::<usize>(), 15);
        let edge = &reads[5];
        assert_eq!(edge.indices, vec![2, 1]);
        assert_eq!(
            edge.local,
            vec![vec![set(2, vec![0..1]), set(2, vec![0..1])]]
        );
        // Edge chunk: positions index the full 2x2 decoded chunk.
        assert_eq!(
            edge.gather(1),
            Gather::Strided {
                start: 0,
                stride: 1,
                count: 1
            }
        );
        assert_eq!(edge.bounding_box(), Some((vec![0, 0], vec![1, 1])));
        assert_eq!(reads[0].bounding_box(), None);
        assert_eq!(
            reads[0].gather(4),
            Gather::Strided {
                start: 0,
                stride: 4,
                count: 4
            }
        );
    }

    /// Every element a list of reads selects, in array coordinates.
    fn elements(reads: &[ChunkSelection]) -> Vec<Vec<u64>> {
        let mut out = Vec::new();
        for read in reads {
            for b in &read.local {
                let lists: Vec<Vec<u64>> = b.iter().map(|s| s.indices().collect()).collect();
                for_each_index(&lists, |local| {
                    out.push(local.iter().zip(&read.origin).map(|(l, o)| l + o).collect())
                });
            }
        }
        out.sort();
        out
    }

    fn geometry() -> impl Strategy<Value = (Vec<u64>, Vec<u64>, Vec<IndexBox>)> {
        (1usize..4)
            .prop_flat_map(|dims| {
                (
                    prop::collection::vec(1u64..13, dims),
                    prop::collection::vec(1u64..6, dims),
                )
            })
            .prop_flat_map(|(shape, chunks)| {
                let set = |n: u64| {
                    prop::collection::vec((0..n, 0..n), 1..4).prop_map(move |rs| {
                        IndexSet::from_ranges(n, rs.into_iter().map(|(a, b)| a..a + b).collect())
                    })
                };
                let one_box: Vec<_> = shape.iter().map(|&n| set(n)).collect();
                (
                    Just(shape),
                    Just(chunks),
                    prop::collection::vec(one_box, 1..4),
                )
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// The plan worked out chunk by chunk selects exactly the elements of the listed plan,
        /// its row counts add up, and limits keep the fewest chunks that hold the rows.
        #[test]
        fn a_plan_worked_out_per_chunk_selects_what_the_listing_does(
            (shape, chunks, boxes) in geometry(),
            target in 1usize..5,
            limit in 0usize..40,
        ) {
            let Some(selection) = Selection::from_boxes(boxes) else { return Ok(()) };
            let listed = list_chunk_reads(&shape, &chunks, &selection);
            for max_listed in [0, MAX_LISTED_CHUNKS] {
                let plan = Arc::new(ChunkPlan::listing_at_most(&shape, &chunks, &selection, max_listed));
                let reads: Vec<ChunkSelection> = (0..plan.len()).map(|p| plan.read(p)).collect();
                prop_assert_eq!(elements(&reads), elements(&listed));
                if selection.boxes().len() == 1 {
                    prop_assert_eq!(&reads, &listed);
                }
                let mut before = 0;
                for (p, read) in reads.iter().enumerate() {
                    prop_assert_eq!(plan.rows_before(p as u64), before);
                    prop_assert_eq!(read.rows as u64, read.local.iter().map(box_len).sum::<u64>());
                    before += read.rows as u64;
                }
                prop_assert_eq!(plan.rows_before(plan.len()), selection.len());

                let parts = plan.partitions(target, Some(limit));
                prop_assert!(parts.len() <= target);
                let end = parts.last().unwrap().end;
                prop_assert!(parts.windows(2).all(|w| w[0].end == w[1].start));
                prop_assert!(plan.rows_before(end) >= (limit as u64).min(selection.len()));
                prop_assert!(end == 0 || plan.rows_before(end - 1) < limit as u64);
                let made: usize = parts
                    .iter()
                    .map(|r| plan.clone().reads(r.clone(), Some(limit)).map(|r| r.rows).sum::<usize>())
                    .sum();
                prop_assert!(made >= limit.min(selection.len() as usize));
                let all = plan.partitions(target, None);
                prop_assert_eq!(all.last().unwrap().end, plan.len());
            }
        }
    }

    #[test]
    fn ten_million_chunks_plan_without_listing_them() {
        let shape = [10_000_000_000u64];
        let plan = ChunkPlan::new(&shape, &[1000], &Selection::all(&shape));
        assert_eq!(plan.len(), 10_000_000);
        assert_eq!(plan.partitions(4, Some(10)), vec![0..1]);
        assert_eq!(plan.read(9_999_999).origin, vec![9_999_999_000]);
        assert_eq!(plan.rows_before(5_000_000), 5_000_000_000);
    }

    #[test]
    fn zero_d_and_empty_arrays() {
        let reads = list_chunk_reads(&[], &[], &Selection::all(&[]));
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].rows, 1);
        assert!(list_chunk_reads(&[0, 4], &[2, 2], &Selection::all(&[0, 4])).is_empty());
        let empty = ChunkPlan::new(&[0, 4], &[2, 2], &Selection::all(&[0, 4]));
        assert_eq!((empty.len(), empty.partitions(3, None)), (0, vec![0..0]));
        let zero_d = ChunkPlan::new(&[], &[], &Selection::all(&[]));
        assert_eq!((zero_d.len(), zero_d.rows_before(1)), (1, 1));
        assert_eq!(chunk_count(&[5, 3], &[2, 2]), 6);
    }

    /// `Selection::runs_in_chunks` (what a scan reserves no positions for) never holds where a
    /// chunk's read needs positions, and holds for whole arrays and intervals of axis 0.
    #[test]
    fn runs_in_chunks_only_where_every_read_is_one_run() {
        let spans = |n: u64| (0..n).flat_map(move |s| (s + 1..=n).map(move |e| s..e));
        let shape = [4u64, 4];
        for chunk in [[1u64, 1], [2, 2], [3, 4], [4, 1], [4, 3], [2, 5]] {
            for r0 in spans(4) {
                for r1 in spans(4) {
                    let b = vec![set(4, vec![r0.clone()]), set(4, vec![r1.clone()])];
                    let selection = Selection::from_boxes(vec![b]).unwrap();
                    let plan = ChunkPlan::new(&shape, &chunk, &selection);
                    let all_runs = (0..plan.len())
                        .all(|p| matches!(plan.read(p).gather(1), Gather::Strided { .. }));
                    let claimed = selection.runs_in_chunks(&shape, &chunk);
                    assert!(!claimed || all_runs, "{chunk:?} {r0:?} {r1:?}");
                    if r1 == (0..4) && (chunk[1] == 1 || chunk[1] == 4) {
                        assert!(claimed, "{chunk:?} {r0:?}");
                    }
                }
            }
        }
        let two_runs = Selection::from_boxes(vec![vec![set(9, vec![0..2, 5..7])]]).unwrap();
        assert!(!two_runs.runs_in_chunks(&[9], &[9]));
        assert!(Selection::all(&[10]).runs_in_chunks(&[10], &[3]));
    }
}
