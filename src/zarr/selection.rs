//! Which elements a scan reads, and the chunks they touch.
//!
//! A [`Selection`] is a union of disjoint boxes; a box holds one [`IndexSet`] per dimension and
//! selects their cartesian product. Each chunk that a box intersects becomes part of a
//! [`ChunkRead`], from which the byte positions and dimension index columns of the chunk's
//! selected rows follow, in C order within the chunk.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};

use super::decode::Gather;
use super::index_set::IndexSet;

/// One index set per dimension; selects their cartesian product.
pub type IndexBox = Vec<IndexSet>;

/// Unions of boxes larger than this are not pushed down (the filter is applied row by row).
pub const MAX_BOXES: usize = 256;

/// Selected elements: disjoint boxes, none empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    boxes: Vec<IndexBox>,
}

fn box_len(b: &IndexBox) -> u64 {
    b.iter().map(IndexSet::len).product()
}

fn box_is_empty(b: &IndexBox) -> bool {
    b.iter().any(IndexSet::is_empty)
}

/// `b \ a` as at most one disjoint box per dimension.
fn box_difference(b: &IndexBox, a: &IndexBox) -> Vec<IndexBox> {
    let mut out = Vec::new();
    let mut rest = b.clone();
    for d in 0..b.len() {
        let outside = rest[d].difference(&a[d]);
        if !outside.is_empty() {
            let mut piece = rest.clone();
            piece[d] = outside;
            out.push(piece);
        }
        rest[d] = rest[d].intersect(&a[d]);
        if rest[d].is_empty() {
            break;
        }
    }
    out
}

/// Merges disjoint boxes that differ in one dimension only (`t = 0 OR t = 4` is one box
/// `t in {0, 4}`), so fewer, larger boxes are planned.
fn merge_boxes(mut boxes: Vec<IndexBox>) -> Vec<IndexBox> {
    let mut merged = true;
    while merged {
        merged = false;
        'search: for i in 0..boxes.len() {
            for j in i + 1..boxes.len() {
                let differing: Vec<usize> = (0..boxes[i].len())
                    .filter(|&d| boxes[i][d] != boxes[j][d])
                    .collect();
                if let [d] = differing[..] {
                    let other = boxes.remove(j);
                    let mine = &mut boxes[i][d];
                    let n = mine
                        .ranges()
                        .last()
                        .map_or(0, |r| r.end)
                        .max(other[d].ranges().last().map_or(0, |r| r.end));
                    *mine = IndexSet::from_ranges(
                        n,
                        mine.ranges()
                            .iter()
                            .chain(other[d].ranges())
                            .cloned()
                            .collect(),
                    );
                    merged = true;
                    break 'search;
                }
            }
        }
    }
    boxes
}

impl Selection {
    /// Every element of an array of `shape`.
    pub fn all(shape: &[u64]) -> Self {
        Selection::from_boxes(vec![shape.iter().map(|&n| IndexSet::full(n)).collect()])
            .expect("one box")
    }

    /// The union of possibly overlapping boxes, made disjoint; `None` when that takes more
    /// than [`MAX_BOXES`] boxes.
    pub fn from_boxes(boxes: Vec<IndexBox>) -> Option<Self> {
        let mut disjoint: Vec<IndexBox> = Vec::new();
        for b in boxes.into_iter().filter(|b| !box_is_empty(b)) {
            let mut pieces = vec![b];
            for a in &disjoint {
                pieces = pieces.iter().flat_map(|p| box_difference(p, a)).collect();
                if pieces.is_empty() {
                    break;
                }
            }
            disjoint.extend(pieces);
            if disjoint.len() > MAX_BOXES {
                return None;
            }
        }
        Some(Selection {
            boxes: merge_boxes(disjoint),
        })
    }

    pub fn boxes(&self) -> &[IndexBox] {
        &self.boxes
    }

