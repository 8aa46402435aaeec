//! Array metadata: what ndfusion needs to know of one Zarr array, parsed from `zarr.json`.
//!
//! zarrs has no struct data type, so the metadata handed to zarrs has its data type replaced
//! by raw bits of the element size (`r{8n}`) and an explicit byte fill value (the route of
//! TensorStore's `open_as_void`). zarrs then runs the codec chain and returns packed element
//! bytes in stored byte order; `decode/fields.rs` turns those into Arrow columns using the
//! [`ElementType`] parsed here.

use serde_json::Value;
use zarrs::array::{ArrayMetadata, ArrayMetadataV3};

use crate::error::Error;
use crate::zarr::metadata::data_type::{is_struct_data_type, parse_data_type, NUMPY_DTYPE};
use crate::zarr::metadata::element::{ByteOrder, ElementType};
use crate::zarr::metadata::fill_value::encode_fill_value;
use crate::zarr::metadata::problem::MetadataProblem;

/// The name of the single value column of an array whose elements are not structs.
pub(crate) const VALUE_COLUMN: &str = "value";

/// Everything ndfusion needs to read an array as a table.
#[derive(Debug, Clone)]
pub(crate) struct ArrayMeta {
    pub shape: Vec<u64>,
    /// Shape of the (outer) chunks that are stored as single objects.
    pub chunk_shape: Vec<u64>,
    pub dimension_names: Vec<String>,
    pub element: ElementType,
    /// Whether the element is a struct (one column per field) or a scalar (one `value` column).
    pub is_struct: bool,
    /// Whether the data type is ndfusion's NumPy dtype, an HDF5 type (`netcdf/numpy_type.rs`):
    /// a dataset shows such a struct as one `Struct` column, as xarray shows a netCDF-4
    /// compound variable, where a Zarr struct variable contributes its fields.
    pub numpy_dtype: bool,
    /// One element in stored byte order: what missing chunks read as.
    pub fill_value: Vec<u8>,
    /// The metadata given to zarrs, with the data type replaced by raw bits.
    pub zarrs_metadata: ArrayMetadata,
    /// The array's attributes (v3 `attributes`, v2 `.zattrs`).
    pub attributes: serde_json::Map<String, Value>,
}

/// The most bytes one chunk may decode to: a chunk (or the part of it a query needs) is
/// decoded in memory at once.
pub(crate) const MAX_CHUNK_BYTES: u64 = 1 << 32;

/// Sizes metadata claims, checked before anything is computed from them: the element size,
/// every dimension as an Int64 index, the element count in 64 bits, a chunk's decoded bytes
/// against [`MAX_CHUNK_BYTES`].
pub(crate) fn check_sizes(
    shape: &[u64],
    chunk_shape: &[u64],
    element: &ElementType,
) -> Result<(), MetadataProblem> {
    let element_size = element.checked_size().ok_or_else(|| {
        format!(
            "the element is larger than {} bytes",
            crate::zarr::metadata::element::MAX_ELEMENT_BYTES
        )
    })?;
    if let Some(n) = shape.iter().find(|&&n| n > i64::MAX as u64) {
        return Err(MetadataProblem::Invalid(format!(
            "a dimension of {n} elements does not fit a 64-bit index"
        )));
    }
    if shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .is_none()
    {
        return Err(MetadataProblem::Invalid(format!(
            "shape {shape:?} holds more than 2^64 elements"
        )));
    }
    let chunk_bytes = chunk_shape
        .iter()
        .try_fold(element_size as u64, |n, &d| n.checked_mul(d))
        .filter(|&b| b <= MAX_CHUNK_BYTES);
    if chunk_bytes.is_none() {
        return Err(MetadataProblem::Invalid(format!(
            "a chunk of shape {chunk_shape:?} decodes to more than {MAX_CHUNK_BYTES} bytes, \
             more than ndfusion decodes at once"
        )));
    }
    Ok(())
}

impl ArrayMeta {
    /// Bytes of one decoded chunk (checked to fit when the metadata was read).
    pub(crate) fn chunk_bytes(&self) -> u64 {
        self.chunk_shape
            .iter()
            .fold(self.element.size() as u64, |n, &d| n.saturating_mul(d))
    }

