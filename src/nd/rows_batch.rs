//! A query's rows as nd record batches: rows grouped by their global attributes (the
//! `batch_by` columns of a lance-nd COPY, the `__global_attrs__` value of an INSERT), each
//! group laid on the grid of its own dimension values (`rows_grid.rs`), one batch (one table
//! row) per group; and a whole result as one dataset ([`rows_on_grid`], Python's
//! `DataFrame.to_xarray`).
//!
//! A dimension is a coordinate (an array named like it, holding its sorted distinct values)
//! or, for an INSERT into a table whose dimension has no coordinate, an index (the row's
//! position along it, from 0); one NULL in every row of a batch is a dimension the batch does
//! not have. Every other column becomes an array on the batch's grid, NULL in the cells no
//! row names: reading the table back gives the rows written, plus those cells.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanBufferBuilder, RecordBatch, UInt32Array};
use arrow::buffer::NullBuffer;
use arrow::compute::{concat_batches, take};
use arrow::datatypes::{DataType, Int64Type, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::DataFusionError;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};

use crate::nd::arrow_encoding::GLOBAL_ATTRS_COLUMN;
use crate::nd::rows_grid::{CoordinateTypes, GridBuilder, GridError};
use crate::nd::rows_groups::GroupCuts;
use crate::nd::{Dim, NdArrowArray, NdError, NdRecordBatch};

/// Cells a batch's grid may have for each of its rows, past a first million: a sparse group
/// (a few rows on far-apart values) would otherwise make a grid of mostly NULL cells of any
/// size. The same bound as a gridded Zarr write's.
const CELLS_PER_ROW: u64 = 1024;

