//! Kerchunk's Parquet references (fsspec's `LazyReferenceMapper`, written by
//! `kerchunk.df.refs_to_dataframe` and VirtualiZarr): a folder `refs.parq/` holding
//! `.zmetadata` (`{"metadata": {key: document}, "record_size": n}`) and, for each array,
//! `name/refs.<i>.parq`: the references of chunks `i * n .. (i + 1) * n` in C order of the
//! chunk grid, one row each — `raw` (inline bytes), else `path` with `offset` and `size`
//! (`size` 0: the whole file), else nothing (a chunk never written). Every record is read
//! when the table opens, within the metadata limit, into the same keys a JSON document
//! gives (`document.rs`).

use std::collections::HashMap;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type};
use serde_json::Value as Json;
use zarrs::storage::Bytes;

use super::document::{url_id, Reference, References, GENERATED_OVERHEAD};

/// Whether `location` names Parquet references: a folder or prefix named `*.parq` or
/// `*.parquet` (kerchunk's `refs.parq`).
pub(crate) fn is_parquet_references(location: &str) -> bool {
    let last = location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    let lower = last.to_ascii_lowercase();
    (lower.ends_with(".parq") && lower.len() > 5)
        || (lower.ends_with(".parquet") && lower.len() > 8)
}

/// The `.zmetadata` of Parquet references: the metadata documents as keys, and for each
/// array the record files to read (`name/refs.<i>.parq`) and how their rows name chunks.
pub(super) struct Plan {
    pub references: References,
    pub arrays: Vec<ArrayRecords>,
    record_size: u64,
    url_ids: HashMap<String, usize>,
}

/// One array's chunks, as its records list them.
pub(super) struct ArrayRecords {
    /// The array's key prefix (`temp`; empty for an array at the root).
    pub name: String,
    grid: Vec<u64>,
    separator: String,
    chunks: u64,
}

impl ArrayRecords {
    /// The record files holding the array's references.
    pub(super) fn files(&self, record_size: u64) -> impl Iterator<Item = String> + '_ {
        let prefix = match self.name.as_str() {
            "" => String::new(),
            name => format!("{name}/"),
        };
        (0..self.chunks.div_ceil(record_size)).map(move |i| format!("{prefix}refs.{i}.parq"))
    }

    /// The store key of chunk `linear` (C order).
    fn key(&self, mut linear: u64) -> String {
        let mut at = vec![0u64; self.grid.len()];
        for (i, &n) in self.grid.iter().enumerate().rev() {
            at[i] = linear % n;
            linear /= n;
        }
        let index = match at.is_empty() {
            true => "0".to_string(),
            false => (at.iter().map(u64::to_string))
                .collect::<Vec<_>>()
                .join(&self.separator),
        };
        match self.name.as_str() {
            "" => index,
            name => format!("{name}/{index}"),
        }
    }
}

impl Plan {
    /// Reads `.zmetadata`; the chunks its arrays have, counted as a JSON document's keys
    /// are, must fit in `max_bytes`.
    pub(super) fn parse(zmetadata: &[u8], max_bytes: u64) -> Result<Self, String> {
        let json: Json = crate::zarr::metadata::json::from_python_json(zmetadata)
            .map_err(|e| format!("its .zmetadata is not JSON: {e}"))?;
        let record_size = json
            .get("record_size")
            .and_then(Json::as_u64)
            .filter(|&n| n > 0)
            .ok_or("its .zmetadata has no positive 'record_size'")?;
        let Some(Json::Object(metadata)) = json.get("metadata") else {
            return Err("its .zmetadata has no 'metadata' object".into());
        };
        let mut references = References::default();
        let mut arrays = Vec::new();
        let mut budget = max_bytes.saturating_sub(zmetadata.len() as u64);
        for (key, document) in metadata {
            let text = match document {
                Json::String(text) => text.clone(),
                other => other.to_string(),
            };
            if let Some(name) = key.strip_suffix(".zarray") {
                let name = name.trim_end_matches('/').to_string();
                let array = array_records(&name, &text)?;
                let cost = array.chunks.checked_mul(GENERATED_OVERHEAD);
                budget = cost.and_then(|c| budget.checked_sub(c)).ok_or_else(|| {
                    format!(
                        "array '{name}' has {} chunks, more references than a document \
                             within the metadata limit could hold",
                        array.chunks
                    )
                })?;
                arrays.push(array);
            }
            let inline = Reference::Inline(Bytes::from(text.into_bytes()));
            references.keys.insert(key.clone(), inline);
        }
        Ok(Plan {
            references,
            arrays,
            record_size,
            url_ids: HashMap::new(),
        })
    }

    pub(super) fn record_size(&self) -> u64 {
        self.record_size
    }

