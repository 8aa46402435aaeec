//! Zarr v3 fill values, encoded into the element bytes that missing chunks read as.
//!
//! The bytes are in the stored byte order, the same order the decoder reads chunks in, so a
//! missing chunk and a stored chunk take one decoding path.

use base64::Engine;
use serde_json::Value;

use crate::zarr::metadata::element::{ByteOrder, ElementType, ScalarKind};
use crate::zarr::metadata::problem::MetadataProblem;

/// How one scalar's fill value is wrong ("must be an integer ..."), completed into a
/// [`MetadataProblem`] by the field that holds it.
#[derive(Debug)]
struct Wrong(String);

impl std::fmt::Display for Wrong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Encodes the JSON `fill_value` of an array with element type `ty`.
/// Errors name the field at fault; the caller names the document ([`MetadataProblem::at`]).
pub(crate) fn encode_fill_value(
    ty: &ElementType,
    value: &Value,
) -> Result<Vec<u8>, MetadataProblem> {
    let mut out = Vec::with_capacity(ty.size());
    encode_into(ty, value, "", &mut out)?;
    debug_assert_eq!(out.len(), ty.size());
    Ok(out)
}

fn encode_into(
    ty: &ElementType,
    value: &Value,
    path: &str,
    out: &mut Vec<u8>,
) -> Result<(), MetadataProblem> {
    match ty {
        ElementType::Struct(fields) => {
            let Value::Object(map) = value else {
                return Err(MetadataProblem::Invalid(format!(
                    "fill value{} must be an object with one entry per field, found {value}",
                    at(path)
                )));
            };
            for field in fields {
                let child = join(path, &field.name);
                let v = map.get(&field.name).ok_or_else(|| {
                    MetadataProblem::Invalid(format!("fill value is missing field '{child}'"))
                })?;
                encode_into(&field.ty, v, &child, out)?;
            }
            if let Some(extra) = map.keys().find(|k| !fields.iter().any(|f| &f.name == *k)) {
                return Err(MetadataProblem::Invalid(format!(
                    "fill value has an entry '{}' that is not a field",
                    join(path, extra)
                )));
            }
            Ok(())
        }
        ElementType::FixedArray { item, len } => {
            let items = value
                .as_array()
                .filter(|a| a.len() == *len)
                .ok_or_else(|| {
                    MetadataProblem::Invalid(format!(
                        "fill value{} must be a list of {len} values",
                        at(path)
                    ))
                })?;
            items
                .iter()
                .try_for_each(|v| encode_into(item, v, path, out))
        }
        ElementType::Scalar { kind, order } => encode_scalar(kind, *order, value, out)
            .map_err(|why| MetadataProblem::Invalid(format!("fill value{} {why}", at(path)))),
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!(" of field '{path}'")
    }
}

macro_rules! put {
    ($out:expr, $order:expr, $v:expr) => {
        match $order {
            ByteOrder::Little => $out.extend_from_slice(&$v.to_le_bytes()),
            ByteOrder::Big => $out.extend_from_slice(&$v.to_be_bytes()),
        }
    };
}

fn encode_scalar(
    kind: &ScalarKind,
    order: ByteOrder,
    v: &Value,
    out: &mut Vec<u8>,
) -> Result<(), Wrong> {
    use ScalarKind::*;
    let wrong = |expected: &str| Wrong(format!("must be {expected}, found {v}"));
    match kind {
        Bool => out.push(v.as_bool().ok_or_else(|| wrong("true or false"))? as u8),
        Int8 => put!(out, order, int::<i8>(v)?),
        Int16 => put!(out, order, int::<i16>(v)?),
        Int32 => put!(out, order, int::<i32>(v)?),
        Int64 => put!(out, order, int::<i64>(v)?),
        UInt8 => put!(out, order, int::<u8>(v)?),
        UInt16 => put!(out, order, int::<u16>(v)?),
        UInt32 => put!(out, order, int::<u32>(v)?),
        UInt64 => put!(out, order, int::<u64>(v)?),
        Float16 => put!(out, order, float16(v)?),
        Float32 => put!(out, order, float32(v)?),
        Float64 => put!(out, order, float64(v)?),
        Complex64 | Complex128 => {
            let parts = v
                .as_array()
                .filter(|a| a.len() == 2)
                .ok_or_else(|| wrong("a list [re, im]"))?;
            for part in parts {
                if *kind == Complex64 {
                    put!(out, order, float32(part)?);
                } else {
                    put!(out, order, float64(part)?);
                }
            }
        }
        Raw(n) => out.extend_from_slice(&raw_bytes(v, *n, true)?),
        NullTerminatedBytes(n) => out.extend_from_slice(&raw_bytes(v, *n, false)?),
        DateTime(_) | TimeDelta(_) => {
            let t = match v {
                Value::String(s) if s == "NaT" => i64::MIN,
                _ => int::<i64>(v).map_err(|_| wrong("an integer or \"NaT\""))?,
            };
            put!(out, order, t);
        }
        Utf32 { chars } => {
            let s = v.as_str().ok_or_else(|| wrong("a string"))?;
            let count = s.chars().count();
            if count > *chars {
                return Err(Wrong(format!(
                    "has {count} characters, more than the {chars} the type holds"
                )));
            }
            for c in s
                .chars()
                .map(u32::from)
                .chain(std::iter::repeat(0))
                .take(*chars)
            {
                put!(out, order, c);
            }
        }
    }
    Ok(())
}

