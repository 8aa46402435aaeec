//! The optional `__stats__:<array>` columns: `{min, max}` of each row's values, ignoring nulls
//! and NaN, which let filters on array values skip rows.

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, AsArray, Float64Array, StructArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, Fields};

use super::casting::Casts;
use super::invalid;
use crate::error::Result;
use crate::nd::NdRecordBatch;

pub(crate) fn stats_field(name: &str, t: &DataType) -> Field {
    let children = Fields::from(vec![
        Field::new("min", t.clone(), true),
        Field::new("max", t.clone(), true),
    ]);
    Field::new(name, DataType::Struct(children), true)
}

/// `{min, max}` of each row's values, ignoring nulls and NaN; NULL where the row lacks the
/// array or has no such value.
pub(crate) fn stats_column(
    uri: &str,
    field: &Field,
    batches: &[NdRecordBatch],
    array: &str,
    casts: &Casts,
) -> Result<ArrayRef> {
    let DataType::Struct(children) = field.data_type() else {
        return Ok(new_null_array(field.data_type(), batches.len()));
    };
    let t = children[0].data_type().clone();
    let mut mins = Vec::with_capacity(batches.len());
    let mut maxs = Vec::with_capacity(batches.len());
    for b in batches {
        let (lo, hi) = match b.array(array) {
            Some(a) => {
                let values = if a.values().data_type() != &t && casts.contains_key(array) {
                    cast(a.values(), &t).map_err(|e| invalid(uri, e.to_string()))?
                } else {
                    Arc::clone(a.values())
                };
                min_max(uri, &values)?
            }
            None => (None, None),
        };
        mins.push(lo);
        maxs.push(hi);
    }
    let to_t = |v: Vec<Option<f64>>| -> Result<ArrayRef> {
        cast(&(Arc::new(Float64Array::from(v)) as ArrayRef), &t)
            .map_err(|e| invalid(uri, e.to_string()))
    };
    // Integers survive the f64 round trip up to 2^53; wider values get exact min/max below.
    let (min, max) = if t.is_integer() {
        (
            int_extreme(uri, batches, array, &t, true)?,
            int_extreme(uri, batches, array, &t, false)?,
        )
    } else {
        (to_t(mins)?, to_t(maxs)?)
    };
    Ok(Arc::new(StructArray::new(
        children.clone(),
        vec![min, max],
        None,
    )))
}

fn min_max(uri: &str, values: &ArrayRef) -> Result<(Option<f64>, Option<f64>)> {
    let floats = cast(values, &DataType::Float64).map_err(|e| invalid(uri, e.to_string()))?;
    let floats = floats.as_primitive::<arrow::datatypes::Float64Type>();
    let mut lo: Option<f64> = None;
    let mut hi: Option<f64> = None;
    for v in floats.iter().flatten().filter(|v| !v.is_nan()) {
        lo = Some(lo.map_or(v, |l| l.min(v)));
        hi = Some(hi.map_or(v, |h| h.max(v)));
    }
    Ok((lo, hi))
}

/// Exact integer min or max per row, computed on Int64 or UInt64 (no f64 rounding).
fn int_extreme(
    uri: &str,
    batches: &[NdRecordBatch],
    array: &str,
    t: &DataType,
    min: bool,
) -> Result<ArrayRef> {
    use arrow::datatypes::{Int64Type, UInt64Type};
    let unsigned = matches!(
        t,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64
    );
    let joined = if unsigned {
        extremes::<UInt64Type>(uri, batches, array, min)?
    } else {
        extremes::<Int64Type>(uri, batches, array, min)?
    };
    cast(&joined, t).map_err(|e| invalid(uri, e.to_string()))
}

fn extremes<T: arrow::datatypes::ArrowNumericType>(
    uri: &str,
    batches: &[NdRecordBatch],
    array: &str,
    min: bool,
) -> Result<ArrayRef> {
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        out.push(match b.array(array) {
            None => None,
            Some(a) => {
                let v = cast(a.values(), &T::DATA_TYPE).map_err(|e| invalid(uri, e.to_string()))?;
                let v = v.as_primitive::<T>();
                if min {
                    arrow::compute::min(v)
                } else {
                    arrow::compute::max(v)
                }
            }
        });
    }
    Ok(Arc::new(
        out.into_iter().collect::<arrow::array::PrimitiveArray<T>>(),
    ))
}
