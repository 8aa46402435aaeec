//! Making the type changes a write may make: an array's values and attributes cast to the
//! table's types, each checked against the write's [`Casting`].

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::compute::kernels::cast::{can_cast_types, cast_with_options, CastOptions};
use arrow::datatypes::{DataType, Fields};
use arrow::error::ArrowError;

use super::invalid;
use crate::error::{Error, Result};
use crate::nd::casting::{is_safe_widening, Casting};
use crate::nd::NdArrowArray;

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
fn strict_cast(values: &ArrayRef, to: &DataType) -> std::result::Result<ArrayRef, ArrowError> {
    let options = CastOptions {
        safe: false,
        ..CastOptions::default()
    };
    cast_with_options(values, to, &options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_casts_refuse_values_that_do_not_fit() {
        let values: ArrayRef = Arc::new(arrow::array::Int64Array::from(vec![1, 300]));
        let err = strict_cast(&values, &DataType::Int8)
            .unwrap_err()
            .to_string();
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
