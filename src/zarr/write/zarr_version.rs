//! How a gridded write spells a dataset in each Zarr format, as xarray 2026.9 writes one
//! with zarr-python 3.4.2 (`Dataset.to_zarr(zarr_format=...)`):
//!
//! - **Zarr 3**: a `zarr.json` per array (`dimension_names`, a float's `_FillValue` as an
//!   attribute), chunk keys `temp/c/0/1`, and the group's `zarr.json` holding every array's
//!   document inline (`consolidated_metadata`).
//! - **Zarr 2**: `.zarray` and `.zattrs` per array (`_ARRAY_DIMENSIONS`; a float's fill value
//!   in `.zarray`, which xarray reads as its `_FillValue`), chunk keys `temp/0.1`, and the
//!   group's `.zattrs`, `.zmetadata` (every document, consolidated) and `.zgroup`.
//!
//! The group's last document (`zarr.json`, `.zgroup`) is the commit ([`Commit`]): it is put
//! after every array is complete, so an object store shows no half-written dataset.

use serde_json::{json, Map, Value};

use super::options::{Compression, GZIP_LEVEL, ZSTD_LEVEL};
use super::sink::codecs;
use super::target::Commit;
use super::variable::Stored;

/// xarray's `_FillValue` of a float variable in Zarr 3: NaN as a little-endian float64, base64.
const NAN_FILL: &str = "AAAAAAAA+H8=";

/// The Zarr format a dataset is written in (`zarr_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZarrVersion {
    V2,
    V3,
}

/// One array of a dataset, as its documents describe it.
pub(crate) struct ArraySpec<'a> {
    pub name: &'a str,
    pub stored: &'a Stored,
    pub shape: &'a [usize],
    pub chunks: &'a [usize],
    pub dimensions: &'a [&'a str],
}

impl ZarrVersion {
    /// The key of the chunk at grid position `index` of array `name`.
    pub(crate) fn chunk_key(self, name: &str, index: &[usize]) -> String {
        let index: Vec<String> = index.iter().map(usize::to_string).collect();
        match self {
            ZarrVersion::V3 => format!("{name}/c/{}", index.join("/")),
            ZarrVersion::V2 => format!("{name}/{}", index.join(".")),
        }
    }

    /// The documents of one array, `(key, document)`, each put before the group's.
    pub(crate) fn array_documents(
        self,
        array: &ArraySpec,
        compression: Compression,
    ) -> Vec<(String, Value)> {
        let stored = array.stored;
        let mut attributes = stored.attributes();
        let name = array.name;
        match self {
            ZarrVersion::V3 => {
                if stored.is_float() {
                    attributes.insert("_FillValue".into(), json!(NAN_FILL));
                }
                let doc = json!({
                    "zarr_format": 3,
                    "node_type": "array",
                    "shape": array.shape,
                    "data_type": stored.data_type(),
                    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": array.chunks}},
                    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                    "fill_value": stored.fill_value(),
                    "codecs": codecs(compression, stored.is_string()),
                    "attributes": attributes,
                    "dimension_names": array.dimensions,
                    "storage_transformers": [],
                });
                vec![(format!("{name}/zarr.json"), doc)]
            }
            ZarrVersion::V2 => {
                attributes.insert("_ARRAY_DIMENSIONS".into(), json!(array.dimensions));
                let compressor = match compression {
                    Compression::Zstd => {
                        json!({"id": "zstd", "level": ZSTD_LEVEL, "checksum": false})
                    }
                    Compression::Gzip => json!({"id": "gzip", "level": GZIP_LEVEL}),
                    Compression::None => Value::Null,
                };
                let (fill_value, filters) = match stored {
                    _ if stored.is_float() => (json!("NaN"), Value::Null),
                    _ if stored.is_string() => (Value::Null, json!([{"id": "vlen-utf8"}])),
                    _ => (Value::Null, Value::Null),
                };
                let zarray = json!({
                    "zarr_format": 2,
                    "shape": array.shape,
                    "chunks": array.chunks,
                    "dtype": stored.dtype_v2(),
                    "fill_value": fill_value,
                    "order": "C",
                    "filters": filters,
                    "dimension_separator": ".",
                    "compressor": compressor,
                });
                vec![
                    (format!("{name}/.zarray"), zarray),
                    (format!("{name}/.zattrs"), Value::Object(attributes)),
                ]
            }
        }
    }

