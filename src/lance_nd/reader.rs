//! Reading a lance-nd table back as nd record batches.

use std::collections::HashMap;

use arrow::array::{AsArray, RecordBatch};
use futures::TryStreamExt;

use super::damage::read_error_naming_files;
use super::format::read_error;
use super::location::TableLocation;
use crate::error::{Error, Result};
use crate::nd::arrow_encoding::{
    decode_attrs, decode_nd_array, is_nd_array_field, GLOBAL_ATTRS_COLUMN,
};
use crate::nd::NdRecordBatch;
use crate::storage::StorageOptions;
use crate::table_options::{FormatOptions, OptionKind, OptionSpec};

const ARRAYS: OptionSpec = OptionSpec::new(
    "arrays",
    OptionKind::Names,
    "read only these arrays, comma-separated (default: every array)",
);
const READ_OPTIONS: &[OptionSpec] = &[ARRAYS];

/// What [`read_nd_batches`] reads: which arrays, which rows, from where.
///
/// ```no_run
/// # async fn demo() -> ndfusion::Result<()> {
/// use ndfusion::{read_nd_batches, ReadOptions};
/// let options = ReadOptions::new()
///     .with_arrays(["temperature"])
///     .with_filter("__global_attrs__.id = 'a'");
/// let batches = read_nd_batches("tests/data/lance_nd/doc_example.lance", &options).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    arrays: Option<Vec<String>>,
    filter: Option<String>,
    storage: StorageOptions,
}

impl ReadOptions {
    /// Every array of every row.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads only these arrays (each must exist in the table).
    pub fn with_arrays<S: Into<String>>(mut self, arrays: impl IntoIterator<Item = S>) -> Self {
        self.arrays = Some(arrays.into_iter().map(Into::into).collect());
        self
    }

    /// Reads only the rows passing this Lance SQL filter, such as `__global_attrs__.id = 'a'`.
    pub fn with_filter(mut self, filter: impl Into<String>) -> Self {
        self.filter = Some(filter.into());
        self
    }

    /// How a remote location is reached.
    pub fn with_storage(mut self, storage: StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// The options as a map of strings (what the Python package passes): `arrays`
    /// (comma-separated names) and the storage settings of [`StorageOptions`]; any other key
    /// is an error listing the known ones. The filter is set apart, with
    /// [`with_filter`](Self::with_filter).
    pub fn from_map(options: &HashMap<String, String>) -> Result<Self> {
        let (set, storage) = FormatOptions::from_sql(READ_OPTIONS, options, "read_nd_batches")?;
        Ok(ReadOptions {
            arrays: set.names(&ARRAYS).map(<[String]>::to_vec),
            filter: None,
            storage,
        })
    }
}

/// Reads the rows of the lance-nd table at `location` that pass the filter, as nd record
/// batches.
pub async fn read_nd_batches(location: &str, options: &ReadOptions) -> Result<Vec<NdRecordBatch>> {
    let location = TableLocation::resolve(location, &options.storage)?;
    let uri = location.shown.as_str();
    let dataset = location.open().await?;
    let schema = arrow::datatypes::Schema::from(dataset.schema());
    let mut columns: Vec<String> = schema
        .fields()
        .iter()
        .filter(|f| is_nd_array_field(f))
        .map(|f| f.name().clone())
        .filter(|n| {
            options
                .arrays
                .as_ref()
                .is_none_or(|wanted| wanted.contains(n))
        })
        .collect();
    if let Some(wanted) = &options.arrays {
        if let Some(missing) = wanted.iter().find(|w| !columns.contains(w)) {
            return Err(Error::InvalidTable {
                uri: uri.to_string(),
                reason: format!("no array '{missing}'"),
            });
        }
    }
    if schema.field_with_name(GLOBAL_ATTRS_COLUMN).is_ok() {
        columns.push(GLOBAL_ATTRS_COLUMN.to_string());
    }
    let mut scanner = dataset.scan();
    scanner.project(&columns).map_err(|e| read_error(uri, e))?;
    if let Some(filter) = &options.filter {
        scanner.filter(filter).map_err(|e| read_error(uri, e))?;
    }
    let batches = scanner
        .try_into_stream()
        .await
        .map_err(|e| read_error(uri, e))?
        .try_collect::<Vec<RecordBatch>>()
        .await;
    let batches = match batches {
        Ok(batches) => batches,
        Err(e) => return Err(read_error_naming_files(&dataset, uri, e).await),
    };
    let mut out = Vec::new();
    for batch in &batches {
        out.extend(decode_rows(uri, batch, out.len())?);
    }
    Ok(out)
}

/// Decodes every row of a scanned batch; `first_row` numbers the rows in errors.
fn decode_rows(uri: &str, batch: &RecordBatch, first_row: usize) -> Result<Vec<NdRecordBatch>> {
    let schema = batch.schema();
    (0..batch.num_rows())
        .map(|row| {
            let row_error = |source| Error::InvalidRow {
                uri: uri.to_string(),
                row: (first_row + row) as u64,
                source,
            };
            let mut arrays = Vec::new();
            let mut globals = Vec::new();
            for (field, column) in schema.fields().iter().zip(batch.columns()) {
                let Some(column) = column.as_struct_opt() else {
                    continue;
                };
                if is_nd_array_field(field) {
                    if let Some(array) =
                        decode_nd_array(column, row, field.name()).map_err(row_error)?
                    {
                        arrays.push((field.name().clone(), array));
                    }
                } else if field.name() == GLOBAL_ATTRS_COLUMN {
                    globals = decode_attrs(column, row);
                }
            }
            NdRecordBatch::try_new(arrays, globals).map_err(row_error)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_options_from_a_map_take_arrays_and_storage_settings() {
        let options = ReadOptions::from_map(&HashMap::from([
            ("arrays".to_string(), "temperature, x".to_string()),
            ("aws.allow_http".to_string(), "true".to_string()),
        ]))
        .unwrap();
        assert_eq!(
            options.arrays.as_deref(),
            Some(&["temperature".to_string(), "x".to_string()][..])
        );
        assert_eq!(options.storage.get("aws.allow_http"), Some("true"));
        let err = ReadOptions::from_map(&HashMap::from([("filter".to_string(), "x".to_string())]))
            .unwrap_err();
        assert!(
            err.to_string().starts_with(
                "invalid option 'filter': read_nd_batches does not know this option; known: arrays"
            ),
            "{err}"
        );
    }
}
