//! Zarr v3 data types (`struct`, legacy `structured`, and the fixed-size scalar types) parsed
//! into an [`ElementType`].

use std::collections::HashSet;

use arrow::datatypes::TimeUnit;
use serde_json::Value;

use crate::zarr::metadata::element::{ByteOrder, ElementType, ScalarKind, StructField, TimeScale};
use crate::zarr::metadata::problem::MetadataProblem;

/// Parses a v3 `data_type`. `order` is the byte order of the `bytes` codec; `None` when it has
/// no `endian` (allowed only when no field is multi-byte, checked by the caller).
/// The caller names the document in the error ([`MetadataProblem::at`]).
pub(crate) fn parse_data_type(
    value: &Value,
    order: ByteOrder,
) -> Result<ElementType, MetadataProblem> {
    parse_at(value, order, "")
}

/// ndfusion's name for a data type given as a NumPy dtype (`{"dtype": ">i2"}`, or a
/// structured dtype's field list, as a Zarr v2 `.zarray` gives it; with `"shape": [3]`, a
/// subarray of such items): what an HDF5 dataset's type is (`hdf5/dataset.rs`), with a byte
/// order per field and array members, which the v3 `struct` type cannot say. Its elements are stored as they are: the `bytes` codec's
/// `endian` does not apply, and its fill value is base64 of an element's bytes.
pub(crate) const NUMPY_DTYPE: &str = "ndfusion.numpy_dtype";

/// ndfusion's name for lists of numbers of varying length (a netCDF-4 / HDF5 vlen type,
/// `netcdf/nc4.rs`): `{"name": "ndfusion.vlen", "configuration": {"item": "int16"}}`. Its
/// elements are served as Zarr `bytes` (`vlen-bytes`), each the element's items
/// little-endian, and read as an Arrow `List` of the item type.
pub(crate) const VLEN_LIST: &str = "ndfusion.vlen";

/// The Arrow item type of a [`VLEN_LIST`] data type, or `None` for another data type; an
/// item type that is not a number is an error.
pub(crate) fn vlen_list_item(value: &Value) -> Result<Option<arrow::datatypes::DataType>, String> {
    if type_name(value) != Some(VLEN_LIST) {
        return Ok(None);
    }
    let item = value.get("configuration").and_then(|c| c.get("item"));
    let kind = match item.map(|i| parse_data_type(i, ByteOrder::Little)) {
        Some(Ok(ElementType::Scalar { kind, .. })) => Some(kind),
        _ => None,
    };
    match kind.map(|k| k.arrow_type()) {
        Some(t) if t.is_integer() || t.is_floating() => Ok(Some(t)),
        _ => Err(format!(
            "{VLEN_LIST} items of type {item:?} are not numbers"
        )),
    }
}

/// Whether a data type is a struct (`struct` or legacy `structured`).
pub(crate) fn is_struct_data_type(value: &Value) -> bool {
    matches!(type_name(value), Some("struct" | "structured"))
}

fn type_name(value: &Value) -> Option<&str> {
    match value {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("name").and_then(Value::as_str),
        _ => None,
    }
}

/// Struct levels an element may nest: real records nest a few; a deeper type is refused
/// before it can exhaust the stack of whatever walks it.
pub(crate) const MAX_STRUCT_DEPTH: usize = 16;

/// An error when a struct at `field_path` (dot-separated, "" at the top) nests too deep.
pub(crate) fn check_struct_depth(field_path: &str) -> Result<(), MetadataProblem> {
    let depth = if field_path.is_empty() {
        0
    } else {
        field_path.split('.').count()
    };
    if depth >= MAX_STRUCT_DEPTH {
        return Err(MetadataProblem::DataType(format!(
            "struct nesting deeper than {MAX_STRUCT_DEPTH} levels (at field '{field_path}')"
        )));
    }
    Ok(())
}

