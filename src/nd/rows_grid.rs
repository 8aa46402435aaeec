//! The grid of rows written from SQL onto dimensions (`COPY ... STORED AS ZARR OPTIONS
//! ('dimensions' 'time,lat,lon')`, lance-nd's COPY and INSERT): each dimension's distinct
//! values, learnt from the rows and sorted (the coordinates xarray's `Dataset.from_dataframe`
//! makes from the index), and where a row lies on that grid.
//!
//! Values are compared in Arrow's row format, which orders as the values do, so any
//! orderable column can be a dimension and a row's position is a binary search, with no
//! allocation per row. What the coordinates hold is bounded like a dataset's coordinates when
//! it is read (`ndfusion.max_coordinate_bytes`).

use std::collections::HashSet;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Schema};
use arrow::row::{RowConverter, SortField};

use crate::limits::COORDINATE_BYTES;

/// Why the rows make no grid.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GridError {
    #[error("dimension '{name}' is not a column of the query; its columns: {columns}")]
    NotAColumn { name: String, columns: String },
    #[error("dimension '{name}' is named twice")]
    Twice { name: String },
    #[error("dimension '{name}' is {data_type}, which cannot be a coordinate")]
    Unsupported { name: String, data_type: DataType },
    #[error("dimension '{name}' is NULL in a row: every row needs a value of each dimension")]
    Null { name: String },
    #[error("the values of dimension '{name}' hold more than {max} bytes ({COORDINATE_BYTES})")]
    TooLarge { name: String, max: u64 },
    #[error("{0}")]
    Arrow(#[from] arrow::error::ArrowError),
}

/// One dimension while its values are learnt.
struct Learning {
    name: String,
    column: usize,
    converter: RowConverter,
    /// The values seen, in Arrow's row format (byte order is value order).
    seen: HashSet<Box<[u8]>>,
}

/// The types a dimension may have: numbers and times everywhere; strings where the writer
/// stores string coordinates (Zarr; lance-nd's writes do not take them yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CoordinateTypes {
    Numbers,
    NumbersAndStrings,
}

impl CoordinateTypes {
    fn accepts(self, data_type: &DataType) -> bool {
        data_type.is_integer()
            || data_type.is_floating()
            || matches!(data_type, DataType::Timestamp(..))
            || (self == CoordinateTypes::NumbersAndStrings
                && matches!(
                    data_type,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                ))
    }
}

/// Learns the dimensions' values from the rows ([`add`](Self::add)), then makes the grid.
pub(crate) struct GridBuilder {
    dims: Vec<Learning>,
    bytes: u64,
    max_bytes: u64,
}

/// Sorted ascending, NULLs (refused before) last: the order the sink's input is sorted in.
pub(crate) const ORDER: SortOptions = SortOptions {
    descending: false,
    nulls_first: false,
};

impl GridBuilder {
    /// The dimensions `names` of rows of `schema`, each of one of `types`; their values may
    /// hold `max_bytes` in all.
    pub(crate) fn new(
        schema: &Schema,
        names: &[String],
        types: CoordinateTypes,
        max_bytes: u64,
    ) -> Result<Self, GridError> {
        let mut dims = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(GridError::Twice { name: name.clone() });
            }
            let column = schema.index_of(name).map_err(|_| GridError::NotAColumn {
                name: name.clone(),
                columns: (schema.fields().iter())
                    .map(|f| f.name().as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
            let data_type = schema.field(column).data_type();
            if !types.accepts(data_type) {
                return Err(GridError::Unsupported {
                    name: name.clone(),
                    data_type: data_type.clone(),
                });
            }
            let field = SortField::new_with_options(data_type.clone(), ORDER);
            dims.push(Learning {
                name: name.clone(),
                column,
                converter: RowConverter::new(vec![field])?,
                seen: HashSet::new(),
            });
        }
        Ok(GridBuilder {
            dims,
            bytes: 0,
            max_bytes,
        })
    }

    /// Learns the dimension values of `batch`'s rows.
    pub(crate) fn add(&mut self, batch: &RecordBatch) -> Result<(), GridError> {
        for dim in &mut self.dims {
            let column = batch.column(dim.column);
            if column.null_count() > 0 {
                return Err(GridError::Null {
                    name: dim.name.clone(),
                });
            }
            let rows = dim
                .converter
                .convert_columns(std::slice::from_ref(column))?;
            for row in rows.iter() {
                // Most rows repeat a value already seen: only a new value allocates.
                if dim.seen.contains(row.as_ref()) {
                    continue;
                }
                self.bytes += row.as_ref().len() as u64;
                if self.bytes > self.max_bytes {
                    return Err(GridError::TooLarge {
                        name: dim.name.clone(),
                        max: self.max_bytes,
                    });
                }
                dim.seen.insert(row.as_ref().into());
            }
        }
        Ok(())
    }

    /// The grid: each dimension's values, sorted.
    pub(crate) fn finish(self) -> Result<Grid, GridError> {
        let mut dims = Vec::with_capacity(self.dims.len());
        for dim in self.dims {
            let mut sorted: Vec<Box<[u8]>> = dim.seen.into_iter().collect();
            sorted.sort();
            let parser = dim.converter.parser();
            let values = dim
                .converter
                .convert_rows(sorted.iter().map(|r| parser.parse(r)))?
                .remove(0);
            dims.push(Dim {
                name: dim.name,
                column: dim.column,
                values,
                sorted,
                converter: dim.converter,
            });
        }
        Ok(Grid { dims })
    }
}

/// The dimensions of a gridded write, in the order of `dimensions`.
pub(crate) struct Grid {
    pub dims: Vec<Dim>,
}

/// One dimension: its column and its sorted distinct values.
pub(crate) struct Dim {
    pub name: String,
    /// The column of the query that holds it.
    pub column: usize,
    /// The coordinate: the distinct values, ascending.
    pub values: ArrayRef,
    /// The values in Arrow's row format, ascending.
    sorted: Vec<Box<[u8]>>,
    converter: RowConverter,
}

impl Dim {
    /// Cells along the dimension.
    pub(crate) fn len(&self) -> usize {
        self.sorted.len()
    }