    /// Number of selected elements.
    pub fn len(&self) -> u64 {
        self.boxes.iter().map(box_len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }

    /// Whether every element of an array of `shape` is selected.
    pub fn is_all(&self, shape: &[u64]) -> bool {
        self.len() == shape.iter().product::<u64>()
    }
}

impl Selection {
    /// `time=[0..2] x station=[3..4]`, boxes joined by ` | `; `none` when empty. Dimensions
    /// that a box does not constrain are left out.
    pub fn describe(&self, names: &[String], shape: &[u64]) -> String {
        if self.boxes.is_empty() {
            return "none".into();
        }
        let boxes: Vec<String> = self
            .boxes
            .iter()
            .map(|b| {
                let parts: Vec<String> = b
                    .iter()
                    .zip(names)
                    .zip(shape)
                    .filter(|((set, _), &n)| set.len() != n)
                    .map(|((set, name), _)| format!("{name}={set}"))
                    .collect();
                if parts.is_empty() {
                    "all".to_string()
                } else {
                    parts.join(" x ")
                }
            })
            .collect();
        boxes.join(" | ")
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
    /// Selected chunk-local boxes (disjoint), inside the array's bounds.
    pub local: Vec<IndexBox>,
    /// How many of the selected rows to produce (a pushed-down limit may cut the last chunk).
    pub rows: usize,
}

impl ChunkRead {
    /// Where the selected elements start, when they are one contiguous run of the chunk in C
    /// order: single indices on the leading dimensions, one range, then whole dimensions.
    fn contiguous_start(&self) -> Option<u64> {
        let [b] = self.local.as_slice() else {
            return None;
        };
        if b.iter().any(|set| set.ranges().len() != 1) {
            return None;
        }
        let mut d = b.len();
        while d > 0 && b[d - 1].len() == self.shape[d - 1] {
            d -= 1;
        }
        d = d.saturating_sub(1);
        if b[..d].iter().any(|set| set.len() != 1) {
            return None;
        }
        let strides = c_strides(&self.shape);
        Some(
            b.iter()
                .zip(&strides)
                .map(|(set, stride)| set.ranges()[0].start * stride)
                .sum(),
        )
    }

    /// Chunk-local element indices of the selected rows, in C order, cut at `rows`.
    fn elements(&self) -> Vec<u64> {
        let strides = c_strides(&self.shape);
        let mut elements = Vec::with_capacity(self.local.iter().map(box_len).sum::<u64>() as usize);
        for b in &self.local {
            let lists: Vec<Vec<u64>> = b.iter().map(|s| s.indices().collect()).collect();
            for_each_index(&lists, |index| {
                elements.push(index.iter().zip(&strides).map(|(i, s)| i * s).sum());
            });
        }
        if self.local.len() > 1 {
            // Disjoint boxes interleave in C order.
            elements.sort_unstable();
        }
        elements.truncate(self.rows);
        elements
    }

    /// One past the last selected element of the chunk, in C order.
    pub fn end_element(&self) -> u64 {
        let strides = c_strides(&self.shape);
        self.local
            .iter()
            .filter_map(|b| {
                b.iter()
                    .zip(&strides)
                    .map(|(set, stride)| set.ranges().last().map(|r| (r.end - 1) * stride))
                    .sum::<Option<u64>>()
            })
            .max()
            .map_or(0, |last| last + 1)
    }

    /// The smallest box of the chunk that holds every selected element, as (start, shape) in
    /// chunk coordinates; `None` when that box is the whole chunk.
    pub fn bounding_box(&self) -> Option<(Vec<u64>, Vec<u64>)> {
        let mut start = self.shape.clone();
        let mut end = vec![0; self.shape.len()];
        for b in &self.local {
            for (d, set) in b.iter().enumerate() {
                if let (Some(first), Some(last)) = (set.ranges().first(), set.ranges().last()) {
                    start[d] = start[d].min(first.start);
                    end[d] = end[d].max(last.end);
                }
            }
        }
        if start.iter().all(|&s| s == 0) && end == self.shape {
            return None;
        }
        let shape = end.iter().zip(&start).map(|(e, s)| e - s).collect();
        Some((start, shape))
    }

    /// The same read with the chunk narrowed to the box at `start` of `shape` (which holds every
    /// selected element): its bytes are then the decoded box, not the whole chunk.
    pub fn within(&self, start: &[u64], shape: &[u64]) -> ChunkRead {
        let mut read = ChunkRead {
            indices: self.indices.clone(),
            origin: self.origin.iter().zip(start).map(|(o, s)| o + s).collect(),
            shape: shape.to_vec(),
            local: self
                .local
                .iter()
                .map(|b| {
                    b.iter()
                        .zip(start)
                        .zip(shape)
                        .map(|((set, &s), &n)| set.local(s, n))
                        .collect()
                })
                .collect(),
            rows: self.rows,
        };
        read.local.retain(|b| !box_is_empty(b));
        read
    }

