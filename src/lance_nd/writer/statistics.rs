//! The optional `__stats__:<array>` columns: `{min, max}` of each row's values, ignoring nulls,
//! which let filters on array values skip rows. NaN counts as the largest value, as Arrow and
//! DataFusion order floats (`NaN > 1` is true there): a row holding NaN has max NaN, so
//! `v > x` never skips it; min is NaN only when every value is.

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, AsArray, Float64Array, StructArray};
use arrow::compute::kernels::cast::cast;
use arrow::datatypes::{DataType, Field, Fields};

use super::cast::Casts;
use super::invalid;
use crate::error::{Error, Result};
use crate::nd::casting::is_safe_widening;
use crate::nd::NdRecordBatch;

pub(crate) fn stats_field(name: &str, t: &DataType) -> Field {
    let children = Fields::from(vec![
        Field::new("min", t.clone(), true),
        Field::new("max", t.clone(), true),
    ]);
    Field::new(name, DataType::Struct(children), true)
}

/// `{min, max}` of each row's values in Arrow's float order (NaN largest), ignoring nulls;
/// NULL where the row lacks the array or has no value.
/// An existing table's `__stats__:<array>` column may have been written by anyone: it must be
/// `{min: T, max: T}` with T a number type that `values` (the write's value type for the array)
/// convert to without loss, or the skipping it drives would be wrong.
pub(crate) fn check_stats_field(
    uri: &str,
    field: &Field,
    array: &str,
    values: &DataType,
) -> Result<()> {
    let shape_error = || {
        invalid(
            uri,
            format!(
                "column {} is {}, not a struct {{min, max}} of the array's number type",
                field.name(),
                field.data_type()
            ),
        )
    };
    let DataType::Struct(children) = field.data_type() else {
        return Err(shape_error());
    };
    let [min_field, max_field] = children.iter().collect::<Vec<_>>()[..] else {
        return Err(shape_error());
    };
    let t = min_field.data_type();
    if min_field.name() != "min"
        || max_field.name() != "max"
        || max_field.data_type() != t
        || !(t.is_integer() || t.is_floating())
    {
        return Err(shape_error());
    }
    if values != t && !is_safe_widening(values, t) {
        return Err(invalid(
            uri,
            format!(
                "column {} holds {t}, but array '{array}' has {values} values",
                field.name()
            ),
        ));
    }
    Ok(())
}

pub(crate) fn stats_column(
    uri: &str,
    field: &Field,
    batches: &[NdRecordBatch],
    array: &str,
    casts: &Casts,
) -> Result<ArrayRef> {
    let present = batches.iter().any(|b| b.array(array).is_some());
    let children = match field.data_type() {
        DataType::Struct(children) if children.len() == 2 => children,
        // A column of another shape for an array this write does not touch: no statistics.
        _ if !present => return Ok(new_null_array(field.data_type(), batches.len())),
        _ => {
            return Err(Error::Internal(format!(
                "{}: unchecked statistics column",
                field.name()
            )))
        }
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
    for v in floats.iter().flatten() {
        lo = Some(lo.map_or(v, |l| if l.total_cmp(&v).is_gt() { v } else { l }));
        hi = Some(hi.map_or(v, |h| if h.total_cmp(&v).is_lt() { v } else { h }));
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
