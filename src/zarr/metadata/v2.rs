//! Zarr v2 array metadata (`.zarray` and `.zattrs`), parsed into the same [`ArrayMeta`] as v3.
//!
//! NumPy dtypes are typestrings (`<f8`, `|u1`, `<M8[ns]`, `<U4`) or, for structured arrays,
//! lists of `[name, dtype]` / `[name, dtype, shape]` with a byte order per field. zarrs 0.23
//! rejects nested structured dtypes, so, as for v3, it is handed raw bytes (`|V{n}`) and an
//! explicit fill value; it still runs the compressor, the filters and `order: "F"`.

use base64::Engine;
use serde_json::Value;
use zarrs::array::{ArrayMetadata, ArrayMetadataV2};

use crate::error::Error;
use crate::zarr::metadata::array_meta::{check_sizes, default_dimension_names, ArrayMeta};
use crate::zarr::metadata::data_type::numpy_time_scale;
use crate::zarr::metadata::element::{ByteOrder, ElementType, ScalarKind, StructField};
use crate::zarr::metadata::fill_value::encode_fill_value;
use crate::zarr::metadata::problem::MetadataProblem;

/// Parses a `.zarray` document and its `.zattrs` (from files or consolidated metadata), of at
/// most `max_attributes` attributes.
pub(crate) fn parse_v2_value(
    path: &str,
    doc: Value,
    attrs: Option<Value>,
    max_attributes: usize,
) -> Result<ArrayMeta, Error> {
    let invalid = |reason: String| Error::InvalidMetadata {
        path: path.to_string(),
        reason,
    };
    if doc.get("zarr_format").and_then(Value::as_u64) != Some(2) {
        return Err(invalid(format!(
            "zarr_format must be 2, found {:?}",
            doc.get("zarr_format")
        )));
    }
    let shape = u64_list(doc.get("shape"))
        .ok_or_else(|| invalid("shape must be a list of non-negative integers".into()))?;
    let chunk_shape = u64_list(doc.get("chunks"))
        .filter(|c| c.len() == shape.len() && !c.contains(&0))
        .ok_or_else(|| {
            invalid(format!(
                "chunks must be {} positive integers, one per dimension",
                shape.len()
            ))
        })?;
    let dtype = doc
        .get("dtype")
        .ok_or_else(|| invalid("dtype is missing".into()))?;
    let element = parse_dtype(dtype).map_err(|p| p.at(path))?;
    check_sizes(&shape, &chunk_shape, &element).map_err(|p| p.at(path))?;
    let is_struct = matches!(element, ElementType::Struct(_));
    let fill_value = fill_value(&element, doc.get("fill_value").unwrap_or(&Value::Null))
        .map_err(|p| p.at(path))?;

    let names = match attrs.as_ref().and_then(|a| a.get("_ARRAY_DIMENSIONS")) {
        None => vec![None; shape.len()],
        Some(Value::Array(names)) if names.len() == shape.len() => names
            .iter()
            .map(|n| n.as_str().filter(|s| !s.is_empty()).map(str::to_string))
            .collect(),
        Some(other) => {
            return Err(invalid(format!(
                "_ARRAY_DIMENSIONS in .zattrs must list {} names, found {other}",
                shape.len()
            )))
        }
    };

    let mut zarrs_doc = doc.clone();
    zarrs_doc["dtype"] = Value::String(format!("|V{}", element.size()));
    zarrs_doc["fill_value"] =
        Value::String(base64::engine::general_purpose::STANDARD.encode(&fill_value));
    let v2: ArrayMetadataV2 = serde_json::from_value(zarrs_doc)
        .map_err(|e| invalid(format!("metadata not accepted by zarrs: {e}")))?;
    let attributes = match attrs {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(map)) => {
            crate::zarr::metadata::attributes::check_attribute_count(&map, max_attributes)
                .map_err(|p| p.at(path))?;
            map
        }
        Some(other) => return Err(invalid(format!(".zattrs must be an object, found {other}"))),
    };
    Ok(ArrayMeta {
        attributes,
        shape,
        chunk_shape,
        dimension_names: default_dimension_names(names),
        element,
        is_struct,
        numpy_dtype: false,
        fill_value,
        zarrs_metadata: ArrayMetadata::V2(v2),
    })
}

fn u64_list(value: Option<&Value>) -> Option<Vec<u64>> {
    value?.as_array()?.iter().map(Value::as_u64).collect()
}

/// A NumPy dtype: a typestring or a structured list.
pub(crate) fn parse_dtype(dtype: &Value) -> Result<ElementType, MetadataProblem> {
    match dtype {
        Value::String(s) => parse_typestr(s),
        Value::Array(fields) => parse_fields(fields, ""),
        other => Err(MetadataProblem::DataType(format!(
            "dtype must be a typestring or a list of fields, found {other}"
        ))),
    }
}