    /// The metadata file this came from: `zarr.json` (v3) or `.zarray` (v2).
    pub(crate) fn file_name(&self) -> &'static str {
        match self.zarrs_metadata {
            ArrayMetadata::V3(_) => "zarr.json",
            ArrayMetadata::V2(_) => ".zarray",
        }
    }
}

#[cfg(test)]
/// Parses a `zarr.json` document; `path` names it in errors.
pub(crate) fn parse_v3(path: &str, text: &[u8]) -> Result<ArrayMeta, Error> {
    let doc: Value = serde_json::from_slice(text).map_err(|source| Error::MetadataJson {
        path: path.to_string(),
        source,
    })?;
    parse_v3_value(path, doc, crate::Limits::default().attributes)
}

/// Parses a `zarr.json` document already read as JSON (a file, or consolidated metadata) of
/// at most `max_attributes` attributes.
pub(crate) fn parse_v3_value(
    path: &str,
    doc: Value,
    max_attributes: usize,
) -> Result<ArrayMeta, Error> {
    parse_v3_doc(doc, max_attributes).map_err(|p| p.at(path))
}

fn parse_v3_doc(mut doc: Value, max_attributes: usize) -> Result<ArrayMeta, MetadataProblem> {
    // The attributes are taken out first and checked: counted before anything copies them,
    // and not handed to zarrs (which has no use for them).
    let attributes = match doc.as_object_mut().and_then(|o| o.remove("attributes")) {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(map)) => {
            crate::zarr::metadata::attributes::check_attribute_count(&map, max_attributes)?;
            map
        }
        Some(other) => return Err(format!("attributes must be an object, found {other}").into()),
    };
    let obj = doc.as_object().ok_or("the document is not a JSON object")?;
    match obj.get("zarr_format").and_then(Value::as_u64) {
        Some(3) => {}
        other => return Err(format!("zarr_format must be 3, found {other:?}").into()),
    }
    match obj.get("node_type").and_then(Value::as_str) {
        Some("array") => {}
        Some("group") => {
            return Err(
                "this is a Zarr group, not an array: LOCATION must name an array folder".into(),
            );
        }
        other => return Err(format!("node_type must be \"array\", found {other:?}").into()),
    }
    let shape = u64_list(obj.get("shape"), "shape")?;
    let chunk_shape = regular_chunk_shape(obj.get("chunk_grid"), shape.len())?;

    let data_type = obj.get("data_type").ok_or("data_type is missing")?;
    let name = data_type.get("name").and_then(Value::as_str);
    // Types whose byte order is their own and whose fill value is base64 of the bytes.
    let legacy = matches!(name, Some("structured" | NUMPY_DTYPE));
    let codecs = obj
        .get("codecs")
        .and_then(Value::as_array)
        .ok_or("codecs is missing or not a list")?;
    let endian = bytes_codec_endian(codecs)?;
    let order = endian.unwrap_or(ByteOrder::Little);
    let element = parse_data_type(data_type, order)?;
    let is_struct = is_struct_data_type(data_type)
        || (name == Some(NUMPY_DTYPE) && matches!(element, ElementType::Struct(_)));
    check_sizes(&shape, &chunk_shape, &element)?;
    if endian.is_none() && !legacy {
        // The spec requires an explicit endian for multi-byte values; only the legacy
        // `structured` type defaults to little-endian.
        let mut multi_byte = false;
        element.for_each_scalar(&mut |k, _| multi_byte |= k.is_multi_byte());
        if multi_byte {
            return Err(
                "the bytes codec has no \"endian\", but the data type has multi-byte values".into(),
            );
        }
    }

    let fill = obj.get("fill_value").ok_or("fill_value is missing")?;
    let fill_value = match (legacy, fill) {
        // Legacy `structured`: base64 of the packed element bytes.
        (true, Value::String(b64)) => {
            let bytes =
                base64_decode(b64).map_err(|e| format!("fill_value is not valid base64: {e}"))?;
            if bytes.len() != element.size() {
                return Err(format!(
                    "fill_value holds {} bytes, the element has {}",
                    bytes.len(),
                    element.size()
                )
                .into());
            }
            bytes
        }
        _ => encode_fill_value(&element, fill)?,
    };

    let dimension_names = dimension_names(obj.get("dimension_names"), shape.len())?;

    let mut zarrs_doc = doc.clone();
    zarrs_doc["data_type"] = Value::String(format!("r{}", element.size() * 8));
    zarrs_doc["fill_value"] = Value::Array(fill_value.iter().map(|b| Value::from(*b)).collect());
    let v3: ArrayMetadataV3 = serde_json::from_value(zarrs_doc)
        .map_err(|e| format!("metadata not accepted by zarrs: {e}"))?;
    Ok(ArrayMeta {
        attributes,
        shape,
        chunk_shape,
        dimension_names,
        element,
        is_struct,
        numpy_dtype: name == Some(NUMPY_DTYPE),
        fill_value,
        zarrs_metadata: ArrayMetadata::V3(v3),
    })
}