    /// The read of the box at `start` of `shape` (chunk coordinates, holding every selected
    /// element) as pieces along its first dimension of at most `max_elements` elements each
    /// (at least one slice of the first dimension), each narrowed to its own box. Pieces with
    /// no selected element are left out; together the pieces produce `rows` rows.
    pub fn pieces(&self, start: &[u64], shape: &[u64], max_elements: u64) -> Vec<ChunkRead> {
        let Some((&first, inner)) = shape.split_first() else {
            return vec![self.within(start, shape)];
        };
        let slice: u64 = inner.iter().product();
        let step = (max_elements / slice.max(1)).max(1);
        let mut remaining = self.rows;
        let mut pieces = Vec::new();
        let mut offset = 0;
        while offset < first && remaining > 0 {
            let n = step.min(first - offset);
            let mut piece_start = start.to_vec();
            piece_start[0] += offset;
            let mut piece_shape = shape.to_vec();
            piece_shape[0] = n;
            let mut piece = self.within(&piece_start, &piece_shape);
            let selected: u64 = piece.local.iter().map(box_len).sum();
            piece.rows = remaining.min(selected as usize);
            remaining -= piece.rows;
            if piece.rows > 0 {
                pieces.push(piece);
            }
            offset += n;
        }
        pieces
    }

    /// Byte positions of the selected elements inside the decoded chunk, in C order.
    pub fn gather(&self, element_size: usize) -> Gather {
        if let Some(start) = self.contiguous_start() {
            return Gather::Strided {
                start: start as usize * element_size,
                stride: element_size,
                count: self.rows,
            };
        }
        Gather::Positions(
            self.elements()
                .into_iter()
                .map(|e| e as usize * element_size)
                .collect(),
        )
    }

    /// The Int64 index column of each dimension for the selected rows.
    pub fn dimension_columns(&self) -> Vec<ArrayRef> {
        let rank = self.shape.len();
        if self.local.len() == 1 {
            return self.single_box_dimension_columns();
        }
        let strides = c_strides(&self.shape);
        let elements = self.elements();
        (0..rank)
            .map(|d| {
                let values: Vec<i64> = elements
                    .iter()
                    .map(|e| (self.origin[d] + (e / strides[d]) % self.shape[d]) as i64)
                    .collect();
                Arc::new(Int64Array::from(values)) as ArrayRef
            })
            .collect()
    }