fn parse_fields(fields: &[Value], parent: &str) -> Result<ElementType, MetadataProblem> {
    crate::zarr::metadata::data_type::check_struct_depth(parent)?;
    let at = if parent.is_empty() {
        String::new()
    } else {
        format!(" in field '{parent}'")
    };
    if fields.is_empty() {
        return Err(MetadataProblem::DataType(format!(
            "structured dtype{at} has zero fields"
        )));
    }
    let mut out: Vec<StructField> = Vec::with_capacity(fields.len());
    for field in fields {
        let parts = field.as_array().filter(|p| p.len() == 2 || p.len() == 3);
        let (Some(name), Some(ty)) = (parts.and_then(|p| p[0].as_str()), parts.map(|p| &p[1]))
        else {
            return Err(MetadataProblem::DataType(format!("structured dtype field{at} must be [name, dtype] or [name, dtype, shape], found {field}")));
        };
        if name.is_empty() || out.iter().any(|f| f.name == name) {
            return Err(MetadataProblem::DataType(format!(
                "structured dtype field name '{name}'{at} is empty or repeated"
            )));
        }
        let path = if parent.is_empty() {
            name.to_string()
        } else {
            format!("{parent}.{name}")
        };
        let mut element = match ty {
            Value::Array(nested) => parse_fields(nested, &path)?,
            Value::String(s) => parse_typestr(s)
                .map_err(|e| MetadataProblem::DataType(format!("field '{path}': {e}")))?,
            other => {
                return Err(MetadataProblem::DataType(format!(
                    "field '{path}': dtype {other} is not a typestring or a field list"
                )))
            }
        };
        if let Some(shape) = parts.and_then(|p| p.get(2)) {
            element = subarray(element, shape, &format!("field '{path}'"))?;
        }
        out.push(StructField {
            name: name.to_string(),
            ty: element,
        });
    }
    Ok(ElementType::Struct(out))
}

/// `element` as a NumPy subarray of `shape` (positive integers; `what` names it in errors):
/// nested fixed-size lists, the innermost dimension first, so [2, 3] is 2 lists of 3.
pub(crate) fn subarray(
    mut element: ElementType,
    shape: &Value,
    what: &str,
) -> Result<ElementType, MetadataProblem> {
    let dims = u64_list(Some(shape))
        .filter(|d| !d.is_empty() && !d.contains(&0))
        .ok_or_else(|| format!("{what}: subarray shape {shape} must be positive integers"))?;
    for &n in dims.iter().rev() {
        element = ElementType::FixedArray {
            item: Box::new(element),
            len: n as usize,
        };
    }
    Ok(element)
}

/// `<f8`, `|b1`, `>i2`, `<U4`, `|S5`, `|V3`, `<M8[ns]`, `<m8[10s]`.
pub(crate) fn parse_typestr(s: &str) -> Result<ElementType, MetadataProblem> {
    let mut chars = s.chars();
    let order = match chars.next() {
        Some('<' | '|' | '=') => ByteOrder::Little,
        Some('>') => ByteOrder::Big,
        _ => {
            return Err(MetadataProblem::DataType(format!(
                "dtype '{s}' must start with a byte order (<, >, | or =)"
            )))
        }
    };
    let rest = &s[1..];
    let kind_char = rest
        .chars()
        .next()
        .ok_or_else(|| MetadataProblem::DataType(format!("dtype '{s}' has no kind")))?;
    let size_text = &rest[kind_char.len_utf8()..];
    let unsupported = || MetadataProblem::DataType(format!("dtype '{s}' is not supported"));
    let kind = match kind_char {
        'M' | 'm' => {
            let unit = size_text
                .strip_prefix("8[")
                .and_then(|u| u.strip_suffix(']'))
                .ok_or_else(|| {
                    MetadataProblem::DataType(format!("dtype '{s}' needs a unit, such as <M8[ns]"))
                })?;
            let digits = unit.chars().take_while(char::is_ascii_digit).count();
            let scale = if digits == 0 {
                1
            } else {
                unit[..digits].parse().map_err(|_| unsupported())?
            };
            let scale = numpy_time_scale(&unit[digits..], scale).ok_or_else(|| {
                format!(
                    "dtype '{s}': time unit '{unit}' is not supported (W, D, h, m, s, ms, us, ns)"
                )
            })?;
            if kind_char == 'M' {
                ScalarKind::DateTime(scale)
            } else {
                ScalarKind::TimeDelta(scale)
            }
        }
        'O' => {
            return Err(MetadataProblem::DataType(format!(
                "object dtype '{s}' is not supported: values need a fixed size"
            )))
        }
        _ => {
            let n: usize = size_text.parse().map_err(|_| unsupported())?;
            match (kind_char, n) {
                ('b', 1) => ScalarKind::Bool,
                ('i', 1) => ScalarKind::Int8,
                ('i', 2) => ScalarKind::Int16,
                ('i', 4) => ScalarKind::Int32,
                ('i', 8) => ScalarKind::Int64,
                ('u', 1) => ScalarKind::UInt8,
                ('u', 2) => ScalarKind::UInt16,
                ('u', 4) => ScalarKind::UInt32,
                ('u', 8) => ScalarKind::UInt64,
                ('f', 2) => ScalarKind::Float16,
                ('f', 4) => ScalarKind::Float32,
                ('f', 8) => ScalarKind::Float64,
                ('c', 8) => ScalarKind::Complex64,
                ('c', 16) => ScalarKind::Complex128,
                ('V', n) if n > 0 => ScalarKind::Raw(n),
                ('S', n) if n > 0 => ScalarKind::NullTerminatedBytes(n),
                ('U', n) if n > 0 => ScalarKind::Utf32 { chars: n },
                _ => return Err(unsupported()),
            }
        }
    };
    Ok(ElementType::Scalar { kind, order })
}

