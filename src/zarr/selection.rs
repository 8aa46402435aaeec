//! Which elements a scan reads: index ranges per dimension, and the chunks they touch.
//!
//! A selection is a set of sorted, disjoint index ranges per dimension; the selected elements
//! are their cartesian product. Each chunk that intersects it becomes a [`ChunkRead`] holding
//! the chunk-local ranges, from which the byte positions and dimension index columns of its
//! rows follow, in C order within the chunk.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};

use super::decode::Gather;

/// Selected index ranges per dimension (sorted, disjoint, non-empty ranges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    ranges: Vec<Vec<Range<u64>>>,
}

impl Selection {
    /// Every element of an array of `shape`.
    pub fn all(shape: &[u64]) -> Self {
        Selection {
            ranges: shape
                .iter()
                .map(|&n| std::iter::once(0..n).filter(|r| !r.is_empty()).collect())
                .collect(),
        }
    }

    /// Builds a selection from ranges per dimension, normalising them: clipped to the
    /// shape, empty ranges dropped, overlapping and adjacent ranges merged.
    pub fn from_ranges(shape: &[u64], ranges: Vec<Vec<Range<u64>>>) -> Self {
        let ranges = ranges
            .into_iter()
            .zip(shape)
            .map(|(mut rs, &n)| {
                rs.iter_mut()
                    .for_each(|r| *r = r.start.min(n)..r.end.min(n));
                rs.retain(|r| r.start < r.end);
                rs.sort_by_key(|r| r.start);
                let mut merged: Vec<Range<u64>> = Vec::with_capacity(rs.len());
                for r in rs {
                    match merged.last_mut() {
                        Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                        _ => merged.push(r),
                    }
                }
                merged
            })
            .collect();
        Selection { ranges }
    }

    pub fn ranges(&self) -> &[Vec<Range<u64>>] {
        &self.ranges
    }

    /// Number of selected elements.
    pub fn len(&self) -> u64 {
        self.ranges
            .iter()
            .map(|rs| rs.iter().map(|r| r.end - r.start).sum::<u64>())
            .product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether every element of an array of `shape` is selected.
    pub fn is_all(&self, shape: &[u64]) -> bool {
        *self == Selection::all(shape)
    }
}

/// Reading one chunk: which chunk, and which of its elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRead {
    /// Position of the chunk in the chunk grid.
    pub indices: Vec<u64>,
    /// Array index of the chunk's first element.
    pub origin: Vec<u64>,
    /// Full shape of the decoded chunk (edge chunks are stored whole).
    pub shape: Vec<u64>,
    /// Selected chunk-local ranges per dimension, inside the array's bounds.
    pub local: Vec<Vec<Range<u64>>>,
    /// How many of the selected rows to produce (a pushed-down limit may cut the last chunk).
    pub rows: usize,
}

impl ChunkRead {
    fn selected_rows(local: &[Vec<Range<u64>>]) -> u64 {
        local
            .iter()
            .map(|rs| rs.iter().map(|r| r.end - r.start).sum::<u64>())
            .product()
    }

    fn covers_whole_chunk(&self) -> bool {
        self.local
            .iter()
            .zip(&self.shape)
            .all(|(rs, &n)| rs.len() == 1 && rs[0] == (0..n))
    }

    /// Byte positions of the selected elements inside the decoded chunk, in C order.
    pub fn gather(&self, element_size: usize) -> Gather {
        if self.covers_whole_chunk() {
            return Gather::Strided {
                start: 0,
                stride: element_size,
                count: self.rows,
            };
        }
        let strides = c_strides(&self.shape);
        let mut positions = Vec::with_capacity(self.rows);
        let lists: Vec<Vec<u64>> = self.local.iter().map(|rs| expand(rs)).collect();
        for_each_index(&lists, |index| {
            let element: u64 = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
            positions.push(element as usize * element_size);
            positions.len() < self.rows
        });
        Gather::Positions(positions)
    }

