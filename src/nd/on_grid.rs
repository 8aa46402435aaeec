//! [`OnGrid`]: a result that already lies on a grid (a grid aggregate's final values at
//! their groups' positions), handed to a gridded write in place of rows. The write then
//! learns no dimension's values from rows, sorts and spills nothing: [`OnGrid::placement`]
//! finds the grid the rows would have made (`rows_grid.rs`: each dimension's values that a
//! row has, ascending), and [`OnGrid::positions`] where each of its cells is in the values.

use std::ops::Range;

use arrow::array::{Array, ArrayRef, UInt64Array};
use arrow::buffer::BooleanBuffer;
use arrow::compute::{sort_to_indices, take};
use arrow::row::{RowConverter, SortField};

use super::rows_grid::ORDER;

/// Values laid out on a grid: position `p` of the layout is index `(p / stride) % len` along
/// each dimension.
#[derive(Debug)]
pub(crate) struct OnGrid {
    /// Per dimension of the write, in its order.
    pub dims: Vec<OnGridDim>,
    /// Per variable (the write's other columns, in order): a value per position.
    pub values: Vec<ArrayRef>,
    /// The positions that are a row of the result; the others are no row (a group no row
    /// reached), as if the query had not given them.
    pub present: BooleanBuffer,
}

/// One dimension of an [`OnGrid`].
#[derive(Debug)]
pub(crate) struct OnGridDim {
    /// The coordinate value at each index along it.
    pub values: ArrayRef,
    /// Positions between consecutive indices.
    pub stride: usize,
}

/// The grid the rows make: per dimension the indices a row lies at, in ascending order of
/// their values.
#[derive(Debug)]
pub(crate) struct Placement {
    /// Per dimension, the layout's indices in the grid's order.
    pub order: Vec<Vec<usize>>,
    /// Per dimension, the values: the coordinate.
    pub coordinates: Vec<ArrayRef>,
    /// Rows (present positions).
    pub rows: u64,
}

impl OnGrid {
    /// The grid its rows make; `None` when the rows would make none the same way (a NULL
    /// dimension, one value at two indices: the row path's errors and merges are its own).
    pub(crate) fn placement(&self) -> Result<Option<Placement>, arrow::error::ArrowError> {
        let mut reached: Vec<Vec<bool>> = (self.dims.iter())
            .map(|d| vec![false; d.values.len()])
            .collect();
        let mut rows = 0u64;
        for p in self.present.set_indices() {
            for (dim, reached) in self.dims.iter().zip(&mut reached) {
                let len = reached.len().max(1);
                reached[(p / dim.stride.max(1)) % len] = true;
            }
            rows += 1;
        }
        let mut order = Vec::with_capacity(self.dims.len());
        let mut coordinates = Vec::with_capacity(self.dims.len());
        for (dim, reached) in self.dims.iter().zip(reached) {
            let kept: Vec<u64> = (reached.iter().enumerate())
                .filter(|(_, &r)| r)
                .map(|(i, _)| i as u64)
                .collect();
            let kept = UInt64Array::from(kept);
            let values = take(dim.values.as_ref(), &kept, None)?;
            if values.null_count() > 0 {
                return Ok(None);
            }
            let sorted = sort_to_indices(values.as_ref(), Some(ORDER), None)?;
            let coordinate = take(values.as_ref(), &sorted, None)?;
            if has_repeats(&coordinate)? {
                return Ok(None);
            }
            order.push(
                (sorted.values().iter())
                    .map(|&i| kept.value(i as usize) as usize)
                    .collect(),
            );
            coordinates.push(coordinate);
        }
        Ok(Some(Placement {
            order,
            coordinates,
            rows,
        }))
    }

    /// The layout's position of each cell of the grid's first-dimension indices `first`
    /// (every dimension after it whole, C order); NULL where the cell is no row.
    pub(crate) fn positions(&self, placement: &Placement, first: Range<usize>) -> UInt64Array {
        let mut positions = vec![0usize];
        for (d, (dim, order)) in self.dims.iter().zip(&placement.order).enumerate() {
            let along = match d {
                0 => &order[first.clone()],
                _ => &order[..],
            };
            let mut next = Vec::with_capacity(positions.len() * along.len());
            for &p in &positions {
                next.extend(along.iter().map(|&i| p + i * dim.stride));
            }
            positions = next;
        }
        positions
            .into_iter()
            .map(|p| self.present.value(p).then_some(p as u64))
            .collect()
    }
}

/// Whether two neighbours of sorted `values` are equal.
fn has_repeats(values: &ArrayRef) -> Result<bool, arrow::error::ArrowError> {
    let converter = RowConverter::new(vec![SortField::new(values.data_type().clone())])?;
    let rows = converter.convert_columns(std::slice::from_ref(values))?;
    Ok((1..rows.num_rows()).any(|i| rows.row(i) == rows.row(i - 1)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int32Array};

    use super::*;

    /// A 2 × 3 layout: descending latitudes (30, 20) by longitudes (5, 7, 6).
    fn layout(present: &[bool]) -> OnGrid {
        OnGrid {
            dims: vec![
                OnGridDim {
                    values: Arc::new(Float64Array::from(vec![30.0, 20.0])),
                    stride: 3,
                },
                OnGridDim {
                    values: Arc::new(Int32Array::from(vec![5, 7, 6])),
                    stride: 1,
                },
            ],
            values: vec![Arc::new(Float64Array::from(vec![
                0.0, 1.0, 2.0, 3.0, 4.0, 5.0,
            ]))],
            present: BooleanBuffer::from(present),
        }
    }

    #[test]
    fn the_grid_is_the_values_rows_have_ascending() {
        let grid = layout(&[true, false, true, false, true, true]);
        let placement = grid.placement().unwrap().unwrap();
        assert_eq!(placement.rows, 4);
        assert_eq!(placement.order, vec![vec![1, 0], vec![0, 2, 1]]);
        let lat = placement.coordinates[0]
            .as_any()
            .downcast_ref::<Float64Array>();
        assert_eq!(lat.unwrap().values(), &[20.0, 30.0]);
        // Latitude 20 (layout row 1): longitudes 5, 6, 7 are positions 3, 5, 4.
        let positions = grid.positions(&placement, 0..1);
        let got: Vec<Option<u64>> = positions.iter().collect();
        assert_eq!(got, vec![None, Some(5), Some(4)]);
        let got: Vec<Option<u64>> = grid.positions(&placement, 0..2).iter().collect();
        assert_eq!(got, vec![None, Some(5), Some(4), Some(0), Some(2), None]);
    }

    #[test]
    fn an_index_no_row_has_is_no_coordinate() {
        // Nothing at longitude 7 (layout column 1).
        let grid = layout(&[true, false, true, true, false, false]);
        let placement = grid.placement().unwrap().unwrap();
        assert_eq!(placement.order, vec![vec![1, 0], vec![0, 2]]);
    }

    #[test]
    fn nulls_and_repeated_values_make_no_placement() {
        let mut grid = layout(&[true; 6]);
        grid.dims[1].values = Arc::new(Int32Array::from(vec![Some(5), None, Some(6)]));
        assert!(grid.placement().unwrap().is_none());
        grid.dims[1].values = Arc::new(Int32Array::from(vec![5, 6, 6]));
        assert!(grid.placement().unwrap().is_none());
        // A repeated value no row has is no matter.
        let mut grid = layout(&[true, false, true, true, false, true]);
        grid.dims[1].values = Arc::new(Int32Array::from(vec![5, 6, 6]));
        assert!(grid.placement().unwrap().is_some());
    }
}