/// `field_path` names the struct field being parsed ("" at the top), for messages.
fn parse_at(
    value: &Value,
    order: ByteOrder,
    field_path: &str,
) -> Result<ElementType, MetadataProblem> {
    let at = || {
        if field_path.is_empty() {
            String::new()
        } else {
            format!(" (field '{field_path}')")
        }
    };
    let name = type_name(value).ok_or_else(|| {
        format!(
            "data type{} must be a string or an object with a name, found {value}",
            at()
        )
    })?;
    let config = value.get("configuration");
    let scalar = |kind| Ok(ElementType::Scalar { kind, order });
    match name {
        "struct" | "structured" => {
            check_struct_depth(field_path)?;
            let fields = config
                .and_then(|c| c.get("fields"))
                .and_then(Value::as_array)
                .ok_or_else(|| MetadataProblem::DataType(format!("{name} data type{} needs configuration.fields as a list", at())))?;
            parse_fields(fields, order, field_path).map(ElementType::Struct)
        }
        NUMPY_DTYPE => {
            let dtype = config.and_then(|c| c.get("dtype")).ok_or_else(|| {
                MetadataProblem::DataType(format!("{name}{} needs configuration.dtype", at()))
            })?;
            let element = crate::zarr::metadata::v2::parse_dtype(dtype)?;
            // A subarray (an HDF5 array member read as a variable of its own).
            match config.and_then(|c| c.get("shape")) {
                Some(shape) => crate::zarr::metadata::v2::subarray(element, shape, name),
                None => Ok(element),
            }
        }
        "bool" => scalar(ScalarKind::Bool),
        "int8" => scalar(ScalarKind::Int8),
        "int16" => scalar(ScalarKind::Int16),
        "int32" => scalar(ScalarKind::Int32),
        "int64" => scalar(ScalarKind::Int64),
        "uint8" => scalar(ScalarKind::UInt8),
        "uint16" => scalar(ScalarKind::UInt16),
        "uint32" => scalar(ScalarKind::UInt32),
        "uint64" => scalar(ScalarKind::UInt64),
        "float16" => scalar(ScalarKind::Float16),
        "float32" => scalar(ScalarKind::Float32),
        "float64" => scalar(ScalarKind::Float64),
        "complex64" => scalar(ScalarKind::Complex64),
        "complex128" => scalar(ScalarKind::Complex128),
        "raw_bytes" => scalar(ScalarKind::Raw(length_bytes(config, name, &at())?)),
        "null_terminated_bytes" => scalar(ScalarKind::NullTerminatedBytes(length_bytes(
            config,
            name,
            &at(),
        )?)),
        "fixed_length_utf32" => {
            let bytes = length_bytes(config, name, &at())?;
            if !bytes.is_multiple_of(4) {
                return Err(MetadataProblem::DataType(format!(
                    "fixed_length_utf32{}: length_bytes {bytes} is not a multiple of 4",
                    at()
                )));
            }
            scalar(ScalarKind::Utf32 { chars: bytes / 4 })
        }
        "numpy.datetime64" => scalar(ScalarKind::DateTime(time_scale(config, name, &at())?)),
        "numpy.timedelta64" => scalar(ScalarKind::TimeDelta(time_scale(config, name, &at())?)),
        "string" | "bytes" | "variable_length_bytes" | "variable_length_utf8" | "vlen-utf8"
        | "vlen-bytes" => Err(MetadataProblem::DataType(format!(
            "variable-length data type '{name}'{} is not supported: struct fields and table columns need a fixed size",
            at()
        ))),
        raw if raw.starts_with('r') && raw[1..].parse::<usize>().is_ok() => {
            let bits: usize = raw[1..].parse().unwrap_or(0);
            if bits == 0 || !bits.is_multiple_of(8) {
                return Err(MetadataProblem::DataType(format!("raw data type '{raw}'{}: bits must be a positive multiple of 8", at())));
            }
            scalar(ScalarKind::Raw(bits / 8))
        }
        other => Err(MetadataProblem::DataType(format!("data type '{other}'{} is not supported", at()))),
    }
}