    /// Each row's index along the dimension, into `out`; `None` for a value the grid does
    /// not have (the rows were not those the grid was learnt from).
    pub(crate) fn positions(
        &self,
        column: &ArrayRef,
        out: &mut Vec<usize>,
    ) -> Result<Option<()>, GridError> {
        out.clear();
        let rows = self
            .converter
            .convert_columns(std::slice::from_ref(column))?;
        for row in rows.iter() {
            match self
                .sorted
                .binary_search_by(|v| v.as_ref().cmp(row.as_ref()))
            {
                Ok(i) => out.push(i),
                Err(_) => return Ok(None),
            }
        }
        Ok(Some(()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int32Array, StringArray};
    use arrow::datatypes::Field;

    use super::*;

    fn batch(lat: Vec<f64>, id: Vec<i32>) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("lat", Arc::new(Float64Array::from(lat)) as ArrayRef),
            ("id", Arc::new(Int32Array::from(id)) as ArrayRef),
        ])
        .unwrap()
    }

    #[test]
    fn values_are_learnt_sorted_and_rows_found() {
        let b = batch(vec![2.5, -1.0, 2.5, 0.0], vec![3, 1, 2, 3]);
        let names = ["lat".to_string(), "id".to_string()];
        let mut builder =
            GridBuilder::new(&b.schema(), &names, CoordinateTypes::Numbers, 1 << 20).unwrap();
        builder.add(&b).unwrap();
        builder.add(&batch(vec![7.0], vec![1])).unwrap();
        let grid = builder.finish().unwrap();
        let lat = grid.dims[0]
            .values
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(lat.values().to_vec(), vec![-1.0, 0.0, 2.5, 7.0]);
        assert_eq!(grid.dims[1].len(), 3);
        let mut out = Vec::new();
        grid.dims[0]
            .positions(b.column(0), &mut out)
            .unwrap()
            .unwrap();
        assert_eq!(out, [2, 0, 2, 1]);
        let other = batch(vec![5.0], vec![1]);
        assert!(grid.dims[0]
            .positions(other.column(0), &mut out)
            .unwrap()
            .is_none());
    }

    #[test]
    fn bad_dimensions_are_named() {
        let b = batch(vec![1.0], vec![1]);
        let err = |names: &[&str], max| {
            let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            match GridBuilder::new(&b.schema(), &names, CoordinateTypes::Numbers, max) {
                Err(e) => e.to_string(),
                Ok(mut g) => g.add(&b).unwrap_err().to_string(),
            }
        };
        assert!(err(&["time"], 100)
            .contains("'time' is not a column of the query; its columns: lat, id"));
        assert!(err(&["lat", "lat"], 100).contains("named twice"));
        assert!(err(&["lat"], 4).contains("more than 4 bytes (SET ndfusion.max_coordinate_bytes"));
        let s = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)])),
            vec![Arc::new(StringArray::from(vec![None::<&str>]))],
        )
        .unwrap();
        let e = GridBuilder::new(
            &s.schema(),
            &["s".to_string()],
            CoordinateTypes::Numbers,
            100,
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("'s' is Utf8"), "{e}");
        let strings = CoordinateTypes::NumbersAndStrings;
        assert!(GridBuilder::new(&s.schema(), &["s".to_string()], strings, 100).is_ok());
        let nulls = RecordBatch::try_from_iter([(
            "lat",
            Arc::new(Float64Array::from(vec![None])) as ArrayRef,
        )])
        .unwrap();
        let mut g = GridBuilder::new(
            &nulls.schema(),
            &["lat".to_string()],
            CoordinateTypes::Numbers,
            100,
        )
        .unwrap();
        assert!(g
            .add(&nulls)
            .unwrap_err()
            .to_string()
            .contains("'lat' is NULL"));
    }
}
