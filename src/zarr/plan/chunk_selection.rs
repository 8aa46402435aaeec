//! Reading one chunk: which chunk, which of its elements, and the geometry that follows from
//! that: the byte positions of the selected elements ([`Gather`]), the dimension index
//! columns, the bounding box of the selection and its pieces, in C order within the chunk.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array};
use arrow::compute::take;
use datafusion::common::ScalarValue;

use crate::error::{Error, Result};

use crate::zarr::plan::gather::Gather;
use crate::zarr::plan::selection::{box_is_empty, box_len, IndexBox};

/// Reading one chunk: which chunk, and which of its elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkSelection {
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
    /// How many of those not to produce from the front (a scan read backwards keeps its limit
    /// from a chunk's end).
    pub skip: usize,
}

impl ChunkSelection {
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
    pub(crate) fn end_element(&self) -> u64 {
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
    pub(crate) fn bounding_box(&self) -> Option<(Vec<u64>, Vec<u64>)> {
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
    pub(crate) fn within(&self, start: &[u64], shape: &[u64]) -> ChunkSelection {
        let mut read = ChunkSelection {
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
            skip: self.skip,
        };
        read.local.retain(|b| !box_is_empty(b));
        read
    }

    /// The read of the box at `start` of `shape` (chunk coordinates, holding every selected
    /// element) as pieces along its first dimension of at most `max_elements` elements each
    /// (at least one slice of the first dimension), each narrowed to its own box. Pieces with
    /// no selected element (or only skipped ones) are left out; together the pieces produce
    /// `rows` rows, skipping `skip` first.
    pub(crate) fn pieces(
        &self,
        start: &[u64],
        shape: &[u64],
        max_elements: u64,
    ) -> Vec<ChunkSelection> {
        let Some((&first, inner)) = shape.split_first() else {
            return vec![self.within(start, shape)];
        };
        let slice: u64 = inner.iter().product();
        let step = (max_elements / slice.max(1)).max(1);
        let mut remaining = self.rows;
        let mut skip = self.skip;
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
            piece.skip = skip.min(piece.rows);
            skip -= piece.skip;
            if piece.rows > piece.skip {
                pieces.push(piece);
            }
            offset += n;
        }
        pieces
    }

    /// Byte positions of the selected elements inside the decoded chunk, in C order.
    pub(crate) fn gather(&self, element_size: usize) -> Gather {
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

    /// The byte positions of the selected elements (in their C order) in a box of a variable
    /// over some of this read's dimensions: `axes[j]` is the dimension of this read that the
    /// variable's `j`-th dimension is, and the variable's box spans this read's box on it.
    /// Dimensions the variable lacks are broadcast: every selected element along them reads
    /// the same value.
    pub(crate) fn project_gather(&self, axes: &[usize], element_size: usize) -> Gather {
        let identity =
            axes.len() == self.shape.len() && axes.iter().enumerate().all(|(j, &a)| j == a);
        if identity {
            return self.gather(element_size);
        }
        let var_shape: Vec<u64> = axes.iter().map(|&a| self.shape[a]).collect();
        let var_strides = c_strides(&var_shape);
        let strides = c_strides(&self.shape);
        Gather::Positions(
            self.elements()
                .into_iter()
                .map(|e| {
                    let offset: u64 = axes
                        .iter()
                        .zip(&var_strides)
                        .map(|(&a, s)| (e / strides[a]) % self.shape[a] * s)
                        .sum();
                    offset as usize * element_size
                })
                .collect(),
        )
    }

    /// The Int64 index column of each dimension for the selected rows.
    #[cfg(test)]
    pub(crate) fn dimension_columns(&self) -> Vec<ArrayRef> {
        self.dimension_columns_in(&self.row_index(), 0..self.rows)
    }

    /// What locates the selected rows, made once per chunk so that its dimension columns can
    /// be built a batch of rows at a time.
    pub(crate) fn row_index(&self) -> RowIndex {
        match self.local.as_slice() {
            [b] => RowIndex::Box(b.iter().map(AxisRuns::new).collect()),
            _ => RowIndex::Elements(self.elements()),
        }
    }

    /// The Int64 index column of each dimension for the selected rows `rows` (their numbers
    /// in C order, inside `0..self.rows`), located by `index` (this read's `row_index`).
    #[cfg(test)]
    pub(crate) fn dimension_columns_in(
        &self,
        index: &RowIndex,
        rows: Range<usize>,
    ) -> Vec<ArrayRef> {
        (0..self.shape.len())
            .map(|d| self.dimension_column_in(index, d, rows.clone()))
            .collect()
    }

    /// The values of dimension `d` on the selected rows `rows` (as `dimension_column_in`):
    /// `values` holds one per index of the dimension (a coordinate, an expression of it),
    /// `None` stands for the index itself. Rows that all lie in one index of the dimension
    /// (a leading axis over a batch inside one of its indices) get that value repeated,
    /// with no index column made and gathered.
    pub(crate) fn axis_values_in(
        &self,
        index: &RowIndex,
        d: usize,
        rows: Range<usize>,
        values: Option<&ArrayRef>,
    ) -> Result<ArrayRef> {
        let rows = rows.start.min(self.rows)..rows.end.min(self.rows);
        if let (RowIndex::Box(axes), false) = (index, rows.is_empty()) {
            let inner = (axes[d + 1..].iter().map(|a| a.len).product::<u64>()).max(1);
            let (first, last) = (rows.start as u64 / inner, (rows.end as u64 - 1) / inner);
            if first == last && axes[d].len > 0 {
                let (at, _) = axes[d].locate(first % axes[d].len);
                let at = self.origin[d] + at;
                return match values {
                    None => Ok(Arc::new(Int64Array::from_value(at as i64, rows.len()))),
                    Some(values) => ScalarValue::try_from_array(values, at as usize)
                        .and_then(|v| v.to_array_of_size(rows.len()))
                        .map_err(|e| Error::Internal(format!("repeating an axis value: {e}"))),
                };
            }
        }
        let indices = self.dimension_column_in(index, d, rows);
        match values {
            None => Ok(indices),
            Some(values) => take(values.as_ref(), indices.as_ref(), None)
                .map_err(|e| Error::arrow("values of an axis", e)),
        }
    }

    /// The selected rows `rows` (their numbers in C order, inside `0..self.rows`), located by
    /// `index` (this read's `row_index`), as runs along the last dimension: `f(row, at, len)`
    /// for each, in row order, where rows `row..row + len` (numbered from `rows.start`) are
    /// the cells at array index `at` and the `len - 1` after it along the last dimension. A
    /// box's runs are its last dimension's ranges; several boxes' are their consecutive
    /// elements. Nothing is made per row.
    pub(crate) fn for_each_run(
        &self,
        index: &RowIndex,
        rows: Range<usize>,
        f: &mut dyn FnMut(usize, &[u64], usize),
    ) {
        let rows = rows.start.min(self.rows)..rows.end.min(self.rows);
        let n = self.shape.len();
        if rows.is_empty() {
            return;
        }
        let Some(last) = n.checked_sub(1) else {
            // A scalar: its one cell.
            return f(0, &[], rows.len());
        };
        let mut at = vec![0u64; n];
        match index {
            RowIndex::Box(axes) => {
                if axes.iter().any(|a| a.len == 0) {
                    return;
                }
                // Rows per index of each dimension.
                let mut inner = vec![1u64; n];
                for d in (0..last).rev() {
                    inner[d] = inner[d + 1] * axes[d + 1].len;
                }
                let (start, end) = (rows.start as u64, rows.end as u64);
                let mut r = start;
                while r < end {
                    for d in 0..last {
                        let (i, _) = axes[d].locate((r / inner[d]) % axes[d].len);
                        at[d] = self.origin[d] + i;
                    }
                    let (i, left) = axes[last].locate(r % axes[last].len);
                    at[last] = self.origin[last] + i;
                    let len = left.min(end - r);
                    f((r - start) as usize, &at, len as usize);
                    r += len;
                }
            }
            RowIndex::Elements(elements) => {
                let strides = c_strides(&self.shape);
                let size = self.shape[last];
                let elements =
                    &elements[rows.start.min(elements.len())..rows.end.min(elements.len())];
                let mut r = 0;
                while r < elements.len() {
                    let e = elements[r];
                    for d in 0..n {
                        at[d] = self.origin[d] + (e / strides[d]) % self.shape[d];
                    }
                    let mut len = 1;
                    while (elements.get(r + len))
                        .is_some_and(|&next| next == e + len as u64 && next % size != 0)
                    {
                        len += 1;
                    }
                    f(r, &at, len);
                    r += len;
                }
            }
        }
    }

    /// The Int64 index column of dimension `d` for the selected rows `rows` (their numbers in
    /// C order, inside `0..self.rows`), located by `index` (this read's `row_index`): one
    /// axis at a time, so a query that reads one axis pays for one.
    pub(crate) fn dimension_column_in(
        &self,
        index: &RowIndex,
        d: usize,
        rows: Range<usize>,
    ) -> ArrayRef {
        let rows = rows.start.min(self.rows)..rows.end.min(self.rows);
        let values = match index {
            RowIndex::Box(axes) => {
                let inner = axes[d + 1..].iter().map(|a| a.len).product::<u64>();
                axes[d].values(self.origin[d], inner.max(1), &rows)
            }
            RowIndex::Elements(elements) => {
                let stride = c_strides(&self.shape)[d];
                let elements =
                    &elements[rows.start.min(elements.len())..rows.end.min(elements.len())];
                (elements.iter())
                    .map(|e| (self.origin[d] + (e / stride) % self.shape[d]) as i64)
                    .collect()
            }
        };
        Arc::new(Int64Array::from(values))
    }
}

/// Where the selected rows of a chunk lie: one box by the index ranges of its dimensions
/// (nothing per row), or several by their chunk-local elements in C order.
#[derive(Debug)]
pub(crate) enum RowIndex {
    Box(Vec<AxisRuns>),
    Elements(Vec<u64>),
}

/// One dimension of a box: its index ranges, and the position of each range's first index
/// among the dimension's selected indices.
#[derive(Debug)]
pub(crate) struct AxisRuns {
    ranges: Vec<Range<u64>>,
    starts: Vec<u64>,
    len: u64,
}

impl AxisRuns {
    fn new(set: &crate::zarr::plan::index_set::IndexSet) -> Self {
        let ranges = set.ranges().to_vec();
        let mut starts = Vec::with_capacity(ranges.len());
        let mut len = 0;
        for r in &ranges {
            starts.push(len);
            len += r.end - r.start;
        }
        AxisRuns {
            ranges,
            starts,
            len,
        }
    }

    /// The index at position `pos`, and how many positions from it on lie in its range.
    fn locate(&self, pos: u64) -> (u64, u64) {
        let i = self.starts.partition_point(|&s| s <= pos) - 1;
        let offset = pos - self.starts[i];
        let range = &self.ranges[i];
        (range.start + offset, range.end - range.start - offset)
    }

    /// The values (`origin` + index) of this dimension for the rows `rows` of a box in which
    /// each of its indices holds for `inner` consecutive rows, cycling: row r has the index
    /// at position (r / inner) % len. Made a run at a time, a range at a time when `inner`
    /// is 1.
    fn values(&self, origin: u64, inner: u64, rows: &Range<usize>) -> Vec<i64> {
        let mut values = Vec::with_capacity(rows.len());
        if self.len == 0 {
            return values;
        }
        let (mut r, end) = (rows.start as u64, rows.end as u64);
        while r < end {
            let pos = (r / inner) % self.len;
            let (index, left) = self.locate(pos);
            if inner == 1 {
                let n = left.min(end - r);
                values.extend((index..index + n).map(|i| (origin + i) as i64));
                r += n;
            } else {
                let n = ((r / inner + 1) * inner).min(end) - r;
                values.extend(std::iter::repeat_n((origin + index) as i64, n as usize));
                r += n;
            }
        }
        values
    }
}

/// Element strides of a C-order array of `shape`.
pub(crate) fn c_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

/// Visits the cartesian product of `lists` in C order.
pub(crate) fn for_each_index(lists: &[Vec<u64>], mut f: impl FnMut(&[u64])) {
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

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use crate::zarr::plan::chunk_plan::list_chunk_reads;
    use crate::zarr::plan::index_set::IndexSet;
    use crate::zarr::plan::selection::Selection;
    use arrow::array::AsArray;
    use arrow::datatypes::Int64Type;

    fn ints(a: &ArrayRef) -> Vec<i64> {
        a.as_primitive::<Int64Type>().values().to_vec()
    }

    fn set(n: u64, r: Vec<std::ops::Range<u64>>) -> IndexSet {
        IndexSet::from_ranges(n, r)
    }

    #[test]
    fn selection_inside_chunks_gives_c_order_positions_and_indices() {
        let sel = Selection::from_boxes(vec![vec![set(4, vec![1..3]), set(6, vec![2..3, 4..9])]])
            .unwrap();
        assert_eq!(sel.len(), 6);
        let reads = list_chunk_reads(&[4, 6], &[4, 3], &sel);
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

    /// Dimension columns made a batch at a time, for batches of every size, are the columns
    /// of all rows cut into those batches: for one box of several ranges per dimension (and a
    /// limit cutting its rows), and for two boxes.
    #[test]
    fn dimension_columns_by_batch_are_the_whole_cut_in_pieces() {
        let sel = Selection::from_boxes(vec![vec![
            set(8, vec![0..2, 5..7]),
            set(9, vec![1..2, 3..6, 8..9]),
            set(3, vec![0..3]),
        ]])
        .unwrap();
        let mut one_box = list_chunk_reads(&[8, 9, 3], &[8, 9, 3], &sel)
            .pop()
            .unwrap();
        one_box.rows -= 5;
        for read in [one_box, two_boxes_in_one_chunk()] {
            let whole: Vec<Vec<i64>> = read.dimension_columns().iter().map(ints).collect();
            // What every row's indices are, from the elements in C order.
            let strides = c_strides(&read.shape);
            let by_element: Vec<Vec<i64>> = (0..read.shape.len())
                .map(|d| {
                    (read.elements().iter())
                        .map(|e| (read.origin[d] + e / strides[d] % read.shape[d]) as i64)
                        .collect()
                })
                .collect();
            assert_eq!(whole, by_element);
            let index = read.row_index();
            for batch in 1..=read.rows + 1 {
                let mut pieces = vec![Vec::new(); read.shape.len()];
                for start in (0..read.rows).step_by(batch) {
                    let cols = read.dimension_columns_in(&index, start..start + batch);
                    for (d, c) in cols.iter().enumerate() {
                        pieces[d].extend(ints(c));
                        // Repeated or gathered, an axis's values are the index's.
                        let rows = start..start + batch;
                        let same = read.axis_values_in(&index, d, rows.clone(), None).unwrap();
                        assert_eq!(ints(&same), ints(c), "batches of {batch}");
                        let values: ArrayRef =
                            Arc::new(Int64Array::from_iter_values((0..64).map(|v| v * 10)));
                        let mapped = read.axis_values_in(&index, d, rows, Some(&values)).unwrap();
                        let tens: Vec<i64> = ints(c).iter().map(|v| v * 10).collect();
                        assert_eq!(ints(&mapped), tens, "batches of {batch}");
                    }
                }
                assert_eq!(pieces, whole, "batches of {batch}");
            }
        }
    }

    /// Runs along the last dimension cover the rows of a batch as their index columns say:
    /// one box of several ranges per dimension, and two boxes, in batches of every size.
    #[test]
    fn runs_along_the_last_dimension_are_the_rows_index_columns() {
        let sel = Selection::from_boxes(vec![vec![
            set(8, vec![0..2, 5..7]),
            set(9, vec![1..2, 3..6, 8..9]),
            set(3, vec![0..1, 2..3]),
        ]])
        .unwrap();
        let one_box = list_chunk_reads(&[8, 9, 3], &[8, 9, 3], &sel)
            .pop()
            .unwrap();
        for read in [one_box, two_boxes_in_one_chunk()] {
            let whole: Vec<Vec<i64>> = read.dimension_columns().iter().map(ints).collect();
            let index = read.row_index();
            for batch in 1..=read.rows + 1 {
                for start in (0..read.rows).step_by(batch) {
                    let rows = start..(start + batch).min(read.rows);
                    let mut seen = 0;
                    let last = read.shape.len() - 1;
                    read.for_each_run(&index, rows.clone(), &mut |row, at, len| {
                        assert_eq!(row, seen, "runs in row order, batches of {batch}");
                        for k in 0..len {
                            let r = start + row + k;
                            for (d, column) in whole.iter().enumerate() {
                                let expected = at[d] as i64 + if d == last { k as i64 } else { 0 };
                                assert_eq!(column[r], expected, "row {r}, dimension {d}");
                            }
                        }
                        seen += len;
                    });
                    assert_eq!(seen, rows.len());
                }
            }
        }
    }

    #[test]
    fn a_contiguous_run_inside_a_chunk_is_strided() {
        // Rows 2..4 of a 4 x 3 chunk: one run of 6 elements starting at element 6.
        let sel =
            Selection::from_boxes(vec![vec![set(8, vec![2..4]), set(3, vec![0..3])]]).unwrap();
        let reads = list_chunk_reads(&[8, 3], &[4, 3], &sel);
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
        let read = &list_chunk_reads(&[4, 3], &[4, 3], &sel)[0];
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
    fn two_boxes_in_one_chunk() -> ChunkSelection {
        let sel = Selection::from_boxes(vec![
            vec![set(12, vec![7..9]), set(6, vec![1..2])],
            vec![set(12, vec![10..11]), set(6, vec![3..5])],
        ])
        .unwrap();
        list_chunk_reads(&[12, 6], &[6, 6], &sel).pop().unwrap()
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
        let whole = list_chunk_reads(&[12, 6], &[6, 6], &Selection::all(&[12, 6]));
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
        let dims = |reads: &[ChunkSelection], d: usize| -> Vec<i64> {
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
        // Read backwards with a limit (the first rows skipped): pieces of skipped rows only are
        // left out, the one the cut falls in skips its share.
        let mut tail = read.clone();
        tail.skip = 2;
        let pieces = tail.pieces(&[0, 0], &[6, 6], 1);
        let rows: Vec<(usize, usize)> = pieces.iter().map(|p| (p.rows, p.skip)).collect();
        assert_eq!(rows, [(2, 0)]);
        tail.skip = 3;
        let pieces = tail.pieces(&[0, 0], &[6, 6], 1);
        let rows: Vec<(usize, usize)> = pieces.iter().map(|p| (p.rows, p.skip)).collect();
        assert_eq!(rows, [(2, 1)]);
    }

    #[test]
    fn overlapping_boxes_become_disjoint_and_rows_stay_in_c_order() {
        // time = 1 OR station = 2 on a 3 x 3 array, one chunk.
        let row = vec![set(3, vec![1..2]), set(3, vec![0..3])];
        let col = vec![set(3, vec![0..3]), set(3, vec![2..3])];
        let sel = Selection::from_boxes(vec![row, col]).unwrap();
        assert_eq!(sel.len(), 5);
        assert_eq!(sel.boxes().len(), 2);
        let reads = list_chunk_reads(&[3, 3], &[3, 3], &sel);
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].gather(1), Gather::Positions(vec![2, 3, 4, 5, 8]));
        let dims = reads[0].dimension_columns();
        assert_eq!(ints(&dims[0]), vec![0, 1, 1, 1, 2]);
        assert_eq!(ints(&dims[1]), vec![2, 0, 1, 2, 2]);
    }

    #[test]
    fn projected_gathers_broadcast_missing_dimensions() {
        // A 2 x 3 read (time, station); a variable over (station) and one over (station, time).
        let shape = [2, 3];
        let read = list_chunk_reads(&shape, &shape, &Selection::all(&shape)).remove(0);
        assert_eq!(
            read.project_gather(&[1], 1),
            Gather::Positions(vec![0, 1, 2, 0, 1, 2])
        );
        assert_eq!(
            read.project_gather(&[1, 0], 1),
            Gather::Positions(vec![0, 2, 4, 1, 3, 5])
        );
        assert_eq!(read.project_gather(&[0, 1], 4), read.gather(4));
        assert_eq!(read.project_gather(&[], 8), Gather::Positions(vec![0; 6]));
    }

    #[test]
    fn a_row_limit_cuts_positions_and_indices_alike() {
        let shape = [3, 3];
        let mut read = list_chunk_reads(&shape, &[3, 3], &Selection::all(&shape)).remove(0);
        read.rows = 4;
        assert_eq!(read.gather(1).len(), 4);
        let dims = read.dimension_columns();
        assert_eq!(ints(&dims[0]), vec![0, 0, 0, 1]);
        assert_eq!(ints(&dims[1]), vec![0, 1, 2, 0]);
    }
}
