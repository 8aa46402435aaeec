//! The grid of rows written from SQL onto dimensions (`COPY ... STORED AS ZARR OPTIONS
//! ('dimensions' 'time,lat,lon')`, lance-nd's COPY and INSERT): each dimension's distinct
//! values, learnt from the rows and sorted (the coordinates xarray's `Dataset.from_dataframe`
//! makes from the index), and where a row lies on that grid.
//!
//! Values are compared in Arrow's row format, which orders as the values do, so any
//! orderable column can be a dimension and a row's position is a binary search, with no
//! allocation per row. A number or time (a fixed width of at most 8 bytes) is kept as its row
//! bytes in a `u64` ([`Key`]), which orders the same and is hashed and compared as one word:
//! a lance-nd COPY of 2·10^7 rows took 24.8 s with byte strings (a quarter of it in `memcmp`)
//! and takes 5.9 s (BENCHMARKS.md). What the coordinates hold is bounded like a
//! dataset's coordinates when it is read (`ndfusion.max_coordinate_bytes`).

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::{DataType, Schema};
use arrow::row::{Row, RowConverter, SortField};
use datafusion::common::HashSet;

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
    seen: Seen,
}

/// A dimension's values as sortable words (with the first byte their rows share), or as
/// row bytes.
enum Seen {
    Keys(Key, HashSet<u64>, u8),
    Bytes(HashSet<Box<[u8]>>),
}

/// The row bytes of a value of fixed width `w` ≤ 8 (a valid marker, then `w` bytes) as one
/// word: the `w` bytes big-endian, so words order as the bytes do.
#[derive(Debug, Clone, Copy)]
struct Key {
    width: usize,
}

impl Key {
    /// The key of `data_type`, when its values have a fixed width of at most 8 bytes.
    fn of(data_type: &DataType) -> Option<Self> {
        let width = data_type.primitive_width()?;
        (width <= 8).then_some(Key { width })
    }

    fn word(self, row: Row<'_>) -> u64 {
        let bytes = row.as_ref();
        // Every value is valid (NULLs are refused), so the marker is the same in all rows.
        (bytes[1..=self.width].iter()).fold(0u64, |word, &b| (word << 8) | u64::from(b))
    }

