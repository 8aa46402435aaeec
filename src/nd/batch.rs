//! `NdRecordBatch`: named N-d arrays on one grid, plus global attributes; broadcasting and
//! materializing onto the grid.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, RecordBatchOptions, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema};

use super::array::{cell_count, check_attributes, describe_dims, same_attrs, Dim, NdArrowArray};
use super::NdError;

/// Named arrays on one grid, with global attributes (one Arrow value each).
#[derive(Debug, Clone)]
pub struct NdRecordBatch {
    arrays: Vec<(String, NdArrowArray)>,
    grid: Vec<Dim>,
    global_attrs: Vec<(String, ArrayRef)>,
}

impl PartialEq for NdRecordBatch {
    fn eq(&self, other: &Self) -> bool {
        self.arrays == other.arrays
            && self.grid == other.grid
            && same_attrs(&self.global_attrs, &other.global_attrs)
    }
}

impl NdRecordBatch {
    /// Builds a batch whose grid is inferred from its arrays (see [`infer_grid`]).
    pub fn try_new(
        arrays: Vec<(String, NdArrowArray)>,
        global_attrs: Vec<(String, ArrayRef)>,
    ) -> Result<Self, NdError> {
        let grid = infer_grid(arrays.iter().map(|(_, a)| a.dims()))?;
        Self::try_new_with_grid(arrays, grid, global_attrs)
    }

    /// Builds a batch on a given grid; every array must broadcast onto it.
    pub fn try_new_with_grid(
        arrays: Vec<(String, NdArrowArray)>,
        grid: Vec<Dim>,
        global_attrs: Vec<(String, ArrayRef)>,
    ) -> Result<Self, NdError> {
        for (i, (name, array)) in arrays.iter().enumerate() {
            if name.is_empty() || arrays[..i].iter().any(|(n, _)| n == name) {
                return Err(NdError::new(format!(
                    "array name '{name}' is empty or repeated"
                )));
            }
            check_broadcast(array.dims(), &grid).map_err(|e| e.in_array(name))?;
        }
        check_attributes(&global_attrs, "global attribute")?;
        Ok(NdRecordBatch {
            arrays,
            grid,
            global_attrs,
        })
    }

    /// The named arrays, in the order given.
    pub fn arrays(&self) -> &[(String, NdArrowArray)] {
        &self.arrays
    }

    /// The array called `name`.
    pub fn array(&self, name: &str) -> Option<&NdArrowArray> {
        self.arrays.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// The grid every array broadcasts onto.
    pub fn grid(&self) -> &[Dim] {
        &self.grid
    }

    /// The global attributes: one Arrow value per key.
    pub fn global_attrs(&self) -> &[(String, ArrayRef)] {
        &self.global_attrs
    }

    /// Number of grid cells (checked when the batch was built).
    pub fn cell_count(&self) -> usize {
        self.grid.iter().map(|d| d.size).product()
    }

    /// Flattens the batch: one row per grid cell in C order; an Int64 index column for each
    /// grid dimension that has no array of the same name (coordinates are arrays named like
    /// their dimension), then every array broadcast onto the grid.
    pub fn materialize(&self) -> Result<RecordBatch, NdError> {
        let mut fields = Vec::new();
        let mut columns = Vec::new();
        for (d, dim) in self.grid.iter().enumerate() {
            if self.array(&dim.name).is_none() {
                fields.push(Field::new(&dim.name, DataType::Int64, false));
                columns.push(Arc::new(grid_index_column(&self.grid, d)) as ArrayRef);
            }
        }
        for (name, array) in &self.arrays {
            fields.push(Field::new(name, array.values().data_type().clone(), true));
            columns.push(broadcast(array, &self.grid)?);
        }
        let options = RecordBatchOptions::new().with_row_count(Some(self.cell_count()));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), columns, &options)
            .map_err(|e| NdError::new(e.to_string()))
    }
}

/// Infers a grid from the dimensions of several arrays: the highest-rank array sets the axis
/// order, axes that only lower-rank arrays carry are appended, and a size-1 axis takes a larger
/// size from another array. Two sizes other than 1 for one axis are an error.
pub(crate) fn infer_grid<'a>(
    all_dims: impl Iterator<Item = &'a [Dim]> + Clone,
) -> Result<Vec<Dim>, NdError> {
    let mut order: Vec<&[Dim]> = all_dims.collect();
    // Stable: among arrays of equal rank, the first one given sets the order.
    order.sort_by_key(|dims| std::cmp::Reverse(dims.len()));
    let mut grid: Vec<Dim> = Vec::new();
    for dims in order {
        for d in dims {
            match grid.iter_mut().find(|g| g.name == d.name) {
                None => grid.push(d.clone()),
                Some(g) if g.size == d.size || d.size == 1 => {}
                Some(g) if g.size == 1 => g.size = d.size,
                Some(g) => {
                    return Err(NdError::new(format!(
                        "dimension '{}' has size {} in one array and {} in another",
                        d.name, g.size, d.size
                    )))
                }
            }
        }
    }
    // The grid is what materializing allocates: its size is checked, not only each array's.
    cell_count(&grid)?;
    Ok(grid)
}

/// Checks that `dims` broadcast onto `grid`: every axis is on the grid with its size or 1.
fn check_broadcast(dims: &[Dim], grid: &[Dim]) -> Result<(), NdError> {
    for d in dims {
        match grid.iter().find(|g| g.name == d.name) {
            Some(g) if g.size == d.size || d.size == 1 => {}
            _ => {
                return Err(NdError::new(format!(
                    "dimensions {} do not fit the grid {}",
                    describe_dims(dims),
                    describe_dims(grid)
                )))
            }
        }
    }
    Ok(())
}