    /// The Int64 index column of each dimension for the selected rows.
    pub fn dimension_columns(&self) -> Vec<ArrayRef> {
        let lists: Vec<Vec<u64>> = self.local.iter().map(|rs| expand(rs)).collect();
        let total: usize = lists.iter().map(Vec::len).product();
        (0..lists.len())
            .map(|d| {
                // Each value repeats `inner` times; the whole pattern repeats until `total`.
                let inner: usize = lists[d + 1..].iter().map(Vec::len).product();
                let mut values = Vec::with_capacity(self.rows);
                'fill: while values.len() < total {
                    for &i in &lists[d] {
                        let v = (self.origin[d] + i) as i64;
                        values.extend(std::iter::repeat_n(v, inner));
                        if values.len() >= self.rows {
                            break 'fill;
                        }
                    }
                }
                values.truncate(self.rows);
                Arc::new(Int64Array::from(values)) as ArrayRef
            })
            .collect()
    }
}

fn expand(ranges: &[Range<u64>]) -> Vec<u64> {
    ranges.iter().flat_map(|r| r.clone()).collect()
}

fn c_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// Visits the cartesian product of `lists` in C order until `f` returns false.
fn for_each_index(lists: &[Vec<u64>], mut f: impl FnMut(&[u64]) -> bool) {
    if lists.iter().any(Vec::is_empty) {
        return;
    }
    let mut at = vec![0usize; lists.len()];
    let mut index: Vec<u64> = lists.iter().map(|l| l[0]).collect();
    loop {
        if !f(&index) {
            return;
        }
        // Odometer step, last dimension fastest.
        let mut d = lists.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            at[d] += 1;
            if at[d] < lists[d].len() {
                index[d] = lists[d][at[d]];
                break;
            }
            at[d] = 0;
            index[d] = lists[d][0];
        }
    }
}

/// The chunks a selection touches, in C order of the chunk grid, with their local ranges.
pub fn plan_chunk_reads(
    shape: &[u64],
    chunk_shape: &[u64],
    selection: &Selection,
) -> Vec<ChunkRead> {
    // Per dimension: the chunk indices the ranges touch, each with its local ranges.
    let per_dim: Vec<Vec<(u64, Vec<Range<u64>>)>> = selection
        .ranges()
        .iter()
        .zip(chunk_shape)
        .map(|(ranges, &c)| {
            let mut chunks: Vec<(u64, Vec<Range<u64>>)> = Vec::new();
            for r in ranges {
                let (mut start, end) = (r.start, r.end);
                while start < end {
                    let k = start / c;
                    let chunk_end = ((k + 1) * c).min(end);
                    let local = (start - k * c)..(chunk_end - k * c);
                    match chunks.last_mut() {
                        Some((last, locals)) if *last == k => locals.push(local),
                        _ => chunks.push((k, vec![local])),
                    }
                    start = chunk_end;
                }
            }
            chunks
        })
        .collect();
    let lists: Vec<Vec<u64>> = per_dim
        .iter()
        .map(|c| (0..c.len() as u64).collect())
        .collect();
    let mut reads = Vec::new();
    if shape.is_empty() {
        // A 0-d array is one chunk of one element.
        reads.push(ChunkRead {
            indices: vec![],
            origin: vec![],
            shape: vec![],
            local: vec![],
            rows: 1,
        });
        return reads;
    }
    for_each_index(&lists, |at| {
        let picked: Vec<&(u64, Vec<Range<u64>>)> = at
            .iter()
            .enumerate()
            .map(|(d, &i)| &per_dim[d][i as usize])
            .collect();
        let local: Vec<Vec<Range<u64>>> = picked.iter().map(|(_, l)| l.clone()).collect();
        let rows = ChunkRead::selected_rows(&local) as usize;
        reads.push(ChunkRead {
            indices: picked.iter().map(|(k, _)| *k).collect(),
            origin: picked
                .iter()
                .zip(chunk_shape)
                .map(|((k, _), c)| k * c)
                .collect(),
            shape: chunk_shape.to_vec(),
            local,
            rows,
        });
        true
    });
    reads
}

