//! Write a small lance-nd table in three appends, then read it back.
//!
//!     cargo run --release --example write_lance_nd -- /tmp/demo.lance
//!
//! The second append adds an array (`salinity`) and an attribute key (`units`), the third a
//! global attribute key (`group`): the table schema grows each time.

use std::sync::Arc;

use arrow::array::{ArrayRef, Float32Array, Float64Array, StringArray};
use ndfusion::{read_nd_batches, write_nd_batches, ReadOptions, WriteOptions};
use ndfusion::{Dim, NdArrowArray, NdRecordBatch};

fn text(s: &str) -> ArrayRef {
    Arc::new(StringArray::from(vec![s]))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: write_lance_nd PATH")?;
    if std::path::Path::new(&path).exists() {
        return Err(format!("{path} exists; give a new path").into());
    }
    let options = WriteOptions::new();

    // 1. A 2 x 3 temperature grid with an x coordinate.
    let temperature = NdArrowArray::try_new(
        Arc::new(Float64Array::from(vec![11.0, 11.5, 12.0, 13.0, 13.5, 14.0])),
        vec![Dim::new("x", 2), Dim::new("y", 3)],
        vec![],
    )?;
    let x = NdArrowArray::try_new(
        Arc::new(Float64Array::from(vec![0.0, 10.0])),
        vec![Dim::new("x", 2)],
        vec![],
    )?;
    let first = NdRecordBatch::try_new(
        vec![("temperature".into(), temperature), ("x".into(), x)],
        vec![("id".into(), text("a"))],
    )?;
    write_nd_batches(&path, &[first], &options).await?;

    // 2. A new array and a new attribute key.
    let temperature = NdArrowArray::try_new(
        Arc::new(Float64Array::from(vec![15.0, 15.25])),
        vec![Dim::new("x", 2)],
        vec![("units".into(), text("degC"))],
    )?;
    let salinity = NdArrowArray::try_new(
        Arc::new(Float32Array::from(vec![35.1, 35.2])),
        vec![Dim::new("x", 2)],
        vec![],
    )?;
    let second = NdRecordBatch::try_new(
        vec![
            ("temperature".into(), temperature),
            ("salinity".into(), salinity),
        ],
        vec![("id".into(), text("b"))],
    )?;
    write_nd_batches(&path, &[second], &options).await?;

    // 3. A new global attribute key.
    let scalar = NdArrowArray::try_new(Arc::new(Float64Array::from(vec![9.5])), vec![], vec![])?;
    let third = NdRecordBatch::try_new(
        vec![("temperature".into(), scalar)],
        vec![("id".into(), text("c")), ("group".into(), text("g1"))],
    )?;
    write_nd_batches(&path, &[third], &options).await?;

    for (row, batch) in read_nd_batches(&path, &ReadOptions::new())
        .await?
        .iter()
        .enumerate()
    {
        let globals: Vec<String> = batch
            .global_attrs()
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    arrow::util::display::array_value_to_string(v, 0).unwrap_or_default()
                )
            })
            .collect();
        println!(
            "row {row}: grid {:?}, global attributes [{}]",
            batch.grid(),
            globals.join(", ")
        );
        println!(
            "{}",
            arrow::util::pretty::pretty_format_batches(&[batch.materialize()?])?
        );
    }
    Ok(())
}