fn base64_decode(s: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s)
}

pub(crate) fn u64_list(value: Option<&Value>, what: &str) -> Result<Vec<u64>, MetadataProblem> {
    value
        .and_then(Value::as_array)
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
        .ok_or_else(|| {
            MetadataProblem::Invalid(format!("{what} must be a list of non-negative integers"))
        })
}

pub(crate) fn regular_chunk_shape(
    grid: Option<&Value>,
    rank: usize,
) -> Result<Vec<u64>, MetadataProblem> {
    let grid = grid.ok_or(MetadataProblem::Invalid("chunk_grid is missing".into()))?;
    match grid.get("name").and_then(Value::as_str) {
        Some("regular") => {}
        other => {
            return Err(MetadataProblem::Invalid(format!(
                "chunk grid {other:?} is not supported (only \"regular\")"
            )))
        }
    }
    let chunks = u64_list(
        grid.get("configuration").and_then(|c| c.get("chunk_shape")),
        "chunk_grid.configuration.chunk_shape",
    )?;
    if chunks.len() != rank || chunks.contains(&0) {
        return Err(MetadataProblem::Invalid(format!(
            "chunk_shape {chunks:?} must have {rank} positive entries, one per dimension"
        )));
    }
    Ok(chunks)
}

/// The `endian` of the array-to-bytes codec (inside `sharding_indexed`, that of its inner
/// `codecs`). Array-to-array codecs before it (`transpose`) move whole elements and are fine.
fn bytes_codec_endian(codecs: &[Value]) -> Result<Option<ByteOrder>, MetadataProblem> {
    for codec in codecs {
        let name = codec
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| MetadataProblem::Codec(format!("codec without a name: {codec}")))?;
        let config = codec.get("configuration");
        match name {
            "transpose" => continue,
            "bytes" | "endian" => {
                return match config.and_then(|c| c.get("endian")) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(e)) if e == "little" => Ok(Some(ByteOrder::Little)),
                    Some(Value::String(e)) if e == "big" => Ok(Some(ByteOrder::Big)),
                    Some(other) => Err(MetadataProblem::Codec(format!(
                        "bytes codec endian must be \"little\" or \"big\", found {other}"
                    ))),
                }
            }
            "sharding_indexed" => {
                let inner = config
                    .and_then(|c| c.get("codecs"))
                    .and_then(Value::as_array)
                    .ok_or_else(|| {
                        MetadataProblem::Codec(
                            "sharding_indexed codec needs configuration.codecs".to_string(),
                        )
                    })?;
                return bytes_codec_endian(inner);
            }
            other => {
                return Err(MetadataProblem::Codec(format!(
                    "codec '{other}' cannot serialize fixed-size elements for ndfusion; \
                     the array-to-bytes codec must be 'bytes' or 'sharding_indexed'"
                )))
            }
        }
    }
    Err(MetadataProblem::Codec(
        "codecs has no array-to-bytes codec ('bytes' or 'sharding_indexed')".to_string(),
    ))
}

