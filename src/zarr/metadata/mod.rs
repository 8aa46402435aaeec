//! What a Zarr node is: `node.rs` reads a location as an array or a group; `array_meta.rs`
//! parses an array's `zarr.json` (v3) into [`array_meta::ArrayMeta`], `v2.rs` its `.zarray`
//! and `.zattrs`; `data_type.rs`, `fill_value.rs` and `element.rs` are the data type, the fill
//! value and the layout of one element; `json.rs` reads a document as JSON (with Python's bare
//! `NaN`); `attributes.rs` turns attributes into the
//! `__global_attrs__` column; `schema.rs` is the table schema of an array.

pub(crate) mod array_meta;
pub(crate) mod attributes;
pub(crate) mod data_type;
pub(crate) mod element;
pub(crate) mod fill_value;
pub(crate) mod json;
pub(crate) mod node;
pub(crate) mod problem;
pub(crate) mod schema;
pub(crate) mod v2;