    /// The row bytes of `word`.
    fn bytes(self, word: u64, marker: u8) -> Box<[u8]> {
        let mut bytes = vec![marker];
        bytes.extend_from_slice(&word.to_be_bytes()[8 - self.width..]);
        bytes.into()
    }
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
                seen: match Key::of(data_type) {
                    Some(key) => Seen::Keys(key, HashSet::default(), 0),
                    None => Seen::Bytes(HashSet::default()),
                },
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
            let new_bytes = match &mut dim.seen {
                Seen::Keys(key, seen, marker) => {
                    if let Some(row) = rows.iter().next() {
                        *marker = row.as_ref()[0];
                    }
                    let before = seen.len();
                    seen.extend(rows.iter().map(|row| key.word(row)));
                    ((seen.len() - before) * (key.width + 1)) as u64
                }
                Seen::Bytes(seen) => {
                    let mut added = 0;
                    for row in rows.iter() {
                        // Most rows repeat a value already seen: only a new value allocates.
                        if !seen.contains(row.as_ref()) {
                            added += row.as_ref().len() as u64;
                            seen.insert(row.as_ref().into());
                        }
                        // Checked as the values come, so a column of distinct long strings
                        // is refused before it is held.
                        if self.bytes + added > self.max_bytes {
                            break;
                        }
                    }
                    added
                }
            };
            self.bytes += new_bytes;
            if self.bytes > self.max_bytes {
                return Err(GridError::TooLarge {
                    name: dim.name.clone(),
                    max: self.max_bytes,
                });
            }
        }
        Ok(())
    }

    /// The grid: each dimension's values, sorted.
    pub(crate) fn finish(self) -> Result<Grid, GridError> {
        let mut dims = Vec::with_capacity(self.dims.len());
        for dim in self.dims {
            let parser = dim.converter.parser();
            let (sorted, values) = match dim.seen {
                Seen::Keys(key, seen, marker) => {
                    let mut words: Vec<u64> = seen.into_iter().collect();
                    words.sort_unstable();
                    let bytes: Vec<Box<[u8]>> =
                        words.iter().map(|&w| key.bytes(w, marker)).collect();
                    let values = dim
                        .converter
                        .convert_rows(bytes.iter().map(|r| parser.parse(r)))?
                        .remove(0);
                    (Sorted::Keys(key, words), values)
                }
                Seen::Bytes(seen) => {
                    let mut sorted: Vec<Box<[u8]>> = seen.into_iter().collect();
                    sorted.sort();
                    let values = dim
                        .converter
                        .convert_rows(sorted.iter().map(|r| parser.parse(r)))?
                        .remove(0);
                    (Sorted::Bytes(sorted), values)
                }
            };
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
    sorted: Sorted,
    converter: RowConverter,
}

/// A dimension's values, ascending, as they were learnt.
enum Sorted {
    Keys(Key, Vec<u64>),
    Bytes(Vec<Box<[u8]>>),
}

impl Dim {
    /// Cells along the dimension.
    pub(crate) fn len(&self) -> usize {
        match &self.sorted {
            Sorted::Keys(_, words) => words.len(),
            Sorted::Bytes(sorted) => sorted.len(),
        }
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
        match &self.sorted {
            Sorted::Keys(key, words) => {
                // Rows sorted by the dimensions repeat a value or move to the next one: those
                // are tried before a search.
                let mut last = 0usize;
                for row in rows.iter() {
                    let word = key.word(row);
                    let i = match words.get(last..last + 2) {
                        Some([w, _]) if *w == word => last,
                        Some([_, w]) if *w == word => last + 1,
                        _ => match words.binary_search(&word) {
                            Ok(i) => i,
                            Err(_) => return Ok(None),
                        },
                    };
                    out.push(i);
                    last = i;
                }
            }
            Sorted::Bytes(sorted) => {
                for row in rows.iter() {
                    match sorted.binary_search_by(|v| v.as_ref().cmp(row.as_ref())) {
                        Ok(i) => out.push(i),
                        Err(_) => return Ok(None),
                    }
                }
            }
        }
        Ok(Some(()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int32Array, StringArray};
    use arrow::compute::take;
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

    /// Words (numbers, times) and row bytes (strings) order the values as Arrow's sort does,
    /// and each row is found where its value is, in sorted runs and out of order alike.
    #[test]
    fn every_kind_of_value_is_ordered_and_found_as_arrow_sorts() {
        use arrow::array::{Float32Array, Int64Array, TimestampSecondArray};
        use arrow::compute::sort;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![5, i64::MIN, -1, 0, 5, i64::MAX, -1])),
            Arc::new(Float32Array::from(vec![
                0.0,
                -0.0,
                f32::NAN,
                -2.5,
                f32::NEG_INFINITY,
                1e30,
                -2.5,
            ])),
            Arc::new(TimestampSecondArray::from(vec![3, -3, 0, 3, 7, -100, 0])),
            Arc::new(StringArray::from(vec!["b", "", "ab", "b", "a", "é", "ab"])),
        ];
        let rows = RecordBatch::try_from_iter(
            ["i", "f", "t", "s"]
                .into_iter()
                .zip(columns.iter().cloned()),
        )
        .unwrap();
        let names: Vec<String> = ["i", "f", "t", "s"].map(String::from).to_vec();
        let strings = CoordinateTypes::NumbersAndStrings;
        let mut builder = GridBuilder::new(&rows.schema(), &names, strings, 1 << 20).unwrap();
        builder.add(&rows).unwrap();
        let grid = builder.finish().unwrap();
        for (dim, column) in grid.dims.iter().zip(&columns) {
            let sorted = sort(column.as_ref(), Some(ORDER)).unwrap();
            let mut distinct: Vec<usize> = (0..sorted.len()).collect();
            distinct.dedup_by(|b, a| {
                arrow::array::make_comparator(sorted.as_ref(), sorted.as_ref(), ORDER).unwrap()(
                    *a, *b,
                )
                .is_eq()
            });
            let want = take(
                sorted.as_ref(),
                &arrow::array::UInt32Array::from_iter_values(distinct.iter().map(|&i| i as u32)),
                None,
            )
            .unwrap();
            assert_eq!(dim.values.as_ref(), want.as_ref(), "{}", dim.name);
            let mut out = Vec::new();
            dim.positions(column, &mut out).unwrap().unwrap();
            let found = take(
                dim.values.as_ref(),
                &arrow::array::UInt32Array::from_iter_values(out.iter().map(|&i| i as u32)),
                None,
            )
            .unwrap();
            assert_eq!(found.as_ref(), column.as_ref(), "{}", dim.name);
            // In sorted order (runs and steps found without a search).
            dim.positions(&sorted, &mut out).unwrap().unwrap();
            assert!(out.windows(2).all(|w| w[0] <= w[1]), "{}", dim.name);
        }
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
