//! Missing values (`_FillValue`, `missing_value`): read from attributes into the stored type and
//! matched exactly there (integers as integers, NaN as NaN, bytes and strings as themselves).

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Datum};
use arrow::buffer::BooleanBuffer;
use arrow::compute::kernels::cmp;
use arrow::datatypes::{DataType, Float16Type, Float32Type, Float64Type};
use base64::Engine;
use datafusion::common::ScalarValue;
use serde_json::Value;

use super::CfError;

/// The values an attribute holds, as written: numbers, `"NaN"` / `"Infinity"`, base64 of the
/// value's bytes (xarray writes float fill values so; Zarr v2 writes byte fill values so), text,
/// or a list of them. `stored` decides how base64 and text are read.
pub(super) fn attribute_values(
    value: &Value,
    stored: &DataType,
) -> Result<Vec<ScalarValue>, CfError> {
    match value {
        Value::Null => Ok(vec![]),
        Value::Array(items) => items.iter().map(|v| one_value(v, stored)).collect(),
        single => Ok(vec![one_value(single, stored)?]),
    }
}

fn one_value(value: &Value, stored: &DataType) -> Result<ScalarValue, CfError> {
    match value {
        Value::Number(n) => Ok(if let Some(i) = n.as_i64() {
            ScalarValue::Int64(Some(i))
        } else if let Some(u) = n.as_u64() {
            ScalarValue::UInt64(Some(u))
        } else {
            ScalarValue::Float64(n.as_f64())
        }),
        Value::String(s) if *stored == DataType::Utf8 => Ok(ScalarValue::Utf8(Some(s.clone()))),
        Value::String(s) => match s.as_str() {
            "NaN" | "nan" => Ok(ScalarValue::Float64(Some(f64::NAN))),
            "Infinity" | "inf" => Ok(ScalarValue::Float64(Some(f64::INFINITY))),
            "-Infinity" | "-inf" => Ok(ScalarValue::Float64(Some(f64::NEG_INFINITY))),
            b64 => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| {
                        CfError::Rule(format!("'{s}' is neither a number nor base64: {e}"))
                    })?;
                from_bytes(&bytes, stored).ok_or_else(|| {
                    CfError::Rule(format!(
                        "{} bytes of base64 are not a {stored} value",
                        bytes.len()
                    ))
                })
            }
        },
        other => Err(CfError::Rule(format!("{other} is not a number"))),
    }
}

/// A little-endian value of `bytes.len()` bytes: floats by width, integers as `stored` is
/// signed or not, bytes as themselves (trailing NULs stripped, as NumPy compares them).
fn from_bytes(bytes: &[u8], stored: &DataType) -> Option<ScalarValue> {
    if *stored == DataType::Binary {
        let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        return Some(ScalarValue::Binary(Some(bytes[..end].to_vec())));
    }
    let signed = !matches!(
        stored,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64
    );
    let b = bytes;
    Some(match (b.len(), stored.is_floating(), signed) {
        (8, true, _) => ScalarValue::Float64(Some(f64::from_le_bytes(b.try_into().ok()?))),
        (4, true, _) => ScalarValue::Float32(Some(f32::from_le_bytes(b.try_into().ok()?))),
        (8, false, true) => ScalarValue::Int64(Some(i64::from_le_bytes(b.try_into().ok()?))),
        (8, false, false) => ScalarValue::UInt64(Some(u64::from_le_bytes(b.try_into().ok()?))),
        (4, false, true) => ScalarValue::Int32(Some(i32::from_le_bytes(b.try_into().ok()?))),
        (4, false, false) => ScalarValue::UInt32(Some(u32::from_le_bytes(b.try_into().ok()?))),
        (2, false, true) => ScalarValue::Int16(Some(i16::from_le_bytes(b.try_into().ok()?))),
        (2, false, false) => ScalarValue::UInt16(Some(u16::from_le_bytes(b.try_into().ok()?))),
        (1, false, true) => ScalarValue::Int8(Some(i8::from_le_bytes(b.try_into().ok()?))),
        (1, false, false) => ScalarValue::UInt8(Some(b[0])),
        _ => return None,
    })
}

