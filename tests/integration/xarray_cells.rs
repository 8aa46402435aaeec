//! Cells as the fixture scripts write what xarray computed (floats as `repr` strings, compared
//! bit for bit; times as integer nanoseconds; bytes as hex; NULL as null), and the same cells
//! read from an Arrow column, so a table and xarray's `to_dataframe()` compare row by row.

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit, UInt64Type};
use datafusion::prelude::SessionContext;
use ndfusion::Error;
use serde_json::Value;

use arrow::compute::concat_batches;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Float(u64),
    Int(i128),
    Text(String),
    Bool(bool),
}

impl Cell {
    /// `kind` is the column's dtype (`float64`, ...) or kind (`float`, `bytes`, ...).
    pub(crate) fn from_json(v: &Value, kind: &str) -> Cell {
        match v {
            Value::Null => Cell::Null,
            Value::String(s) if kind.starts_with("float") => {
                Cell::Float(s.parse::<f64>().unwrap().to_bits())
            }
            Value::String(s) => Cell::Text(s.clone()),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Cell::Int(i.into()),
                None => Cell::Int(n.as_u64().unwrap().into()),
            },
            Value::Bool(b) => Cell::Bool(*b),
            other => panic!("unexpected {other}"),
        }
    }

    pub(crate) fn from_arrow(a: &ArrayRef, i: usize) -> Cell {
        if a.is_null(i) {
            return Cell::Null;
        }
        match a.data_type() {
            DataType::Float32 | DataType::Float64 => {
                let f = cast(a, &DataType::Float64).unwrap();
                let x = f.as_primitive::<Float64Type>().value(i);
                // xarray (pandas) does not tell NaN from missing.
                if x.is_nan() {
                    Cell::Null
                } else {
                    Cell::Float(x.to_bits())
                }
            }
            DataType::Utf8 => Cell::Text(a.as_string::<i32>().value(i).to_string()),
            DataType::Binary => Cell::Text(hex(a.as_binary::<i32>().value(i))),
            DataType::Boolean => Cell::Bool(a.as_boolean().value(i)),
            DataType::UInt64 => Cell::Int(a.as_primitive::<UInt64Type>().value(i).into()),
            DataType::Timestamp(TimeUnit::Nanosecond, None) => {
                let n = cast(a, &DataType::Int64).unwrap();
                Cell::Int(n.as_primitive::<Int64Type>().value(i).into())
            }
            t if t.is_integer() => {
                let n = cast(a, &DataType::Int64).unwrap();
                Cell::Int(n.as_primitive::<Int64Type>().value(i).into())
            }
            other => panic!("no comparison for {other}"),
        }
    }

    pub(crate) fn order(&self, other: &Cell) -> Ordering {
        match (self, other) {
            (Cell::Float(a), Cell::Float(b)) => f64::from_bits(*a).total_cmp(&f64::from_bits(*b)),
            (Cell::Int(a), Cell::Int(b)) => a.cmp(b),
            (Cell::Text(a), Cell::Text(b)) => a.cmp(b),
            _ => format!("{self:?}").cmp(&format!("{other:?}")),
        }
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Rows sorted by their dimension cells (the first `dims` columns).
pub(crate) fn sorted(mut rows: Vec<Vec<Cell>>, dims: usize) -> Vec<Vec<Cell>> {
    rows.sort_by(|a, b| {
        (0..dims)
            .map(|i| a[i].order(&b[i]))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    rows
}

/// Asserts that the first `columns.len()` columns of `batch` hold the rows of `want` (an
/// expected.json entry: `values` per column, read by the column's `kind`), compared sorted by
/// the first `dims` columns.
pub(crate) fn assert_rows(
    name: &str,
    batch: &RecordBatch,
    want: &Value,
    columns: &[String],
    kind: impl Fn(&str) -> String,
    dims: usize,
) {
    let rows = batch.num_rows();
    let theirs: Vec<Vec<Cell>> = (0..rows)
        .map(|r| {
            columns
                .iter()
                .map(|c| Cell::from_json(&want["values"][c][r], &kind(c)))
                .collect()
        })
        .collect();
    let ours: Vec<Vec<Cell>> = (0..rows)
        .map(|r| {
            (0..columns.len())
                .map(|c| Cell::from_arrow(batch.column(c), r))
                .collect()
        })
        .collect();
    let (ours, theirs) = (sorted(ours, dims), sorted(theirs, dims));
    for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!(
            a, b,
            "{name}: row {i} (sorted by dimensions) of {columns:?}"
        );
    }
}

/// The names of `batch`'s columns, in order.
pub(crate) fn column_names(batch: &RecordBatch) -> Vec<String> {
    batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

/// Every row `sql` answers in `ctx`, as one batch; an error as the user would see it.
pub(crate) async fn all_rows(ctx: &SessionContext, sql: &str) -> Result<RecordBatch, String> {
    let df = ctx.sql(sql).await.map_err(|e| Error::user_message(&e))?;
    let schema = df.schema().as_arrow().clone();
    let batches = df.collect().await.map_err(|e| Error::user_message(&e))?;
    Ok(concat_batches(&std::sync::Arc::new(schema), &batches).unwrap())
}
