//! Which type changes a write may make, and making them: an array's values and attributes
//! cast to the table's types.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::kernels::cast::{can_cast_types, cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Fields};

use super::invalid;
use crate::error::{Error, Result};
use crate::nd::NdArrowArray;

/// What a write may do when an array's values have another type than the table's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Casting {
    /// Refuse (the default).
    #[default]
    No,
    /// Widen without loss: int to a wider int, uint to a wider int or uint, float16/32 to a
    /// wider float, int8/16/32 and uint8/16/32 to float64.
    Safe,
    /// Any cast Arrow can do, lossy ones included (floats truncated to integers, precision
    /// dropped); a value the table's type cannot hold (300 into Int8) is an error naming the
    /// array, never a NULL.
    Unsafe,
}

/// Per array name: the type its values (and attributes) must be cast to, when they differ.
pub(crate) type Casts = HashMap<String, DataType>;

pub(crate) fn check_cast(
    what: &str,
    from: &DataType,
    to: &DataType,
    casting: Casting,
) -> Result<()> {
    let allowed = match casting {
        Casting::No => false,
        Casting::Safe => is_safe_widening(from, to),
        Casting::Unsafe => can_cast_types(from, to),
    };
    if allowed {
        Ok(())
    } else {
        Err(Error::TypeMismatch {
            array: what.to_string(),
            table: to.clone(),
            write: from.clone(),
            casting,
        })
    }
}

/// Casts that never lose information.
pub(crate) fn is_safe_widening(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let rank_int = |t: &DataType| match t {
        Int8 => Some(1),
        Int16 => Some(2),
        Int32 => Some(3),
        Int64 => Some(4),
        _ => None,
    };
    let rank_uint = |t: &DataType| match t {
        UInt8 => Some(1),
        UInt16 => Some(2),
        UInt32 => Some(3),
        UInt64 => Some(4),
        _ => None,
    };
    match (from, to) {
        (a, b) if rank_int(a).is_some() && rank_int(b).is_some() => rank_int(a) < rank_int(b),
        (a, b) if rank_uint(a).is_some() && rank_uint(b).is_some() => rank_uint(a) < rank_uint(b),
        (a, b) if rank_uint(a).is_some() && rank_int(b).is_some() => rank_uint(a) < rank_int(b),
        (Float16, Float32 | Float64) | (Float32, Float64) => true,
        (Int8 | Int16 | UInt8 | UInt16, Float32) => true,
        (Int8 | Int16 | Int32 | UInt8 | UInt16 | UInt32, Float64) => true,
        _ => false,
    }
}

pub(crate) fn cast_array(
    uri: &str,
    name: &str,
    array: &NdArrowArray,
    value_type: &DataType,
    attrs: &Fields,
    casts: &Casts,
) -> Result<NdArrowArray> {
    let values = if array.values().data_type() != value_type {
        if !casts.contains_key(name) {
            return Err(invalid(
                uri,
                format!(
                    "array '{name}': values are {}, the table holds {value_type}",
                    array.values().data_type()
                ),
            ));
        }
        strict_cast(array.values(), value_type)
            .map_err(|e| invalid(uri, format!("array '{name}': {e}")))?
    } else {
        Arc::clone(array.values())
    };
    let attrs = cast_attrs(uri, array.attrs(), attrs)?;
    NdArrowArray::try_new(values, array.dims().to_vec(), attrs)
        .map_err(|e| invalid(uri, e.in_array(name).to_string()))
}

/// Attribute values cast to the table's key types (checked by `plan_schema`).
pub(crate) fn cast_attrs(
    uri: &str,
    attrs: &[(String, ArrayRef)],
    fields: &Fields,
) -> Result<Vec<(String, ArrayRef)>> {
    attrs
        .iter()
        .map(|(k, v)| match fields.find(k) {
            Some((_, f)) if f.data_type() != v.data_type() => strict_cast(v, f.data_type())
                .map(|c| (k.clone(), c))
                .map_err(|e| invalid(uri, format!("attribute '{k}': {e}"))),
            _ => Ok((k.clone(), Arc::clone(v))),
        })
        .collect()
}

/// Arrow's cast, failing where a value does not fit (its default turns those into NULL).
fn strict_cast(values: &ArrayRef, to: &DataType) -> std::result::Result<ArrayRef, String> {
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(values, to, &options).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_casts_refuse_values_that_do_not_fit() {
        let values: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![1, 300]));
        let err = strict_cast(&values, &DataType::Int8).unwrap_err();
        assert!(err.contains("300"), "{err}");
        let floats: ArrayRef = Arc::new(arrow::array::Float64Array::from(vec![1.75, -2.5]));
        let ints = strict_cast(&floats, &DataType::Int32).unwrap();
        assert_eq!(ints.null_count(), 0);
    }

    #[test]
    fn safe_widening_is_lossless_only() {
        assert!(is_safe_widening(&DataType::Int32, &DataType::Int64));
        assert!(is_safe_widening(&DataType::UInt32, &DataType::Int64));
        assert!(is_safe_widening(&DataType::Float32, &DataType::Float64));
        assert!(is_safe_widening(&DataType::Int32, &DataType::Float64));
        assert!(!is_safe_widening(&DataType::Int64, &DataType::Float64));
        assert!(!is_safe_widening(&DataType::Int64, &DataType::Int32));
        assert!(!is_safe_widening(&DataType::Int64, &DataType::UInt64));
        assert!(!is_safe_widening(&DataType::Float64, &DataType::Float32));
    }
}