/// The index along grid axis `d` of every cell, in C order.
pub(crate) fn grid_index_column(grid: &[Dim], d: usize) -> Int64Array {
    let inner: usize = grid[d + 1..].iter().map(|g| g.size).product();
    let outer: usize = grid[..d].iter().map(|g| g.size).product();
    let mut values = Vec::with_capacity(inner * outer * grid[d].size);
    for _ in 0..outer {
        for i in 0..grid[d].size {
            values.extend(std::iter::repeat_n(i as i64, inner));
        }
    }
    Int64Array::from(values)
}

/// `array`'s values broadcast onto `grid`: one value per grid cell, in C order.
pub(crate) fn broadcast(array: &NdArrowArray, grid: &[Dim]) -> Result<ArrayRef, NdError> {
    check_broadcast(array.dims(), grid)?;
    let cells = cell_count(grid)?;
    // Same axes in the same order with the same sizes: the values are already the grid.
    if array.dims() == grid {
        return Ok(Arc::clone(array.values()));
    }
    // For each grid axis, the stride of the array's flat index (0 where the array does not
    // vary along it).
    let mut array_strides = vec![0usize; grid.len()];
    let mut stride = 1;
    for d in array.dims().iter().rev() {
        let g = grid
            .iter()
            .position(|g| g.name == d.name)
            .expect("checked above");
        if d.size > 1 {
            array_strides[g] = stride;
        }
        stride *= d.size;
    }
    let mut indices = Vec::with_capacity(cells);
    let mut coord = vec![0usize; grid.len()];
    for _ in 0..cells {
        indices.push(
            coord
                .iter()
                .zip(&array_strides)
                .map(|(c, s)| c * s)
                .sum::<usize>() as u32,
        );
        for a in (0..grid.len()).rev() {
            coord[a] += 1;
            if coord[a] < grid[a].size {
                break;
            }
            coord[a] = 0;
        }
    }
    let indices = UInt32Array::from(indices);
    arrow::compute::take(array.values().as_ref(), &indices, None)
        .map_err(|e| NdError::new(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Float64Array, Int32Array};
    use arrow::datatypes::{Float64Type, Int32Type};

    fn nd(values: Vec<f64>, dims: &[(&str, usize)]) -> NdArrowArray {
        NdArrowArray::try_new(
            Arc::new(Float64Array::from(values)),
            dims.iter().map(|(n, s)| Dim::new(*n, *s)).collect(),
            vec![],
        )
        .unwrap()
    }

    #[test]
    fn grid_inference_orders_appends_and_stretches_axes() {
        let t = nd(vec![0.0; 6], &[("x", 3), ("y", 2)]);
        let z = nd(vec![0.0; 4], &[("z", 4)]);
        let y1 = nd(vec![0.0; 3], &[("y", 1), ("x", 3)]);
        let g = infer_grid([y1.dims(), z.dims(), t.dims()].into_iter()).unwrap();
        // y1 comes first among the rank-2 arrays: it sets the order; its y=1 takes t's 2.
        assert_eq!(
            g,
            vec![Dim::new("y", 2), Dim::new("x", 3), Dim::new("z", 4)]
        );
        let bad = nd(vec![0.0; 5], &[("x", 5)]);
        let err = infer_grid([t.dims(), bad.dims()].into_iter()).unwrap_err();
        assert!(err
            .to_string()
            .contains("'x' has size 3 in one array and 5 in another"));
    }

    #[test]
    fn materialize_broadcasts_by_name_in_c_order() {
        // temperature (x=2, y=3); x coordinate (x=2); a scalar; y has no coordinate.
        let temperature = nd((0..6).map(f64::from).collect(), &[("x", 2), ("y", 3)]);
        let x = NdArrowArray::try_new(
            Arc::new(Int32Array::from(vec![10, 20])),
            vec![Dim::new("x", 2)],
            vec![],
        )
        .unwrap();
        let transposed = nd(vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0], &[("y", 3), ("x", 2)]);
        let scalar = nd(vec![7.5], &[]);
        let batch = NdRecordBatch::try_new(
            vec![
                ("temperature".into(), temperature),
                ("x".into(), x),
                ("t".into(), transposed),
                ("s".into(), scalar),
            ],
            vec![],
        )
        .unwrap();
        let flat = batch.materialize().unwrap();
        let names: Vec<_> = flat
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names, vec!["y", "temperature", "x", "t", "s"]);
        assert_eq!(
            flat.column(0)
                .as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec(),
            vec![0, 1, 2, 0, 1, 2]
        );
        let temp = flat
            .column(1)
            .as_primitive::<Float64Type>()
            .values()
            .to_vec();
        assert_eq!(temp, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(
            flat.column(2).as_primitive::<Int32Type>().values().to_vec(),
            vec![10, 10, 10, 20, 20, 20]
        );
        assert_eq!(
            flat.column(3)
                .as_primitive::<Float64Type>()
                .values()
                .to_vec(),
            temp
        );
        assert_eq!(
            flat.column(4)
                .as_primitive::<Float64Type>()
                .values()
                .to_vec(),
            vec![7.5; 6]
        );
    }

    #[test]
    fn arrays_that_do_not_fit_the_grid_are_rejected() {
        let a = nd(vec![0.0; 3], &[("x", 3)]);
        let err =
            NdRecordBatch::try_new_with_grid(vec![("a".into(), a)], vec![Dim::new("x", 4)], vec![])
                .unwrap_err();
        assert!(
            err.to_string()
                .contains("array 'a': dimensions (x=3) do not fit the grid (x=4)"),
            "{err}"
        );
    }
}
