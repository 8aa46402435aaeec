//! `write_nd_batches` and `read_nd_batches` for Python: nd record batches cross the boundary
//! as plain tuples of pyarrow values (the Arrow C data interface, no copy of the values), and
//! `ndfusion/nd_batches.py` turns them into and out of `xarray.Dataset`s.
//!
//! One batch is `(arrays, global_attrs)`: `arrays` a list of
//! `(name, values, dims, shape, attrs)` with `values` a flat pyarrow array in C order, `dims`
//! the dimension names, `shape` their sizes and `attrs` a one-row `pyarrow.RecordBatch` of
//! attributes (or `None`); `global_attrs` likewise.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_pyarrow::{FromPyArrow, ToPyArrow};
use datafusion::arrow::array::{make_array, ArrayData, ArrayRef, RecordBatch};
use ndfusion::{Dim, NdArrowArray, NdRecordBatch, ReadOptions, WriteOptions};
use pyo3::prelude::*;

use crate::{blocking, error};

/// One nd array as it crosses: name, flat values, dimension names, sizes, attributes.
type PyNdArray<'py> = (
    String,
    Bound<'py, PyAny>,
    Vec<String>,
    Vec<usize>,
    Option<Bound<'py, PyAny>>,
);
/// One nd record batch as it crosses: its arrays and its global attributes.
type PyNdBatch<'py> = (Vec<PyNdArray<'py>>, Option<Bound<'py, PyAny>>);

/// Attributes from a one-row record batch: one Arrow value per column (`NdArrowArray` and
/// `NdRecordBatch` check that each is one value).
fn attrs_from_py(batch: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, ArrayRef)>> {
    let Some(batch) = batch else {
        return Ok(Vec::new());
    };
    let batch = RecordBatch::from_pyarrow_bound(batch)?;
    let schema = batch.schema();
    Ok((schema.fields().iter())
        .zip(batch.columns())
        .map(|(f, c)| (f.name().clone(), Arc::clone(c)))
        .collect())
}

/// Attributes as a one-row record batch, or `None` when there are none.
fn attrs_to_py<'py>(
    py: Python<'py>,
    attrs: &[(String, ArrayRef)],
) -> PyResult<Option<Bound<'py, PyAny>>> {
    if attrs.is_empty() {
        return Ok(None);
    }
    let batch = RecordBatch::try_from_iter(attrs.iter().map(|(k, v)| (k.as_str(), Arc::clone(v))))
        .map_err(error)?;
    Ok(Some(batch.to_pyarrow(py)?))
}

fn batch_from_py(index: usize, (arrays, globals): &PyNdBatch<'_>) -> PyResult<NdRecordBatch> {
    let context = |name: &str| format!("batch {index}, array '{name}'");
    let arrays = (arrays.iter())
        .map(|(name, values, dims, shape, attrs)| -> PyResult<_> {
            if dims.len() != shape.len() {
                return Err(error(format!(
                    "{}: {} dimension names for {} sizes",
                    context(name),
                    dims.len(),
                    shape.len()
                )));
            }
            let values = make_array(ArrayData::from_pyarrow_bound(values)?);
            let dims = (dims.iter().zip(shape))
                .map(|(d, &s)| Dim::new(d.as_str(), s))
                .collect();
            let attrs = attrs_from_py(attrs.as_ref())?;
            let array = NdArrowArray::try_new(values, dims, attrs)
                .map_err(|e| error(format!("{}: {e}", context(name))))?;
            Ok((name.clone(), array))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let globals = attrs_from_py(globals.as_ref())?;
    NdRecordBatch::try_new(arrays, globals).map_err(|e| error(format!("batch {index}: {e}")))
}

pub(crate) fn batch_to_py<'py>(py: Python<'py>, batch: &NdRecordBatch) -> PyResult<PyNdBatch<'py>> {
    let arrays = (batch.arrays().iter())
        .map(|(name, array)| -> PyResult<PyNdArray<'py>> {
            Ok((
                name.clone(),
                array.values().to_data().to_pyarrow(py)?,
                array.dims().iter().map(|d| d.name.clone()).collect(),
                array.dims().iter().map(|d| d.size).collect(),
                attrs_to_py(py, array.attrs())?,
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok((arrays, attrs_to_py(py, batch.global_attrs())?))
}

/// Appends `batches` to the lance-nd table at `location` in one commit, as the Rust
/// `write_nd_batches` does; `options`: `casting`, `statistics` and the storage settings.
#[pyfunction]
#[pyo3(signature = (location, batches, options=None))]
pub(crate) fn write_nd_batches(
    py: Python<'_>,
    location: String,
    batches: Vec<PyNdBatch<'_>>,
    options: Option<HashMap<String, String>>,
) -> PyResult<()> {
    let options = WriteOptions::from_map(&options.unwrap_or_default()).map_err(error)?;
    let batches = (batches.iter().enumerate())
        .map(|(i, b)| batch_from_py(i, b))
        .collect::<PyResult<Vec<_>>>()?;
    // A write stopped by Ctrl-C is dropped before its one commit: the table is as it was.
    let write = async move { ndfusion::write_nd_batches(&location, &batches, &options).await };
    blocking(py, write)
}

/// The rows of the lance-nd table at `location` that pass `filter` (Lance SQL, such as
/// `__global_attrs__.id = 'a'`), as batches in the form above; `options`: `arrays` and the
/// storage settings.
#[pyfunction]
#[pyo3(signature = (location, filter=None, options=None))]
pub(crate) fn read_nd_batches<'py>(
    py: Python<'py>,
    location: String,
    filter: Option<String>,
    options: Option<HashMap<String, String>>,
) -> PyResult<Vec<PyNdBatch<'py>>> {
    let mut options = ReadOptions::from_map(&options.unwrap_or_default()).map_err(error)?;
    if let Some(filter) = filter {
        options = options.with_filter(filter);
    }
    let read = async move { ndfusion::read_nd_batches(&location, &options).await };
    let batches = blocking(py, read)?;
    batches.iter().map(|b| batch_to_py(py, b)).collect()
}
