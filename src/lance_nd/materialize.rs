//! Materializing scanned lance-nd rows: each row's nd record batch broadcast onto its grid,
//! one output row per grid cell, in C order.

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, UInt32Array,
};
use arrow::datatypes::{DataType, SchemaRef};

use crate::error::{Error, Result};
use crate::nd::arrow_encoding::{decode_dims, decode_nd_array, GLOBAL_ATTRS_COLUMN};
use crate::nd::batch::{broadcast, grid_index_column, infer_grid};
use crate::nd::{cell_count, Dim, NdArrowArray, NdError};

/// Where an output column comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ColumnSource {
    /// The index along a dimension (NULL on rows whose grid lacks it).
    Index(String),
    /// An array's values broadcast onto the grid (NULL on rows without the array).
    Array(String),
    /// `__global_attrs__`, repeated on every cell of its row.
    GlobalAttrs,
}

/// Turns scanned table rows into the materialized cells of their grids.
pub(crate) struct Materializer {
    pub uri: String,
    pub schema: SchemaRef,
    pub columns: Vec<ColumnSource>,
    /// Every array of the table (each row's grid comes from all of them).
    pub arrays: Vec<(String, DataType)>,
    /// The arrays whose values are read.
    pub values: Vec<String>,
}

impl Materializer {
    pub(crate) fn materialize(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let row_ids = batch.column_by_name("_rowid").and_then(|c| {
            c.as_primitive_opt::<arrow::datatypes::UInt64Type>()
                .cloned()
        });
        let mut parts: Vec<Vec<ArrayRef>> = vec![Vec::new(); self.columns.len()];
        let mut total = 0;
        for row in 0..batch.num_rows() {
            let row_id = row_ids.as_ref().map_or(row as u64, |ids| ids.value(row));
            let row_error = |source: NdError| Error::InvalidRow {
                uri: self.uri.clone(),
                row: row_id,
                source,
            };
            let data_error = |message: String| row_error(NdError::new(message));
            // Every array's dimensions (values only for the projected ones).
            let mut present: Vec<(&str, NdArrowArray)> = Vec::new();
            let mut all_dims: Vec<Vec<Dim>> = Vec::new();
            for (a, _) in &self.arrays {
                if self.values.contains(a) {
                    let column = batch
                        .column_by_name(a)
                        .and_then(|c| c.as_struct_opt())
                        .ok_or_else(|| data_error(format!("array '{a}' missing from the scan")))?;
                    if let Some(array) = decode_nd_array(column, row, a).map_err(row_error)? {
                        all_dims.push(array.dims().to_vec());
                        present.push((a.as_str(), array));
                    }
                } else {
                    let names = column(batch, a, "dim_names")
                        .ok_or_else(|| data_error(format!("array '{a}' has no dim_names")))?;
                    let sizes = column(batch, a, "dim_sizes")
                        .ok_or_else(|| data_error(format!("array '{a}' has no dim_sizes")))?;
                    let dims =
                        decode_dims(&names, &sizes, row).map_err(|e| row_error(e.in_array(a)))?;
                    all_dims.push(dims);
                }
            }
            let grid = infer_grid(all_dims.iter().map(Vec::as_slice)).map_err(row_error)?;
            let cells = cell_count(&grid).map_err(row_error)?;
            total += cells;
            for (i, column) in self.columns.iter().enumerate() {
                let data_type = self.schema.field(i).data_type();
                let part: ArrayRef = match column {
                    ColumnSource::Index(d) => match grid.iter().position(|g| &g.name == d) {
                        Some(p) => Arc::new(grid_index_column(&grid, p)),
                        None => new_null_array(data_type, cells),
                    },
                    ColumnSource::Array(a) => match present.iter().find(|(n, _)| n == a) {
                        Some((_, array)) => {
                            broadcast(array, &grid).map_err(|e| row_error(e.in_array(a)))?
                        }
                        None => new_null_array(data_type, cells),
                    },
                    ColumnSource::GlobalAttrs => {
                        let globals = batch
                            .column_by_name(GLOBAL_ATTRS_COLUMN)
                            .ok_or_else(|| data_error("no global attributes in the scan".into()))?;
                        let repeat = UInt32Array::from(vec![row as u32; cells]);
                        arrow::compute::take(globals.as_ref(), &repeat, None)
                            .map_err(|e| Error::arrow("repeating global attributes", e))?
                    }
                };
                parts[i].push(part);
            }
        }
        let columns = parts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if p.is_empty() {
                    Ok(new_null_array(self.schema.field(i).data_type(), 0))
                } else {
                    let refs: Vec<&dyn Array> = p.iter().map(|a| a.as_ref()).collect();
                    arrow::compute::concat(&refs)
                        .map_err(|e| Error::arrow("concatenating materialized rows", e))
                }
            })
            .collect::<Result<Vec<_>>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(total));
        RecordBatch::try_new_with_options(Arc::clone(&self.schema), columns, &options)
            .map_err(|e| Error::arrow("assembling materialized rows", e))
    }
}

/// `<array>.<child>`, whether Lance returned it flattened or inside the array's struct.
fn column(batch: &RecordBatch, array: &str, child: &str) -> Option<ArrayRef> {
    batch
        .column_by_name(&format!("{array}.{child}"))
        .cloned()
        .or_else(|| {
            batch
                .column_by_name(array)?
                .as_struct_opt()?
                .column_by_name(child)
                .cloned()
        })
}