/// Number of chunks in the grid of an array.
pub fn chunk_count(shape: &[u64], chunk_shape: &[u64]) -> u64 {
    shape
        .iter()
        .zip(chunk_shape)
        .map(|(&n, &c)| n.div_ceil(c))
        .product()
}

impl fmt::Display for Selection {
    /// `[0..10, 20..30] x [5..6]`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self
            .ranges
            .iter()
            .map(|rs| {
                let parts: Vec<String> = rs
                    .iter()
                    .map(|r| format!("{}..{}", r.start, r.end))
                    .collect();
                format!("[{}]", parts.join(", "))
            })
            .collect();
        write!(f, "{}", dims.join(" x "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    fn ints(a: &ArrayRef) -> Vec<i64> {
        a.as_primitive::<Int64Type>().values().to_vec()
    }

    #[test]
    fn whole_array_reads_every_chunk_with_edge_chunks_bounded() {
        let shape = [5, 3];
        let reads = plan_chunk_reads(&shape, &[2, 2], &Selection::all(&shape));
        assert_eq!(reads.len(), 6);
        assert_eq!(reads.iter().map(|r| r.rows).sum::<usize>(), 15);
        let edge = &reads[5];
        assert_eq!(edge.indices, vec![2, 1]);
        assert_eq!(edge.local, vec![vec![0..1], vec![0..1]]);
        // Edge chunk: positions index the full 2x2 decoded chunk.
        assert_eq!(edge.gather(1), Gather::Positions(vec![0]));
        assert_eq!(
            reads[0].gather(4),
            Gather::Strided {
                start: 0,
                stride: 4,
                count: 4
            }
        );
    }

    #[test]
    fn selection_inside_chunks_gives_c_order_positions_and_indices() {
        let shape = [4, 6];
        let sel = Selection::from_ranges(&shape, vec![vec![1..3], vec![2..3, 4..9]]);
        assert_eq!(sel.ranges()[1], vec![2..3, 4..6]);
        assert_eq!(sel.len(), 6);
        let reads = plan_chunk_reads(&shape, &[4, 3], &sel);
        assert_eq!(reads.len(), 2);
        let first = &reads[0];
        assert_eq!(first.local, vec![vec![1..3], vec![2..3]]);
        assert_eq!(first.gather(1), Gather::Positions(vec![5, 8]));
        let dims = first.dimension_columns();
        assert_eq!(ints(&dims[0]), vec![1, 2]);
        assert_eq!(ints(&dims[1]), vec![2, 2]);
        let second = &reads[1];
        assert_eq!(second.origin, vec![0, 3]);
        assert_eq!(second.gather(1), Gather::Positions(vec![4, 5, 7, 8]));
        let dims = second.dimension_columns();
        assert_eq!(ints(&dims[0]), vec![1, 1, 2, 2]);
        assert_eq!(ints(&dims[1]), vec![4, 5, 4, 5]);
    }

    #[test]
    fn a_row_limit_cuts_positions_and_indices_alike() {
        let shape = [3, 3];
        let mut read = plan_chunk_reads(&shape, &[3, 3], &Selection::all(&shape)).remove(0);
        read.rows = 4;
        assert_eq!(read.gather(1).len(), 4);
        let dims = read.dimension_columns();
        assert_eq!(ints(&dims[0]), vec![0, 0, 0, 1]);
        assert_eq!(ints(&dims[1]), vec![0, 1, 2, 0]);
    }

    #[test]
    fn zero_d_and_empty_arrays() {
        let reads = plan_chunk_reads(&[], &[], &Selection::all(&[]));
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].rows, 1);
        assert!(plan_chunk_reads(&[0, 4], &[2, 2], &Selection::all(&[0, 4])).is_empty());
        assert_eq!(chunk_count(&[5, 3], &[2, 2]), 6);
    }
}