    /// The group's documents given every array's: those put before the commit, and the
    /// commit (the consolidated metadata holds every array's documents).
    pub(crate) fn group_documents(
        self,
        attributes: Map<String, Value>,
        arrays: &[(String, Value)],
    ) -> (Vec<(String, Value)>, Commit) {
        let pretty = |doc: &Value| serde_json::to_vec_pretty(doc).unwrap_or_default();
        match self {
            ZarrVersion::V3 => {
                let consolidated: Map<String, Value> = (arrays.iter())
                    .map(|(key, doc)| {
                        let name = key.strip_suffix("/zarr.json").unwrap_or(key);
                        (name.to_string(), doc.clone())
                    })
                    .collect();
                let group = json!({
                    "zarr_format": 3,
                    "node_type": "group",
                    "attributes": attributes,
                    "consolidated_metadata": {"kind": "inline", "must_understand": false, "metadata": consolidated},
                });
                (Vec::new(), Commit::new("zarr.json", pretty(&group)))
            }
            ZarrVersion::V2 => {
                let zgroup = json!({"zarr_format": 2});
                let zattrs = Value::Object(attributes);
                let mut consolidated = Map::new();
                consolidated.insert(".zgroup".into(), zgroup.clone());
                consolidated.insert(".zattrs".into(), zattrs.clone());
                consolidated.extend(arrays.iter().cloned());
                let zmetadata = json!({"metadata": consolidated, "zarr_consolidated_format": 1});
                let before = vec![(".zattrs".into(), zattrs), (".zmetadata".into(), zmetadata)];
                (before, Commit::new(".zgroup", pretty(&zgroup)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, TimeUnit};

    use super::*;

    fn documents(version: ZarrVersion, stored: &Stored) -> Vec<(String, Value)> {
        let array = ArraySpec {
            name: "t",
            stored,
            shape: &[4, 3],
            chunks: &[2, 3],
            dimensions: &["time", "lat"],
        };
        version.array_documents(&array, Compression::Gzip)
    }

    #[test]
    fn each_format_spells_keys_and_documents_as_xarray_writes_them() {
        assert_eq!(ZarrVersion::V3.chunk_key("t", &[1, 0]), "t/c/1/0");
        assert_eq!(ZarrVersion::V2.chunk_key("t", &[1, 0]), "t/1.0");
        assert_eq!(ZarrVersion::V2.chunk_key("time", &[3]), "time/3");
        let float = Stored::of("t", &DataType::Float32, true).unwrap();
        let v3 = documents(ZarrVersion::V3, &float);
        assert_eq!(v3[0].0, "t/zarr.json");
        assert_eq!(v3[0].1["attributes"]["_FillValue"], NAN_FILL);
        assert_eq!(v3[0].1["dimension_names"], json!(["time", "lat"]));
        let v2 = documents(ZarrVersion::V2, &float);
        assert_eq!(
            (v2[0].0.as_str(), v2[1].0.as_str()),
            ("t/.zarray", "t/.zattrs")
        );
        assert_eq!(v2[0].1["dtype"], "<f4");
        assert_eq!(v2[0].1["fill_value"], "NaN");
        assert_eq!(
            v2[0].1["compressor"],
            json!({"id": "gzip", "level": GZIP_LEVEL})
        );
        assert_eq!(v2[1].1, json!({"_ARRAY_DIMENSIONS": ["time", "lat"]}));
        let text = Stored::of("s", &DataType::Utf8, true).unwrap();
        let v3 = documents(ZarrVersion::V3, &text);
        assert_eq!(v3[0].1["data_type"], "string");
        assert_eq!(v3[0].1["fill_value"], "");
        assert_eq!(v3[0].1["codecs"][0]["name"], "vlen-utf8");
        let v2 = documents(ZarrVersion::V2, &text);
        assert_eq!(v2[0].1["dtype"], "|O");
        assert_eq!(v2[0].1["filters"], json!([{"id": "vlen-utf8"}]));
        let time = Stored::of(
            "t",
            &DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        );
        let v2 = documents(ZarrVersion::V2, &time.unwrap());
        assert_eq!(v2[1].1["units"], "milliseconds since 1970-01-01");
        assert_eq!(v2[0].1["dtype"], "<i8");
    }

    #[test]
    fn the_group_document_is_the_commit_and_consolidates_every_array() {
        let float = Stored::of("t", &DataType::Float64, true).unwrap();
        let arrays = documents(ZarrVersion::V2, &float);
        let mut attrs = Map::new();
        attrs.insert("title".into(), json!("x"));
        let (before, commit) = ZarrVersion::V2.group_documents(attrs.clone(), &arrays);
        assert_eq!(commit.key, ".zgroup");
        assert_eq!(before[0], (".zattrs".to_string(), json!({"title": "x"})));
        let consolidated = &before[1].1["metadata"];
        assert_eq!(consolidated["t/.zarray"]["dtype"], "<f8");
        assert_eq!(consolidated[".zgroup"], json!({"zarr_format": 2}));
        let arrays = documents(ZarrVersion::V3, &float);
        let (before, commit) = ZarrVersion::V3.group_documents(attrs, &arrays);
        assert!(before.is_empty());
        assert_eq!(commit.key, "zarr.json");
        let group: Value = serde_json::from_slice(&commit.bytes).unwrap();
        assert_eq!(
            group["consolidated_metadata"]["metadata"]["t"]["data_type"],
            "float64"
        );
        assert_eq!(group["attributes"]["title"], "x");
    }
}