    /// One box: each value repeats `inner` times and the pattern repeats, no division needed.
    fn single_box_dimension_columns(&self) -> Vec<ArrayRef> {
        let lists: Vec<Vec<u64>> = self.local[0]
            .iter()
            .map(|s| s.indices().collect())
            .collect();
        let total: usize = lists.iter().map(Vec::len).product();
        let rows = self.rows.min(total);
        (0..lists.len())
            .map(|d| {
                let inner: usize = lists[d + 1..].iter().map(Vec::len).product();
                let mut values = Vec::with_capacity(rows);
                'fill: while values.len() < rows {
                    for &i in &lists[d] {
                        let v = (self.origin[d] + i) as i64;
                        values.extend(std::iter::repeat_n(v, inner));
                        if values.len() >= rows {
                            break 'fill;
                        }
                    }
                }
                values.truncate(rows);
                Arc::new(Int64Array::from(values)) as ArrayRef
            })
            .collect()
    }
}

fn c_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// Visits the cartesian product of `lists` in C order.
fn for_each_index(lists: &[Vec<u64>], mut f: impl FnMut(&[u64])) {
    if lists.iter().any(Vec::is_empty) {
        return;
    }
    let mut at = vec![0usize; lists.len()];
    let mut index: Vec<u64> = lists.iter().map(|l| l[0]).collect();
    loop {
        f(&index);
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

/// The chunks a selection touches, in C order of the chunk grid, with their local boxes.
pub fn plan_chunk_reads(
    shape: &[u64],
    chunk_shape: &[u64],
    selection: &Selection,
) -> Vec<ChunkRead> {
    if shape.is_empty() {
        // A 0-d array is one chunk of one element.
        return vec![ChunkRead {
            indices: vec![],
            origin: vec![],
            shape: vec![],
            local: vec![vec![]],
            rows: 1,
        }];
    }
    let mut reads: BTreeMap<Vec<u64>, ChunkRead> = BTreeMap::new();
    for b in selection.boxes() {
        // Per dimension: the chunks the set touches.
        let per_dim: Vec<Vec<u64>> = b
            .iter()
            .zip(chunk_shape)
            .map(|(set, &c)| {
                let mut ks: Vec<u64> = set
                    .ranges()
                    .iter()
                    .flat_map(|r| r.start / c..r.end.div_ceil(c))
                    .collect();
                ks.dedup();
                ks
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
            let read = reads.entry(ks.to_vec()).or_insert_with(|| ChunkRead {
                indices: ks.to_vec(),
                origin: origin.clone(),
                shape: chunk_shape.to_vec(),
                local: vec![],
                rows: 0,
            });
            read.rows += box_len(&local) as usize;
            read.local.push(local);
        });
    }
    reads.into_values().collect()
}

/// Number of chunks in the grid of an array.
pub fn chunk_count(shape: &[u64], chunk_shape: &[u64]) -> u64 {
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
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    fn ints(a: &ArrayRef) -> Vec<i64> {
        a.as_primitive::<Int64Type>().values().to_vec()
    }

    fn set(n: u64, r: Vec<std::ops::Range<u64>>) -> IndexSet {
        IndexSet::from_ranges(n, r)
    }

    #[test]
    fn whole_array_reads_every_chunk_with_edge_chunks_bounded() {
        let shape = [5, 3];
        let reads = plan_chunk_reads(&shape, &[2, 2], &Selection::all(&shape));
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

    #[test]
    fn selection_inside_chunks_gives_c_order_positions_and_indices() {
        let sel = Selection::from_boxes(vec![vec![set(4, vec![1..3]), set(6, vec![2..3, 4..9])]])
            .unwrap();
        assert_eq!(sel.len(), 6);
        let reads = plan_chunk_reads(&[4, 6], &[4, 3], &sel);
        assert_eq!(reads.len(), 2);
        let first = &reads[0];
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
    fn a_contiguous_run_inside_a_chunk_is_strided() {
        // Rows 2..4 of a 4 x 3 chunk: one run of 6 elements starting at element 6.
        let sel =
            Selection::from_boxes(vec![vec![set(8, vec![2..4]), set(3, vec![0..3])]]).unwrap();
        let reads = plan_chunk_reads(&[8, 3], &[4, 3], &sel);
        assert_eq!(
            reads[0].gather(2),
            Gather::Strided {
                start: 12,
                stride: 2,
                count: 6
            }
        );
        // One row, a range of columns: still one run.
        let sel =
            Selection::from_boxes(vec![vec![set(4, vec![1..2]), set(3, vec![1..3])]]).unwrap();
        let read = &plan_chunk_reads(&[4, 3], &[4, 3], &sel)[0];
        assert_eq!(
            read.gather(1),
            Gather::Strided {
                start: 4,
                stride: 1,
                count: 2
            }
        );
    }

    /// Two boxes inside one 6 x 6 chunk at origin (6, 0) of a 12 x 6 array: chunk rows 1..3 x
    /// cols 1..2 and rows 4..5 x cols 3..5.
    fn two_boxes_in_one_chunk() -> ChunkRead {
        let sel = Selection::from_boxes(vec![
            vec![set(12, vec![7..9]), set(6, vec![1..2])],
            vec![set(12, vec![10..11]), set(6, vec![3..5])],
        ])
        .unwrap();
        plan_chunk_reads(&[12, 6], &[6, 6], &sel).pop().unwrap()
    }

    #[test]
    fn a_read_narrowed_to_its_bounding_box_keeps_rows_and_indices() {
        let read = two_boxes_in_one_chunk();
        let (start, shape) = read.bounding_box().unwrap();
        assert_eq!((start.clone(), shape.clone()), (vec![1, 1], vec![4, 4]));
        let part = read.within(&start, &shape);
        assert_eq!(part.rows, read.rows);
        assert_eq!(part.origin, vec![7, 1]);
        // Positions in the 4 x 4 box: (0,0), (1,0), (3,2), (3,3).
        assert_eq!(part.gather(1), Gather::Positions(vec![0, 4, 14, 15]));
        let (whole, narrowed) = (read.dimension_columns(), part.dimension_columns());
        for d in 0..2 {
            assert_eq!(ints(&whole[d]), ints(&narrowed[d]));
        }
        assert_eq!(ints(&narrowed[0]), vec![7, 8, 10, 10]);
        assert_eq!(ints(&narrowed[1]), vec![1, 1, 3, 4]);
    }

    #[test]
    fn the_end_element_follows_the_last_selected_element_in_c_order() {
        let read = two_boxes_in_one_chunk();
        // Chunk rows 1..3 x col 1 end at (2, 1) = 13; row 4 x cols 3..5 ends at (4, 4) = 28.
        assert_eq!(read.end_element(), 29);
        let whole = plan_chunk_reads(&[12, 6], &[6, 6], &Selection::all(&[12, 6]));
        assert_eq!(whole[0].end_element(), 36);
    }

    #[test]
    fn pieces_split_the_first_dimension_and_keep_every_row_once() {
        let read = two_boxes_in_one_chunk();
        // Whole chunk, two rows of 6 per piece: rows 0-1, 2-3 (row 2 selected), 4-5.
        let pieces = read.pieces(&[0, 0], &[6, 6], 12);
        let origins: Vec<_> = pieces.iter().map(|p| p.origin.clone()).collect();
        assert_eq!(origins, vec![vec![6, 0], vec![8, 0], vec![10, 0]]);
        assert_eq!(pieces.iter().map(|p| p.rows).collect::<Vec<_>>(), [1, 1, 2]);
        let dims = |reads: &[ChunkRead], d: usize| -> Vec<i64> {
            reads
                .iter()
                .flat_map(|r| ints(&r.dimension_columns()[d]))
                .collect()
        };
        for d in 0..2 {
            assert_eq!(dims(&pieces, d), ints(&read.dimension_columns()[d]));
        }
        // Piece-local positions: row 1 col 1 of piece 0 (2 x 6), row 0 cols 3..5 of piece 2.
        assert_eq!(
            pieces[0].gather(1),
            Gather::Strided {
                start: 7,
                stride: 1,
                count: 1
            }
        );
        assert_eq!(
            pieces[2].gather(1),
            Gather::Strided {
                start: 3,
                stride: 1,
                count: 2
            }
        );
        // A limit of 3 rows stops in the last piece; less than one slice per piece is one slice.
        let mut cut = read.clone();
        cut.rows = 3;
        let pieces = cut.pieces(&[0, 0], &[6, 6], 1);
        assert_eq!(pieces.iter().map(|p| p.rows).collect::<Vec<_>>(), [1, 1, 1]);
        assert_eq!(pieces[2].origin, vec![10, 0]);
    }

    #[test]
    fn overlapping_boxes_become_disjoint_and_rows_stay_in_c_order() {
        // time = 1 OR station = 2 on a 3 x 3 array, one chunk.
        let row = vec![set(3, vec![1..2]), set(3, vec![0..3])];
        let col = vec![set(3, vec![0..3]), set(3, vec![2..3])];
        let sel = Selection::from_boxes(vec![row, col]).unwrap();
        assert_eq!(sel.len(), 5);
        assert_eq!(sel.boxes().len(), 2);
        let reads = plan_chunk_reads(&[3, 3], &[3, 3], &sel);
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].gather(1), Gather::Positions(vec![2, 3, 4, 5, 8]));
        let dims = reads[0].dimension_columns();
        assert_eq!(ints(&dims[0]), vec![0, 1, 1, 1, 2]);
        assert_eq!(ints(&dims[1]), vec![2, 0, 1, 2, 2]);
    }

    #[test]
    fn boxes_differing_in_one_dimension_merge() {
        let a = vec![set(9, vec![0..1]), set(3, vec![0..3])];
        let b = vec![set(9, vec![4..5]), set(3, vec![0..3])];
        let sel = Selection::from_boxes(vec![a, b]).unwrap();
        assert_eq!(
            sel.boxes(),
            &[vec![set(9, vec![0..1, 4..5]), set(3, vec![0..3])]]
        );
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
        assert!(Selection::from_boxes(vec![vec![IndexSet::empty()]])
            .unwrap()
            .is_empty());
    }
}
