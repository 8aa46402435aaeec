//! A table's projection: the projected schema and the per-column sources it keeps.

use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::Result;

/// The projected schema and the projected per-column sources of a table whose columns come
/// from `sources` (all of them when `projection` is `None`).
pub(crate) fn project_columns<T: Clone>(
    schema: &Schema,
    sources: &[T],
    projection: Option<&Vec<usize>>,
) -> Result<(SchemaRef, Vec<T>)> {
    let indices: Vec<usize> = match projection {
        Some(p) => p.clone(),
        None => (0..sources.len()).collect(),
    };
    let projected = Arc::new(schema.project(&indices)?);
    Ok((
        projected,
        indices.iter().map(|&i| sources[i].clone()).collect(),
    ))
}