/// The v2 fill value as element bytes: `null` (no fill value: zeros), base64 of the packed
/// bytes (structured, `V`, `S`), `0` for a structured zero, or a JSON scalar.
fn fill_value(element: &ElementType, value: &Value) -> Result<Vec<u8>, MetadataProblem> {
    let size = element.size();
    let raw = matches!(
        element,
        ElementType::Struct(_)
            | ElementType::Scalar {
                kind: ScalarKind::Raw(_) | ScalarKind::NullTerminatedBytes(_),
                ..
            }
    );
    match value {
        Value::Null => Ok(vec![0; size]),
        Value::Number(n) if raw && n.as_u64() == Some(0) => Ok(vec![0; size]),
        Value::String(b64) if raw => {
            let mut bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("fill_value is not valid base64: {e}"))?;
            if bytes.len() > size
                || (matches!(element, ElementType::Struct(_)) && bytes.len() != size)
            {
                return Err(MetadataProblem::Invalid(format!(
                    "fill_value holds {} bytes, the element has {size}",
                    bytes.len()
                )));
            }
            bytes.resize(size, 0);
            Ok(bytes)
        }
        _ => encode_fill_value(element, value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typestrings() {
        let t = |s: &str| parse_typestr(s).unwrap();
        assert_eq!(
            t(">i2"),
            ElementType::Scalar {
                kind: ScalarKind::Int16,
                order: ByteOrder::Big
            }
        );
        assert_eq!(t("<U4").size(), 16);
        assert_eq!(t("|S5").size(), 5);
        assert!(
            matches!(t("<M8[10s]"), ElementType::Scalar { kind: ScalarKind::DateTime(s), .. } if s.multiplier == 10)
        );
        assert!(parse_typestr("|O")
            .unwrap_err()
            .to_string()
            .contains("object dtype '|O'"));
        assert!(parse_typestr("<M8[M]")
            .unwrap_err()
            .to_string()
            .contains("not supported"));
        assert!(parse_typestr("<q8").is_err());
    }

    #[test]
    fn structured_dtype_with_nesting_byte_orders_and_subarrays() {
        let dtype = json!([
            ["id", "<i4"],
            ["flags", "|u1"],
            ["point", [["x", "<f4"], ["y", ">f4"]]],
            ["c", "<f4", [2, 3]]
        ]);
        let ElementType::Struct(fields) = parse_dtype(&dtype).unwrap() else {
            panic!()
        };
        assert_eq!(ElementType::Struct(fields.clone()).size(), 4 + 1 + 8 + 24);
        let ElementType::Struct(point) = &fields[2].ty else {
            panic!()
        };
        assert_eq!(
            point[1].ty,
            ElementType::Scalar {
                kind: ScalarKind::Float32,
                order: ByteOrder::Big
            }
        );
        let ElementType::FixedArray { item, len: 2 } = &fields[3].ty else {
            panic!()
        };
        assert!(matches!(
            item.as_ref(),
            ElementType::FixedArray { len: 3, .. }
        ));
    }

    #[test]
    fn fill_values() {
        let st = parse_dtype(&json!([["a", "<i2"], ["b", "|u1"]])).unwrap();
        assert_eq!(fill_value(&st, &Value::Null).unwrap(), vec![0, 0, 0]);
        assert_eq!(fill_value(&st, &json!(0)).unwrap(), vec![0, 0, 0]);
        assert_eq!(fill_value(&st, &json!("AQID")).unwrap(), vec![1, 2, 3]);
        assert!(fill_value(&st, &json!("AQ=="))
            .unwrap_err()
            .to_string()
            .contains("holds 1 bytes"));
        let f8 = parse_typestr("<f8").unwrap();
        assert_eq!(
            fill_value(&f8, &json!("NaN")).unwrap(),
            f64::NAN.to_le_bytes()
        );
    }
}