/// Why the rows make no nd record batches.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RowsError {
    #[error("{option} names '{name}', which is not a column of the query; its columns: {columns}")]
    NotAColumn {
        option: &'static str,
        name: String,
        columns: String,
    },
    #[error("'{name}' is both a dimension and a batch_by column")]
    DimensionAndAttribute { name: String },
    #[error(
        "'{name}' is a batch_by column and a field of {GLOBAL_ATTRS_COLUMN}: a global \
         attribute has one source"
    )]
    AttributeTwice { name: String },
    #[error("column {GLOBAL_ATTRS_COLUMN} is {data_type}; the global attributes are a struct")]
    GlobalAttrsNotStruct { data_type: DataType },
    #[error("{0}")]
    Grid(#[from] GridError),
    #[error(
        "dimension '{name}' is an index of the table (no coordinate array): its values are \
         positions from 0, found {value}"
    )]
    NotAnIndex { name: String, value: String },
    #[error(
        "two rows of one batch{attrs} have the same dimensions ({names}) = ({values}): a batch \
         takes one row per cell (aggregate them first, or tell them apart with more \
         'dimensions' or 'batch_by' columns)"
    )]
    SameCell {
        attrs: String,
        names: String,
        values: String,
    },
    #[error(
        "the grid ({sizes}) of a batch would have {cells} cells for its {rows} rows: a batch \
         this sparse is no grid; choose other dimensions"
    )]
    Sparse {
        sizes: String,
        cells: String,
        rows: usize,
    },
    #[error(
        "the rows reached the writer unsorted by their global attributes, so a batch would be \
         written as two table rows"
    )]
    Unsorted,
    #[error("more than {} rows in one batch", u32::MAX)]
    TooManyRows,
    #[error("{0}")]
    Nd(#[from] NdError),
    #[error("{0}")]
    Arrow(#[from] ArrowError),
    #[error("{0}")]
    Memory(#[from] DataFusionError),
}

/// One dimension column.
#[derive(Debug)]
struct DimColumn {
    name: String,
    column: usize,
    /// An index dimension: the values are positions, no coordinate is written.
    index: bool,
}

/// How rows of one schema become nd record batches.
#[derive(Debug)]
pub(crate) struct RowsLayout {
    dims: Vec<DimColumn>,
    /// Columns whose values are each batch's global attributes (`batch_by`).
    attributes: Vec<usize>,
    attribute_names: Vec<String>,
    /// The `__global_attrs__` column, whose fields are global attributes too.
    global_attrs: Option<usize>,
    /// For an INSERT into an existing table: an array NULL in every row of a batch is one the
    /// batch leaves out (the table reads it as NULL, and has the column already). A COPY
    /// writes every column, so the new table has each.
    table_columns: bool,
    /// What the coordinates of one batch may hold (`ndfusion.max_coordinate_bytes`).
    max_coordinate_bytes: u64,
    /// The types a dimension may have (lance-nd's writes take no string coordinates yet).
    types: CoordinateTypes,
}

impl RowsLayout {
    /// `COPY ... STORED AS LANCE_ND OPTIONS ('dimensions' ..., 'batch_by' ...)` of rows of
    /// `schema`. A `__global_attrs__` struct column (a lance-nd table's) adds its fields to
    /// the batch's global attributes.
    pub(crate) fn for_copy(
        schema: &Schema,
        dimensions: &[String],
        batch_by: &[String],
        max_coordinate_bytes: u64,
    ) -> Result<Self, RowsError> {
        let column = |option, name: &String| {
            schema.index_of(name).map_err(|_| RowsError::NotAColumn {
                option,
                name: name.clone(),
                columns: (schema.fields().iter())
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        };
        let mut dims = Vec::with_capacity(dimensions.len());
        for name in dimensions {
            if batch_by.contains(name) {
                return Err(RowsError::DimensionAndAttribute { name: name.clone() });
            }
            dims.push(DimColumn {
                name: name.clone(),
                column: column("dimensions", name)?,
                index: false,
            });
        }
        let attributes = (batch_by.iter())
            .map(|name| column("batch_by", name))
            .collect::<Result<Vec<_>, _>>()?;
        let global_attrs = global_attrs_column(schema)?;
        if let Some(c) = global_attrs {
            if let DataType::Struct(fields) = schema.field(c).data_type() {
                if let Some(f) = fields.iter().find(|f| batch_by.contains(f.name())) {
                    return Err(RowsError::AttributeTwice {
                        name: f.name().clone(),
                    });
                }
            }
        }
        Ok(RowsLayout {
            dims,
            attributes,
            attribute_names: batch_by.to_vec(),
            global_attrs,
            table_columns: false,
            max_coordinate_bytes,
            types: CoordinateTypes::Numbers,
        })
    }

    /// Rows of `schema` as one dataset on the grid of `dimensions` ([`rows_on_grid`]):
    /// string dimensions too.
    fn for_dataset(
        schema: &Schema,
        dimensions: &[String],
        max_coordinate_bytes: u64,
    ) -> Result<Self, RowsError> {
        Ok(RowsLayout {
            types: CoordinateTypes::NumbersAndStrings,
            ..Self::for_copy(schema, dimensions, &[], max_coordinate_bytes)?
        })
    }

    /// `INSERT INTO` a lance-nd table of SQL columns `schema`, whose dimensions are
    /// `dimensions` (in the table's order) and of which `indices` have no coordinate.
    pub(crate) fn for_insert(
        schema: &Schema,
        dimensions: &[String],
        indices: &[String],
        max_coordinate_bytes: u64,
    ) -> Result<Self, RowsError> {
        let dims = (dimensions.iter())
            .filter_map(|name| {
                let column = schema.index_of(name).ok()?;
                Some(DimColumn {
                    name: name.clone(),
                    column,
                    index: indices.contains(name),
                })
            })
            .collect();
        Ok(RowsLayout {
            dims,
            attributes: Vec::new(),
            attribute_names: Vec::new(),
            global_attrs: global_attrs_column(schema)?,
            table_columns: true,
            max_coordinate_bytes,
            types: CoordinateTypes::Numbers,
        })
    }

    /// The columns whose values tell the batches apart (`batch_by`, then `__global_attrs__`).
    pub(crate) fn keys(&self) -> Vec<usize> {
        (self.attributes.iter().copied())
            .chain(self.global_attrs)
            .collect()
    }

    /// The rows of one group (the same global attributes) as one batch on the grid of their
    /// dimension values. What the batch holds is reserved in `memory`.
    pub(crate) fn batch(
        &self,
        group: &RecordBatch,
        memory: &mut MemoryReservation,
    ) -> Result<NdRecordBatch, RowsError> {
        let rows = group.num_rows();
        if u32::try_from(rows).is_err() {
            return Err(RowsError::TooManyRows);
        }
        // A dimension NULL in every row is one the batch does not have (as the rows of a
        // lance-nd table read it); NULL in some rows only, an error (`GridError::Null`).
        let absent = |d: &DimColumn| group.column(d.column).null_count() == rows;
        let dims: Vec<&DimColumn> = self.dims.iter().filter(|d| !absent(d)).collect();
        let coordinates: Vec<String> = (dims.iter())
            .filter(|d| !d.index)
            .map(|d| d.name.clone())
            .collect();
        let mut learning = GridBuilder::new(
            &group.schema(),
            &coordinates,
            self.types,
            self.max_coordinate_bytes,
        )?;
        learning.add(group)?;
        let learnt = learning.finish()?;

        // Each dimension's length, coordinate (if any) and every row's position along it.
        let mut grid = Vec::with_capacity(dims.len());
        let mut coordinate_values = Vec::new();
        let mut positions = vec![Vec::with_capacity(rows); dims.len()];
        for (d, dim) in dims.iter().enumerate() {
            let column = group.column(dim.column);
            let length = if dim.index {
                index_positions(&dim.name, column, &mut positions[d])?
            } else {
                let learnt = (learnt.dims.iter())
                    .find(|l| l.name == dim.name)
                    .expect("every coordinate dimension is learnt");
                learnt.positions(column, &mut positions[d])?;
                coordinate_values.push((dim.column, learnt.values.clone()));
                learnt.len()
            };
            grid.push(Dim::new(&dim.name, length));
        }
        let cells = self.cells(&grid, rows)?;

        let arrays: Vec<usize> = (0..group.num_columns())
            .filter(|c| self.is_array(*c))
            .filter(|&c| !(self.table_columns && group.column(c).null_count() == rows))
            .collect();
        let bytes_per_cell: usize = 4
            + (arrays.iter())
                .map(|&c| group.column(c).data_type().primitive_width().unwrap_or(16))
                .sum::<usize>();
        memory.try_grow(cells.saturating_mul(bytes_per_cell) + rows * 8)?;

        // Which row fills each cell: C order over the grid, a cell no row names is NULL.
        let mut cell_of_row = vec![0usize; rows];
        let mut stride = 1;
        for (d, along) in positions.iter().enumerate().rev() {
            for (cell, position) in cell_of_row.iter_mut().zip(along) {
                *cell += position * stride;
            }
            stride *= grid[d].size;
        }
        let mut row_of_cell = vec![0u32; cells];
        let mut filled = BooleanBufferBuilder::new(cells);
        filled.append_n(cells, false);
        for (row, &cell) in cell_of_row.iter().enumerate() {
            if filled.get_bit(cell) {
                return Err(self.same_cell(group, &dims, row));
            }
            filled.set_bit(cell, true);
            row_of_cell[cell] = row as u32;
        }
        let nulls = (cells != rows).then(|| NullBuffer::new(filled.finish()));
        let take_rows = UInt32Array::new(row_of_cell.into(), nulls);

        // The arrays, in the order of the query's columns: coordinates where their dimension
        // is, every other column on the whole grid.
        let schema = group.schema();
        let mut named = Vec::new();
        for c in 0..group.num_columns() {
            let name = schema.field(c).name().clone();
            if let Some((_, values)) = coordinate_values.iter().find(|(col, _)| *col == c) {
                let dims = vec![Dim::new(&name, values.len())];
                named.push((name, NdArrowArray::try_new(values.clone(), dims, vec![])?));
            } else if arrays.contains(&c) {
                let values = take(group.column(c).as_ref(), &take_rows, None)?;
                let array = NdArrowArray::try_new(values, grid.clone(), vec![])
                    .map_err(|e| e.in_array(&name))?;
                named.push((name, array));
            }
        }
        Ok(NdRecordBatch::try_new_with_grid(
            named,
            grid,
            self.global_attributes(group),
        )?)
    }

    /// Whether column `c` is written as an array on the grid (not a dimension, not an
    /// attribute).
    fn is_array(&self, c: usize) -> bool {
        !self.dims.iter().any(|d| d.column == c)
            && !self.attributes.contains(&c)
            && self.global_attrs != Some(c)
    }

    /// The cells of `grid`, bounded by the rows that fill them.
    fn cells(&self, grid: &[Dim], rows: usize) -> Result<usize, RowsError> {
        let cells = (grid.iter()).try_fold(1u64, |n, d| n.checked_mul(d.size as u64));
        let bound = (rows as u64)
            .saturating_mul(CELLS_PER_ROW)
            .saturating_add(1 << 20);
        match cells {
            Some(c) if c <= bound => Ok(c as usize),
            _ => Err(RowsError::Sparse {
                sizes: (grid.iter())
                    .map(|d| format!("{}={}", d.name, d.size))
                    .collect::<Vec<_>>()
                    .join(", "),
                cells: cells.map_or("too many".into(), |c| c.to_string()),
                rows,
            }),
        }
    }

    /// The global attributes of a group (the same in all its rows): the `batch_by` columns
    /// and the fields of `__global_attrs__`, those that are NULL left out (the table reads
    /// a missing key as NULL).
    fn global_attributes(&self, group: &RecordBatch) -> Vec<(String, ArrayRef)> {
        let schema = group.schema();
        let mut attrs = Vec::new();
        for &c in &self.attributes {
            let value = group.column(c).slice(0, 1);
            if value.is_valid(0) {
                attrs.push((schema.field(c).name().clone(), value));
            }
        }
        if let Some(c) = self.global_attrs {
            let global = group.column(c).as_struct();
            if global.is_valid(0) {
                for (field, child) in global.fields().iter().zip(global.columns()) {
                    let value = child.slice(0, 1);
                    if value.is_valid(0) {
                        attrs.push((field.name().clone(), value));
                    }
                }
            }
        }
        attrs
    }

    /// Two rows of `group` on one cell, the second at `row`: an error naming the dimensions,
    /// the cell and the batch.
    fn same_cell(&self, group: &RecordBatch, dims: &[&DimColumn], row: usize) -> RowsError {
        let options = FormatOptions::default();
        let shown = |column: &ArrayRef| {
            ArrayFormatter::try_new(column.as_ref(), &options)
                .map(|f| f.value(row).to_string())
                .unwrap_or_default()
        };
        let values: Vec<String> = (dims.iter())
            .map(|d| shown(group.column(d.column)))
            .collect();
        let attrs: Vec<String> = (self.global_attributes(group).iter())
            .map(|(k, v)| {
                let value = ArrayFormatter::try_new(v.as_ref(), &options)
                    .map(|f| f.value(0).to_string())
                    .unwrap_or_default();
                format!("{k}={value}")
            })
            .collect();
        RowsError::SameCell {
            attrs: match attrs.is_empty() {
                true => String::new(),
                false => format!(" ({})", attrs.join(", ")),
            },
            names: (dims.iter())
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            values: values.join(", "),
        }
    }
}

/// `rows` (of `schema`) laid on the grid of their `dimensions` columns as one nd record
/// batch, as xarray's `Dataset.from_dataframe(df.set_index(dimensions))` lays a frame: each
/// dimension a coordinate of its sorted distinct values (numbers, times or strings), every
/// other column an array on all the dimensions, NULL in the cells no row names. Two rows on
/// one cell are an error naming the cell, and so is a grid this sparse (over 1,024 cells a
/// row past the first million) or coordinates over `max_coordinate_bytes`. A
/// `__global_attrs__` column (a lance-nd table's rows) gives the batch's global attributes
/// and must hold one value. What the grid holds is reserved from `pool`.
pub fn rows_on_grid(
    schema: &SchemaRef,
    rows: &[RecordBatch],
    dimensions: &[String],
    max_coordinate_bytes: u64,
    pool: &Arc<dyn MemoryPool>,
) -> Result<NdRecordBatch, NdError> {
    let problem = |e: RowsError| NdError::new(e.to_string());
    let layout =
        RowsLayout::for_dataset(schema, dimensions, max_coordinate_bytes).map_err(problem)?;
    let all = concat_batches(schema, rows).map_err(|e| problem(e.into()))?;
    let mut cuts = GroupCuts::new(schema, layout.keys()).map_err(problem)?;
    if !matches!(cuts.starts(&all), Ok(starts) if starts.is_empty()) {
        return Err(NdError::new(format!(
            "{GLOBAL_ATTRS_COLUMN} holds more than one value: a dataset has one set of \
             global attributes"
        )));
    }
    let mut memory = MemoryConsumer::new("rows_on_grid").register(pool);
    layout.batch(&all, &mut memory).map_err(problem)
}

impl std::fmt::Display for RowsLayout {
    /// As EXPLAIN shows it: `dimensions=[depth, i (index)], batch_by=[station]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = (self.dims.iter())
            .map(|d| match d.index {
                true => format!("{} (index)", d.name),
                false => d.name.clone(),
            })
            .collect();
        let mut by = self.attribute_names.clone();
        if self.global_attrs.is_some() {
            by.push(GLOBAL_ATTRS_COLUMN.to_string());
        }
        write!(
            f,
            "dimensions=[{}], batch_by=[{}]",
            dims.join(", "),
            by.join(", ")
        )
    }
}

/// The `__global_attrs__` column of `schema`, which must be a struct.
fn global_attrs_column(schema: &Schema) -> Result<Option<usize>, RowsError> {
    let Ok(c) = schema.index_of(GLOBAL_ATTRS_COLUMN) else {
        return Ok(None);
    };
    match schema.field(c).data_type() {
        DataType::Struct(_) => Ok(Some(c)),
        other => Err(RowsError::GlobalAttrsNotStruct {
            data_type: other.clone(),
        }),
    }
}

/// The positions of an index dimension's values (each row's own value, from 0) into `out`,
/// and the dimension's length (one past the largest).
fn index_positions(
    name: &str,
    column: &ArrayRef,
    out: &mut Vec<usize>,
) -> Result<usize, RowsError> {
    if column.null_count() > 0 {
        return Err(GridError::Null {
            name: name.to_string(),
        }
        .into());
    }
    let Some(values) = column.as_primitive_opt::<Int64Type>() else {
        return Err(RowsError::NotAnIndex {
            name: name.to_string(),
            value: format!("a column of {}", column.data_type()),
        });
    };
    out.clear();
    let mut length = 0usize;
    for &v in values.values() {
        let Ok(position) = usize::try_from(v) else {
            return Err(RowsError::NotAnIndex {
                name: name.to_string(),
                value: v.to_string(),
            });
        };
        out.push(position);
        length = length.max(position.saturating_add(1));
    }
    Ok(length)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray, StructArray};
    use arrow::compute::take_record_batch;
    use arrow::datatypes::{Field, Float64Type};
    use arrow::row::{RowConverter, SortField};
    use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, UnboundedMemoryPool};

    use super::*;

    fn memory() -> MemoryReservation {
        let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
        MemoryConsumer::new("test").register(&pool)
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// The batches of `rows` as the sink makes them: sorted by their keys, cut where a key
    /// changes.
    fn batches(layout: &RowsLayout, rows: &RecordBatch) -> Result<Vec<NdRecordBatch>, RowsError> {
        let keys = layout.keys();
        let mut order: Vec<u32> = (0..rows.num_rows() as u32).collect();
        if !keys.is_empty() {
            let converter = RowConverter::new(
                (keys.iter())
                    .map(|&c| SortField::new(rows.schema().field(c).data_type().clone()))
                    .collect(),
            )?;
            let columns: Vec<ArrayRef> = keys.iter().map(|&c| rows.column(c).clone()).collect();
            let converted = converter.convert_columns(&columns)?;
            order.sort_by_key(|&i| converted.row(i as usize));
        }
        let sorted = take_record_batch(rows, &UInt32Array::from(order))?;
        let mut starts = GroupCuts::new(&rows.schema(), keys)?.starts(&sorted)?;
        starts.push(sorted.num_rows());
        let mut begin = 0;
        let mut out = Vec::new();
        for end in starts {
            if end > begin {
                out.push(layout.batch(&sorted.slice(begin, end - begin), &mut memory())?);
            }
            begin = end;
        }
        Ok(out)
    }

    fn profiles() -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                "station",
                Arc::new(StringArray::from(vec!["b", "a", "a", "b", "a"])) as ArrayRef,
            ),
            (
                "depth",
                Arc::new(Float64Array::from(vec![10.0, 5.0, 0.0, 0.0, 10.0])),
            ),
            (
                "temp",
                Arc::new(Float64Array::from(vec![4.0, 11.0, 12.0, 13.0, 9.0])),
            ),
        ])
        .unwrap()
    }

    #[test]
    fn one_batch_per_attribute_value_on_its_own_grid() {
        let rows = profiles();
        let layout = RowsLayout::for_copy(
            &rows.schema(),
            &names(&["depth"]),
            &names(&["station"]),
            1 << 20,
        )
        .unwrap();
        let batches = batches(&layout, &rows).unwrap();
        assert_eq!(batches.len(), 2);
        let a = &batches[0];
        assert_eq!(a.grid(), &[Dim::new("depth", 3)]);
        let station = a.global_attrs()[0].1.as_string::<i32>().value(0);
        assert_eq!(station, "a");
        let depth = a
            .array("depth")
            .unwrap()
            .values()
            .as_primitive::<Float64Type>();
        assert_eq!(depth.values().to_vec(), vec![0.0, 5.0, 10.0]);
        let temp = a
            .array("temp")
            .unwrap()
            .values()
            .as_primitive::<Float64Type>();
        assert_eq!(temp.values().to_vec(), vec![12.0, 11.0, 9.0]);
        // b has no row at depth 5: its grid is its own, (0, 10).
        let b = &batches[1];
        assert_eq!(b.grid(), &[Dim::new("depth", 2)]);
        let temp = b
            .array("temp")
            .unwrap()
            .values()
            .as_primitive::<Float64Type>();
        assert_eq!(temp.values().to_vec(), vec![13.0, 4.0]);
        assert!(b.array("station").is_none());
    }

    #[test]
    fn missing_cells_are_null_and_repeated_cells_an_error() {
        let rows = RecordBatch::try_from_iter([
            ("x", Arc::new(Int64Array::from(vec![0, 1, 1])) as ArrayRef),
            ("y", Arc::new(Int64Array::from(vec![0, 0, 1]))),
            ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0]))),
        ])
        .unwrap();
        let layout =
            RowsLayout::for_copy(&rows.schema(), &names(&["x", "y"]), &[], 1 << 20).unwrap();
        let batch = &batches(&layout, &rows).unwrap()[0];
        let v = batch.array("v").unwrap().values();
        assert_eq!(v.len(), 4);
        assert!(v.is_null(1));
        assert_eq!(v.as_primitive::<Float64Type>().value(3), 3.0);

        let layout = RowsLayout::for_copy(&rows.schema(), &names(&["x"]), &[], 1 << 20).unwrap();
        let err = batches(&layout, &rows).unwrap_err().to_string();
        assert!(
            err.contains("two rows of one batch have the same dimensions (x) = (1)"),
            "{err}"
        );
        let err = RowsLayout::for_copy(&rows.schema(), &names(&["z"]), &[], 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "dimensions names 'z', which is not a column of the query; its columns: x, y, v"
            ),
            "{err}"
        );
        let err = RowsLayout::for_copy(&rows.schema(), &names(&["x"]), &names(&["x"]), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("'x' is both a dimension and a batch_by column"));
    }

    #[test]
    fn a_sparse_group_is_refused_before_its_grid_is_allocated() {
        let rows = RecordBatch::try_from_iter([
            (
                "x",
                Arc::new(Int64Array::from(vec![0, i64::MAX])) as ArrayRef,
            ),
            ("y", Arc::new(Int64Array::from(vec![0, i64::MAX]))),
            ("v", Arc::new(Float64Array::from(vec![1.0, 2.0]))),
        ])
        .unwrap();
        // As indices (an INSERT): positions up to i64::MAX.
        let layout = RowsLayout::for_insert(
            &rows.schema(),
            &names(&["x", "y"]),
            &names(&["x", "y"]),
            1 << 20,
        )
        .unwrap();
        let err = batches(&layout, &rows).unwrap_err().to_string();
        assert!(
            err.contains("would have too many cells for its 2 rows"),
            "{err}"
        );
        let rows = RecordBatch::try_from_iter([
            ("x", Arc::new(Int64Array::from(vec![-1])) as ArrayRef),
            ("v", Arc::new(Float64Array::from(vec![1.0]))),
        ])
        .unwrap();
        let layout =
            RowsLayout::for_insert(&rows.schema(), &names(&["x"]), &names(&["x"]), 1 << 20)
                .unwrap();
        let err = batches(&layout, &rows).unwrap_err().to_string();
        assert!(err.contains("positions from 0, found -1"), "{err}");
    }

    #[test]
    fn an_insert_groups_by_global_attributes_and_leaves_out_what_is_null() {
        let station = Arc::new(StringArray::from(vec![Some("a"), Some("a"), None]));
        let global = StructArray::from(vec![(
            Arc::new(Field::new("station", DataType::Utf8, true)),
            station as ArrayRef,
        )]);
        let rows = RecordBatch::try_from_iter([
            ("i", Arc::new(Int64Array::from(vec![1, 0, 0])) as ArrayRef),
            ("t", Arc::new(Int64Array::from(vec![None, None, Some(3)]))),
            ("v", Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0]))),
            (
                "w",
                Arc::new(Float64Array::from(vec![None, None, Some(1.0)])),
            ),
            (GLOBAL_ATTRS_COLUMN, Arc::new(global)),
        ])
        .unwrap();
        let layout =
            RowsLayout::for_insert(&rows.schema(), &names(&["i", "t"]), &names(&["i"]), 1 << 20)
                .unwrap();
        let batches = batches(&layout, &rows).unwrap();
        assert_eq!(batches.len(), 2);
        // station NULL sorts first: no global attributes, t a coordinate of one value.
        assert!(batches[0].global_attrs().is_empty());
        assert_eq!(batches[0].grid(), &[Dim::new("i", 1), Dim::new("t", 1)]);
        // station 'a': t NULL in all its rows (a dimension it lacks), w left out.
        let a = &batches[1];
        assert_eq!(a.global_attrs()[0].0, "station");
        assert_eq!(a.grid(), &[Dim::new("i", 2)]);
        assert!(a.array("i").is_none() && a.array("w").is_none());
        let v = a.array("v").unwrap().values().as_primitive::<Float64Type>();
        assert_eq!(v.values().to_vec(), vec![2.0, 1.0]);
    }
}
