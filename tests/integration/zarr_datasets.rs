//! Zarr groups written by xarray 2026.9.0 and zarr-python 3.4.2 read back as
//! `xr.open_zarr(path).to_dataframe().reset_index()` shows them (tests/data/datasets/expected.json,
//! written by tests/data/datasets/make_fixtures.py).

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimeUnit};
use serde_json::Value;

use ndfusion::new_session_context;

const DIR: &str = "tests/data/datasets";

fn expected() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

async fn table(sql_location: &str) -> RecordBatch {
    let ctx = new_session_context();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{sql_location}'"
    ))
    .await
    .unwrap();
    let df = ctx.sql("SELECT * FROM t").await.unwrap();
    let schema = df.schema().as_arrow().clone();
    let batches = df.collect().await.unwrap();
    concat_batches(&std::sync::Arc::new(schema), &batches).unwrap()
}

/// A cell as expected.json writes it: floats as f64 (compared bit for bit), times as
/// nanoseconds, NULL as null.
#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Null,
    Float(u64),
    Int(i64),
    Text(String),
    Bool(bool),
}

impl Cell {
    fn from_json(v: &Value, dtype: &str) -> Cell {
        match v {
            Value::Null => Cell::Null,
            Value::String(s) if dtype.starts_with("float") => {
                Cell::Float(s.parse::<f64>().unwrap().to_bits())
            }
            Value::String(s) => Cell::Text(s.clone()),
            Value::Number(n) => Cell::Int(n.as_i64().unwrap()),
            Value::Bool(b) => Cell::Bool(*b),
            other => panic!("unexpected {other}"),
        }
    }

    fn from_arrow(a: &ArrayRef, i: usize) -> Cell {
        if a.is_null(i) {
            return Cell::Null;
        }
        match a.data_type() {
            DataType::Float32 | DataType::Float64 => {
                let f = cast(a, &DataType::Float64).unwrap();
                Cell::Float(f.as_primitive::<Float64Type>().value(i).to_bits())
            }
            DataType::Utf8 => Cell::Text(a.as_string::<i32>().value(i).to_string()),
            DataType::Boolean => Cell::Bool(a.as_boolean().value(i)),
            DataType::Timestamp(TimeUnit::Nanosecond, None) | DataType::Int64 => {
                let n = cast(a, &DataType::Int64).unwrap();
                Cell::Int(n.as_primitive::<Int64Type>().value(i))
            }
            t if t.is_integer() => {
                let n = cast(a, &DataType::Int64).unwrap();
                Cell::Int(n.as_primitive::<Int64Type>().value(i))
            }
            other => panic!("no comparison for {other}"),
        }
    }

    fn order(&self, other: &Cell) -> Ordering {
        match (self, other) {
            (Cell::Float(a), Cell::Float(b)) => f64::from_bits(*a).total_cmp(&f64::from_bits(*b)),
            (Cell::Int(a), Cell::Int(b)) => a.cmp(b),
            (Cell::Text(a), Cell::Text(b)) => a.cmp(b),
            _ => format!("{self:?}").cmp(&format!("{other:?}")),
        }
    }
}

/// Rows sorted by their dimension cells (the first `dims` columns).
fn sorted(mut rows: Vec<Vec<Cell>>, dims: usize) -> Vec<Vec<Cell>> {
    rows.sort_by(|a, b| {
        (0..dims)
            .map(|i| a[i].order(&b[i]))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    });
    rows
}

#[tokio::test]
async fn xarray_datasets_read_back_as_to_dataframe_shows_them() {
    let expected = expected();
    for (name, dims) in [
        ("ocean_v3", 3),
        ("ocean_v2", 3),
        ("stations_v3", 2),
        ("stations_v2", 2),
    ] {
        let want = &expected[name];
        let batch = table(&format!("{DIR}/{name}.zarr")).await;
        let columns: Vec<String> = want["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        // The columns of to_dataframe, in its order, then the group's attributes.
        let ours: Vec<String> = batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(ours[..columns.len()], columns[..], "{name}");
        assert_eq!(ours.last().unwrap(), "__global_attrs__", "{name}");
        let rows = want["rows"].as_u64().unwrap() as usize;
        assert_eq!(batch.num_rows(), rows, "{name}");

        let expected_rows: Vec<Vec<Cell>> = (0..rows)
            .map(|r| {
                columns
                    .iter()
                    .map(|c| {
                        let dtype = want["dtypes"][c].as_str().unwrap();
                        Cell::from_json(&want["values"][c][r], dtype)
                    })
                    .collect()
            })
            .collect();
        let our_rows: Vec<Vec<Cell>> = (0..rows)
            .map(|r| {
                (0..columns.len())
                    .map(|c| Cell::from_arrow(batch.column(c), r))
                    .collect()
            })
            .collect();
        let (ours, theirs) = (sorted(our_rows, dims), sorted(expected_rows, dims));
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a, b, "{name}: row {i} (sorted by dimensions)");
        }

        // __global_attrs__ holds the group's attributes.
        let attrs = batch.column(batch.num_columns() - 1).as_struct();
        for (key, value) in want["attrs"].as_object().unwrap() {
            let child = attrs.column_by_name(key).unwrap();
            let cell = Cell::from_arrow(child, 0);
            let expected = match value {
                Value::Number(n) if n.is_f64() => Cell::Float(n.as_f64().unwrap().to_bits()),
                other => Cell::from_json(other, ""),
            };
            assert_eq!(cell, expected, "{name}: attribute {key}");
        }
    }
}

#[tokio::test]
async fn a_struct_variable_of_a_zarr_python_group_contributes_its_fields() {
    let want = &expected()["struct_group"];
    let ctx = new_session_context();
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t STORED AS ZARR LOCATION '{DIR}/struct_group.zarr'"
    ))
    .await
    .unwrap();
    let batches = ctx
        .sql("SELECT step, u, v, quality, __global_attrs__.id AS id FROM t ORDER BY step")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let batch = concat_batches(&batches[0].schema(), &batches).unwrap();
    for (c, key) in ["step", "u", "v", "quality"].iter().enumerate() {
        let dtype = if c == 1 || c == 2 { "float" } else { "int" };
        let want: Vec<Cell> = want[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| Cell::from_json(v, dtype))
            .collect();
        let ours: Vec<Cell> = (0..batch.num_rows())
            .map(|r| Cell::from_arrow(batch.column(c), r))
            .collect();
        assert_eq!(ours, want, "{key}");
    }
    assert_eq!(
        Cell::from_arrow(batch.column(4), 0),
        Cell::Text(want["attrs"]["id"].as_str().unwrap().to_string())
    );
}