fn parse_fields(
    fields: &[Value],
    order: ByteOrder,
    parent: &str,
) -> Result<Vec<StructField>, MetadataProblem> {
    let at = if parent.is_empty() {
        String::new()
    } else {
        format!(" in field '{parent}'")
    };
    if fields.is_empty() {
        return Err(MetadataProblem::DataType(format!(
            "struct data type{at} has zero fields; it needs at least one"
        )));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(fields.len());
    for field in fields {
        // Object form {"name", "data_type"}, or the legacy tuple form [name, data_type].
        let (name, data_type) = match field {
            Value::Object(o) => (o.get("name").and_then(Value::as_str), o.get("data_type")),
            Value::Array(a) if a.len() == 2 => (a[0].as_str(), a.get(1)),
            _ => (None, None),
        };
        let (Some(name), Some(data_type)) = (name, data_type) else {
            return Err(MetadataProblem::DataType(format!(
                "struct field{at} must be {{\"name\", \"data_type\"}} or [name, data_type], found {field}"
            )));
        };
        if name.is_empty() {
            return Err(MetadataProblem::DataType(format!(
                "struct field{at} has an empty name"
            )));
        }
        if !seen.insert(name) {
            return Err(MetadataProblem::DataType(format!(
                "struct field name '{name}'{at} appears more than once"
            )));
        }
        let path = if parent.is_empty() {
            name.to_string()
        } else {
            format!("{parent}.{name}")
        };
        out.push(StructField {
            name: name.to_string(),
            ty: parse_at(data_type, order, &path)?,
        });
    }
    Ok(out)
}

fn length_bytes(config: Option<&Value>, name: &str, at: &str) -> Result<usize, MetadataProblem> {
    config
        .and_then(|c| c.get("length_bytes"))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
        .map(|n| n as usize)
        .ok_or_else(|| {
            MetadataProblem::DataType(format!(
                "{name}{at} needs configuration.length_bytes as a positive integer"
            ))
        })
}

fn time_scale(config: Option<&Value>, name: &str, at: &str) -> Result<TimeScale, MetadataProblem> {
    let unit = config
        .and_then(|c| c.get("unit"))
        .and_then(Value::as_str)
        .ok_or_else(|| MetadataProblem::DataType(format!("{name}{at} needs configuration.unit")))?;
    let scale_factor = match config.and_then(|c| c.get("scale_factor")) {
        None => 1,
        Some(v) => v.as_i64().filter(|n| *n > 0).ok_or_else(|| {
            format!("{name}{at}: scale_factor must be a positive integer, found {v}")
        })?,
    };
    numpy_time_scale(unit, scale_factor).ok_or_else(|| {
        MetadataProblem::DataType(format!(
            "{name}{at}: unit '{unit}' is not supported (supported: W, D, h, m, s, ms, us, ns)"
        ))
    })
}

/// Maps a NumPy time unit times a scale factor onto an Arrow unit, when that is exact.
/// Months and years have no fixed length and sub-nanosecond units do not fit Arrow.
pub(crate) fn numpy_time_scale(unit: &str, scale_factor: i64) -> Option<TimeScale> {
    let (unit, per): (TimeUnit, i64) = match unit {
        "W" => (TimeUnit::Second, 7 * 86_400),
        "D" => (TimeUnit::Second, 86_400),
        "h" => (TimeUnit::Second, 3_600),
        "m" => (TimeUnit::Second, 60),
        "s" => (TimeUnit::Second, 1),
        "ms" => (TimeUnit::Millisecond, 1),
        "us" | "μs" => (TimeUnit::Microsecond, 1),
        "ns" => (TimeUnit::Nanosecond, 1),
        _ => return None,
    };
    Some(TimeScale {
        unit,
        multiplier: per.checked_mul(scale_factor)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<ElementType, MetadataProblem> {
        parse_data_type(&v, ByteOrder::Little)
    }

    #[test]
    fn structs_nested_too_deep_are_an_error_naming_the_limit() {
        let mut t = json!("float32");
        for i in 0..MAX_STRUCT_DEPTH + 1 {
            t = json!({"name": "struct", "configuration": {"fields": [{"name": format!("f{i}"), "data_type": t}]}});
        }
        let err = parse(t).unwrap_err().to_string();
        assert!(
            err.contains("struct nesting deeper than 16 levels"),
            "{err}"
        );
        let mut ok = json!("float32");
        for i in 0..4 {
            ok = json!({"name": "struct", "configuration": {"fields": [{"name": format!("f{i}"), "data_type": ok}]}});
        }
        assert!(parse(ok).is_ok());
    }

    #[test]
    fn parses_nested_struct_in_object_and_tuple_form() {
        let object = json!({"name": "struct", "configuration": {"fields": [
            {"name": "id", "data_type": "int32"},
            {"name": "point", "data_type": {"name": "struct", "configuration": {"fields": [
                {"name": "x", "data_type": {"name": "float32"}},
                {"name": "y", "data_type": "float32"}]}}}]}});
        let tuple = json!({"name": "structured", "configuration": {"fields": [
            ["id", "int32"],
            ["point", {"name": "structured", "configuration": {"fields": [["x", "float32"], ["y", "float32"]]}}]]}});
        let a = parse(object).unwrap();
        assert_eq!(a, parse(tuple).unwrap());
        assert_eq!(a.size(), 12);
    }

    #[test]
    fn rejects_duplicate_and_empty_and_variable_length_fields() {
        let dup = json!({"name": "struct", "configuration": {"fields": [
            {"name": "a", "data_type": "int8"}, {"name": "a", "data_type": "int8"}]}});
        assert!(parse(dup)
            .unwrap_err()
            .to_string()
            .contains("'a' appears more than once"));
        let empty = json!({"name": "struct", "configuration": {"fields": []}});
        assert!(parse(empty)
            .unwrap_err()
            .to_string()
            .contains("zero fields"));
        let vlen = json!({"name": "struct", "configuration": {"fields": [
            {"name": "s", "data_type": "string"}]}});
        assert!(parse(vlen)
            .unwrap_err()
            .to_string()
            .contains("variable-length data type 'string' (field 's')"));
    }

    #[test]
    fn time_units_map_exactly_or_are_refused() {
        let d = numpy_time_scale("D", 1).unwrap();
        assert_eq!((d.unit, d.multiplier), (TimeUnit::Second, 86_400));
        let ms = numpy_time_scale("ms", 10).unwrap();
        assert_eq!((ms.unit, ms.multiplier), (TimeUnit::Millisecond, 10));
        assert!(numpy_time_scale("M", 1).is_none());
        assert!(numpy_time_scale("ps", 1).is_none());
    }
}