    /// Adds the references of record `index` of `array` (the bytes of its Parquet file).
    pub(super) fn add_record(
        &mut self,
        array: usize,
        index: u64,
        file: Bytes,
    ) -> Result<(), String> {
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
            .map_err(|e| format!("not a Parquet file: {e}"))?;
        let first = index * self.record_size;
        let mut row = first;
        for batch in reader {
            let batch = batch.map_err(|e| format!("reading it: {e}"))?;
            let column = |name: &str| {
                batch
                    .column_by_name(name)
                    .ok_or_else(|| format!("it has no column '{name}'"))
            };
            let as_text = |name: &str| -> Result<arrow::array::StringArray, String> {
                let c = arrow::compute::cast(column(name)?, &DataType::Utf8)
                    .map_err(|e| format!("column '{name}': {e}"))?;
                Ok(c.as_string::<i32>().clone())
            };
            let as_int = |name: &str| -> Result<arrow::array::Int64Array, String> {
                let c = arrow::compute::cast(column(name)?, &DataType::Int64)
                    .map_err(|e| format!("column '{name}': {e}"))?;
                Ok(c.as_primitive::<Int64Type>().clone())
            };
            let path = as_text("path")?;
            let (offset, size) = (as_int("offset")?, as_int("size")?);
            let raw = match batch.column_by_name("raw") {
                Some(raw) => Some(
                    arrow::compute::cast(raw, &DataType::Binary)
                        .map_err(|e| format!("column 'raw': {e}"))?,
                ),
                None => None,
            };
            let array = &self.arrays[array];
            for r in 0..batch.num_rows() {
                let linear = row;
                row += 1;
                if linear >= array.chunks || linear >= first + self.record_size {
                    break;
                }
                let reference = match raw.as_ref().filter(|raw| raw.is_valid(r)) {
                    Some(raw) => {
                        Reference::Inline(Bytes::copy_from_slice(raw.as_binary::<i32>().value(r)))
                    }
                    None if path.is_null(r) => continue,
                    None => {
                        let (start, len) = (offset.value(r), size.value(r));
                        let (Ok(start), Ok(len)) = (u64::try_from(start), u64::try_from(len))
                        else {
                            return Err(format!(
                                "row {r}: offset {start} or size {len} is negative"
                            ));
                        };
                        let end = start
                            .checked_add(len)
                            .ok_or_else(|| format!("row {r}: offset + size overflows"))?;
                        let url = url_id(
                            path.value(r).to_string(),
                            &mut self.references.urls,
                            &mut self.url_ids,
                        );
                        let range = (len > 0).then_some(start..end);
                        Reference::File { url, range }
                    }
                };
                self.references.keys.insert(array.key(linear), reference);
            }
        }
        Ok(())
    }
}

/// What `.zarray` says of an array's chunks.
fn array_records(name: &str, zarray: &str) -> Result<ArrayRecords, String> {
    let bad = |why: &str| format!("'{name}/.zarray': {why}");
    let doc: Json = serde_json::from_str(zarray).map_err(|e| bad(&e.to_string()))?;
    let list = |key: &str| -> Result<Vec<u64>, String> {
        (doc.get(key).and_then(Json::as_array))
            .ok_or_else(|| bad(&format!("no '{key}' list")))?
            .iter()
            .map(|v| v.as_u64().ok_or_else(|| bad(&format!("'{key}' holds {v}"))))
            .collect()
    };
    let (shape, chunks) = (list("shape")?, list("chunks")?);
    if shape.len() != chunks.len() || chunks.contains(&0) {
        return Err(bad("its chunks do not fit its shape"));
    }
    let grid: Vec<u64> = (shape.iter().zip(&chunks))
        .map(|(&n, &c)| n.div_ceil(c))
        .collect();
    let count = (grid.iter()).try_fold(1u64, |n, &g| n.checked_mul(g));
    let count = count.ok_or_else(|| bad("its chunk grid overflows"))?;
    let separator = (doc.get("dimension_separator").and_then(Json::as_str))
        .unwrap_or(".")
        .to_string();
    Ok(ArrayRecords {
        name: name.to_string(),
        grid,
        separator,
        chunks: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parquet_locations_and_chunk_keys() {
        assert!(is_parquet_references("data/refs.parq"));
        assert!(is_parquet_references("s3://b/refs.parquet/"));
        assert!(!is_parquet_references("data/.parq"));
        assert!(!is_parquet_references("data/refs.json"));
        let array = array_records("temp", r#"{"shape": [5, 4], "chunks": [2, 3]}"#).unwrap();
        assert_eq!((array.chunks, array.grid.clone()), (6, vec![3, 2]));
        assert_eq!(array.key(0), "temp/0.0");
        assert_eq!(array.key(5), "temp/2.1");
        let files: Vec<String> = array.files(4).collect();
        assert_eq!(files, ["temp/refs.0.parq", "temp/refs.1.parq"]);
        let huge = r#"{"metadata": {"a/.zarray": "{\"shape\": [1000000000], \"chunks\": [1]}"}, "record_size": 10}"#;
        let err = Plan::parse(huge.as_bytes(), 1 << 20).err().unwrap();
        assert!(err.contains("array 'a' has 1000000000 chunks"), "{err}");
    }
}