/// `value` in type `t` when it holds there exactly (a missing value the type cannot hold
/// matches nothing: `None`). NaN stays NaN in float types.
pub(super) fn exactly_as(value: &ScalarValue, t: &DataType) -> Option<ScalarValue> {
    if value.data_type() == *t {
        return Some(value.clone());
    }
    // Text and bytes match only their own kind (a fill 0 on strings masks no "0", as in
    // xarray, where the string never equals the number).
    let text = |t: &DataType| matches!(t, DataType::Utf8 | DataType::Binary);
    if text(t) || text(&value.data_type()) {
        return None;
    }
    let cast = value.cast_to(t).ok()?;
    if cast.is_null() {
        return None;
    }
    if is_nan(value) {
        return is_nan(&cast).then_some(cast);
    }
    let back = cast.cast_to(&value.data_type()).ok()?;
    (back == *value).then_some(cast)
}

pub(super) fn is_nan(v: &ScalarValue) -> bool {
    match v {
        ScalarValue::Float16(Some(x)) => x.is_nan(),
        ScalarValue::Float32(Some(x)) => x.is_nan(),
        ScalarValue::Float64(Some(x)) => x.is_nan(),
        _ => false,
    }
}

/// True where `values` equals one of `missing` (each already of the values' type).
pub(super) fn missing_mask(
    values: &ArrayRef,
    missing: &[ScalarValue],
) -> Result<Option<BooleanArray>, CfError> {
    let mut mask: Option<BooleanBuffer> = None;
    for m in missing {
        let hits = if is_nan(m) {
            match nan_mask(values) {
                Some(hits) => hits,
                None => continue,
            }
        } else {
            let scalar = m.to_scalar()?;
            cmp::eq(values, &scalar as &dyn Datum)?
        };
        let hits = match hits.nulls() {
            Some(nulls) => hits.values() & nulls.inner(),
            None => hits.values().clone(),
        };
        mask = Some(match mask {
            Some(m) => &m | &hits,
            None => hits,
        });
    }
    Ok(mask.map(|m| BooleanArray::new(m, None)))
}

/// Where a float column is NaN; `None` for other types.
fn nan_mask(values: &ArrayRef) -> Option<BooleanArray> {
    Some(match values.data_type() {
        DataType::Float16 => {
            BooleanArray::from_unary(values.as_primitive::<Float16Type>(), |x| x.is_nan())
        }
        DataType::Float32 => {
            BooleanArray::from_unary(values.as_primitive::<Float32Type>(), f32::is_nan)
        }
        DataType::Float64 => {
            BooleanArray::from_unary(values.as_primitive::<Float64Type>(), f64::is_nan)
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn integer_fill_values_match_exactly_in_the_stored_type() {
        let big = attribute_values(&json!(9007199254740993i64), &DataType::Int64).unwrap();
        let big = exactly_as(&big[0], &DataType::Int64).unwrap();
        assert_eq!(big, ScalarValue::Int64(Some(9007199254740993)));
        let u = attribute_values(&json!(18446744073709551614u64), &DataType::UInt64).unwrap();
        assert_eq!(
            exactly_as(&u[0], &DataType::UInt64),
            Some(ScalarValue::UInt64(Some(18446744073709551614)))
        );
        // A fill an int16 cannot hold matches nothing; an integral float matches.
        assert_eq!(
            exactly_as(&ScalarValue::Int64(Some(70000)), &DataType::Int16),
            None
        );
        assert_eq!(
            exactly_as(&ScalarValue::Float64(Some(-999.0)), &DataType::Int32),
            Some(ScalarValue::Int32(Some(-999)))
        );
        assert_eq!(
            exactly_as(&ScalarValue::Float64(Some(0.5)), &DataType::Int32),
            None
        );
    }

    #[test]
    fn byte_and_text_fill_values() {
        let b = attribute_values(&json!("Yg=="), &DataType::Binary).unwrap();
        assert_eq!(b, vec![ScalarValue::Binary(Some(b"b".to_vec()))]);
        let b = attribute_values(&json!("LS0tAA=="), &DataType::Binary).unwrap();
        assert_eq!(b, vec![ScalarValue::Binary(Some(b"---".to_vec()))]);
        let s = attribute_values(&json!("n/a"), &DataType::Utf8).unwrap();
        assert_eq!(s, vec![ScalarValue::Utf8(Some("n/a".into()))]);
        let zero = attribute_values(&json!(0), &DataType::Utf8).unwrap();
        assert_eq!(exactly_as(&zero[0], &DataType::Utf8), None);
        let list = attribute_values(&json!([-999, -998]), &DataType::Int32).unwrap();
        assert_eq!(list.len(), 2);
        assert!(attribute_values(&json!({"a": 1}), &DataType::Int32).is_err());
    }
}