pub(crate) fn dimension_names(
    value: Option<&Value>,
    rank: usize,
) -> Result<Vec<String>, MetadataProblem> {
    let given: Vec<Option<String>> = match value {
        None | Some(Value::Null) => vec![None; rank],
        Some(Value::Array(names)) if names.len() == rank => names
            .iter()
            .map(|n| match n {
                Value::Null => Ok(None),
                Value::String(s) if !s.is_empty() => Ok(Some(s.clone())),
                other => Err(MetadataProblem::Invalid(format!(
                    "dimension name {other} must be a non-empty string or null"
                ))),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(MetadataProblem::Invalid(format!(
                "dimension_names must be a list of {rank} names, found {other}"
            )))
        }
    };
    Ok(default_dimension_names(given))
}

/// Fills absent names with `dim_<i>`.
pub(crate) fn default_dimension_names(given: Vec<Option<String>>) -> Vec<String> {
    given
        .into_iter()
        .enumerate()
        .map(|(i, n)| n.unwrap_or_else(|| format!("dim_{i}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(dt: Value, fill: Value, codecs: Value) -> Result<ArrayMeta, String> {
        let doc = json!({
            "zarr_format": 3, "node_type": "array", "shape": [10, 4],
            "data_type": dt, "fill_value": fill, "codecs": codecs,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
            "chunk_key_encoding": {"name": "default"},
            "dimension_names": ["time", null],
        });
        parse_v3("a/zarr.json", doc.to_string().as_bytes()).map_err(|e| e.to_string())
    }

    fn two_fields() -> Value {
        json!({"name": "struct", "configuration": {"fields": [
            {"name": "a", "data_type": "int16"}, {"name": "b", "data_type": "uint8"}]}})
    }

    #[test]
    fn struct_array_becomes_raw_bits_for_zarrs() {
        let m = meta(
            two_fields(),
            json!({"a": -1, "b": 2}),
            json!([{"name": "bytes", "configuration": {"endian": "big"}}]),
        )
        .unwrap();
        assert_eq!(m.dimension_names, vec!["time", "dim_1"]);
        assert_eq!(m.fill_value, vec![0xff, 0xff, 2]);
        let ArrayMetadata::V3(v3) = &m.zarrs_metadata else {
            panic!()
        };
        assert_eq!(v3.data_type.name(), "r24");
    }

    #[test]
    fn multi_byte_struct_without_endian_is_refused() {
        let err = meta(
            two_fields(),
            json!({"a": 0, "b": 0}),
            json!([{"name": "bytes"}]),
        )
        .unwrap_err();
        assert!(err.contains("no \"endian\""), "{err}");
    }

    #[test]
    fn sharding_endian_comes_from_inner_codecs() {
        let codecs = json!([{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [2, 2],
            "codecs": [{"name": "bytes", "configuration": {"endian": "big"}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]}}]);
        let m = meta(two_fields(), json!({"a": 1, "b": 0}), codecs).unwrap();
        assert_eq!(m.fill_value, vec![0, 1, 0]);
    }

    #[test]
    fn unsupported_array_to_bytes_codec_is_named() {
        let err = meta(json!("float32"), json!(0.0), json!([{"name": "vlen-utf8"}])).unwrap_err();
        assert!(err.contains("'vlen-utf8'"), "{err}");
    }

    #[test]
    fn groups_and_bad_json_are_refused() {
        let err = parse_v3(
            "g/zarr.json",
            br#"{"zarr_format": 3, "node_type": "group"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("group"), "{err}");
        let err = parse_v3("g/zarr.json", br#"{"zarr_format": 3, "node_ty"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn absurd_sizes_are_errors_not_overflows() {
        let doc = |shape: Value, chunks: Value, dt: Value| {
            json!({
                "zarr_format": 3, "node_type": "array", "shape": shape,
                "data_type": dt, "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                "chunk_key_encoding": {"name": "default"},
            })
            .to_string()
        };
        let err = |text: String| {
            parse_v3("a/zarr.json", text.as_bytes())
                .unwrap_err()
                .to_string()
        };
        // A dimension near 2^63, elements past 2^64, a 64 GiB chunk, a 2^62-byte element.
        let e = err(doc(json!([u64::MAX - 1]), json!([10]), json!("uint8")));
        assert!(e.contains("does not fit a 64-bit index"), "{e}");
        let e = err(doc(
            json!([1u64 << 40, 1u64 << 40]),
            json!([10, 10]),
            json!("uint8"),
        ));
        assert!(e.contains("holds more than 2^64 elements"), "{e}");
        let e = err(doc(
            json!([1u64 << 40]),
            json!([1u64 << 33]),
            json!("float64"),
        ));
        assert!(e.contains("decodes to more than 4294967296 bytes"), "{e}");
        let huge = json!({"name": "r4611686018427387904"});
        let e = err(doc(json!([10]), json!([10]), huge));
        assert!(e.starts_with("invalid"), "{e}");
        let e = err(doc(json!([10]), json!([0]), json!("uint8")));
        assert!(e.contains("positive"), "{e}");
    }
}