fn int<T: TryFrom<i64> + TryFrom<u64>>(v: &Value) -> Result<T, Wrong> {
    let parsed = match (v.as_i64(), v.as_u64()) {
        (Some(i), _) => T::try_from(i).ok(),
        (None, Some(u)) => T::try_from(u).ok(),
        _ => None,
    };
    parsed.ok_or_else(|| Wrong(format!("must be an integer in the type's range, found {v}")))
}

/// A float fill value: a number, "NaN", "Infinity", "-Infinity", or "0x…" raw bits.
fn float_value(v: &Value, bits: usize) -> Result<Result<f64, u64>, Wrong> {
    match v {
        Value::Number(n) => n.as_f64().map(Ok).ok_or_else(|| Wrong(format!("must be a number, found {v}"))),
        Value::String(s) => match s.as_str() {
            "NaN" => Ok(Ok(f64::NAN)),
            "Infinity" => Ok(Ok(f64::INFINITY)),
            "-Infinity" => Ok(Ok(f64::NEG_INFINITY)),
            hex if hex.starts_with("0x") && hex.len() == 2 + bits / 4 => u64::from_str_radix(&hex[2..], 16)
                .map(Err)
                .map_err(|_| Wrong(format!("has invalid hex float bits {hex}"))),
            _ => Err(Wrong(format!(
                "must be a number, \"NaN\", \"Infinity\", \"-Infinity\" or 0x-prefixed bits, found {v}"
            ))),
        },
        _ => Err(Wrong(format!("must be a number, found {v}"))),
    }
}

fn float16(v: &Value) -> Result<half::f16, Wrong> {
    Ok(match float_value(v, 16)? {
        Ok(f) => half::f16::from_f64(f),
        Err(bits) => half::f16::from_bits(bits as u16),
    })
}

fn float32(v: &Value) -> Result<f32, Wrong> {
    Ok(match float_value(v, 32)? {
        Ok(f) => f as f32,
        Err(bits) => f32::from_bits(bits as u32),
    })
}

fn float64(v: &Value) -> Result<f64, Wrong> {
    Ok(match float_value(v, 64)? {
        Ok(f) => f,
        Err(bits) => f64::from_bits(bits),
    })
}

/// Raw bytes as a list of byte values or base64; `exact` requires the full length, otherwise
/// the value is padded with NULs (numpy `S<n>` semantics).
fn raw_bytes(v: &Value, n: usize, exact: bool) -> Result<Vec<u8>, Wrong> {
    let mut bytes = match v {
        Value::String(s) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| Wrong(format!("is not valid base64 ({e}): {v}")))?,
        Value::Array(items) => items
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| Wrong(format!("must be a list of byte values 0..=255, found {v}")))?,
        _ => {
            return Err(Wrong(format!(
                "must be base64 or a list of bytes, found {v}"
            )))
        }
    };
    if bytes.len() > n || (exact && bytes.len() != n) {
        return Err(Wrong(format!(
            "has {} bytes, the type holds {n}",
            bytes.len()
        )));
    }
    bytes.resize(n, 0);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zarr::metadata::data_type::parse_data_type;
    use serde_json::json;

    #[test]
    fn nested_fill_value_is_packed_in_declaration_order() {
        let ty = parse_data_type(
            &json!({"name": "struct", "configuration": {"fields": [
                {"name": "point", "data_type": {"name": "struct", "configuration": {"fields": [
                    {"name": "x", "data_type": "float32"}, {"name": "y", "data_type": "float32"}]}}},
                {"name": "value", "data_type": "int16"}]}}),
            ByteOrder::Big,
        )
        .unwrap();
        let bytes =
            encode_fill_value(&ty, &json!({"point": {"x": 1.0, "y": "NaN"}, "value": -2})).unwrap();
        let mut expected = 1.0f32.to_be_bytes().to_vec();
        expected.extend(f32::NAN.to_be_bytes());
        expected.extend((-2i16).to_be_bytes());
        assert_eq!(bytes, expected);
    }

    #[test]
    fn fill_value_errors_name_the_field() {
        let ty = parse_data_type(
            &json!({"name": "struct", "configuration": {"fields": [
                {"name": "a", "data_type": "uint8"}, {"name": "b", "data_type": "float64"}]}}),
            ByteOrder::Little,
        )
        .unwrap();
        let missing = encode_fill_value(&ty, &json!({"a": 1}))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("missing field 'b'"), "{missing}");
        let wrong = encode_fill_value(&ty, &json!({"a": 300, "b": 0.0}))
            .unwrap_err()
            .to_string();
        assert!(
            wrong.contains("field 'a'") && wrong.contains("300"),
            "{wrong}"
        );
        let not_object = encode_fill_value(&ty, &json!(0)).unwrap_err().to_string();
        assert!(not_object.contains("must be an object"), "{not_object}");
    }

    #[test]
    fn special_values_encode() {
        let t = |s: &str| parse_data_type(&json!(s), ByteOrder::Little).unwrap();
        assert_eq!(
            encode_fill_value(&t("float32"), &json!("0x3f800000")).unwrap(),
            1.0f32.to_le_bytes()
        );
        assert_eq!(
            encode_fill_value(&t("float64"), &json!("-Infinity")).unwrap(),
            f64::NEG_INFINITY.to_le_bytes()
        );
        let dt = parse_data_type(
            &json!({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}}),
            ByteOrder::Little,
        )
        .unwrap();
        assert_eq!(
            encode_fill_value(&dt, &json!("NaT")).unwrap(),
            i64::MIN.to_le_bytes()
        );
    }
}
