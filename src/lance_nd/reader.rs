//! Reading a lance-nd table back as nd record batches.

use arrow::array::{AsArray, RecordBatch};
use futures::TryStreamExt;

use super::table::{open_lance_nd, LanceNdError};
use crate::nd::arrow_encoding::{
    decode_attrs, decode_nd_array, is_nd_array_field, GLOBAL_ATTRS_COLUMN,
};
use crate::nd::NdRecordBatch;

/// What a read takes from the table.
#[derive(Debug, Clone, Default)]
pub struct NdScan {
    /// The arrays to read (all when `None`).
    pub arrays: Option<Vec<String>>,
    /// A Lance SQL filter, such as `__global_attrs__.id = 'a'`.
    pub filter: Option<String>,
}

/// Reads the rows of the table at `uri` that pass the filter, as nd record batches.
pub async fn read_nd_batches(uri: &str, scan: &NdScan) -> Result<Vec<NdRecordBatch>, LanceNdError> {
    let dataset = open_lance_nd(uri).await?;
    let schema = arrow::datatypes::Schema::from(dataset.schema());
    let mut columns: Vec<String> = schema
        .fields()
        .iter()
        .filter(|f| is_nd_array_field(f))
        .map(|f| f.name().clone())
        .filter(|n| scan.arrays.as_ref().is_none_or(|wanted| wanted.contains(n)))
        .collect();
    if let Some(wanted) = &scan.arrays {
        if let Some(missing) = wanted.iter().find(|w| !columns.contains(w)) {
            return Err(LanceNdError::Schema(format!(
                "the table at {uri} has no array '{missing}'"
            )));
        }
    }
    if schema.field_with_name(GLOBAL_ATTRS_COLUMN).is_ok() {
        columns.push(GLOBAL_ATTRS_COLUMN.to_string());
    }
    let mut scanner = dataset.scan();
    scanner
        .project(&columns)
        .map_err(|e| LanceNdError::lance(uri, e))?;
    if let Some(filter) = &scan.filter {
        scanner
            .filter(filter)
            .map_err(|e| LanceNdError::lance(uri, e))?;
    }
    let batches: Vec<RecordBatch> = scanner
        .try_into_stream()
        .await
        .map_err(|e| LanceNdError::lance(uri, e))?
        .try_collect()
        .await
        .map_err(|e| LanceNdError::lance(uri, e))?;
    let mut out = Vec::new();
    for batch in &batches {
        out.extend(decode_rows(batch, out.len())?);
    }
    Ok(out)
}

/// Decodes every row of a scanned batch; `first_row` numbers the rows in errors.
pub fn decode_rows(
    batch: &RecordBatch,
    first_row: usize,
) -> Result<Vec<NdRecordBatch>, LanceNdError> {
    let schema = batch.schema();
    (0..batch.num_rows())
        .map(|row| {
            let mut arrays = Vec::new();
            let mut globals = Vec::new();
            for (field, column) in schema.fields().iter().zip(batch.columns()) {
                let Some(column) = column.as_struct_opt() else {
                    continue;
                };
                if is_nd_array_field(field) {
                    if let Some(array) = decode_nd_array(column, row, field.name())
                        .map_err(|e| LanceNdError::Data(format!("row {}: {e}", first_row + row)))?
                    {
                        arrays.push((field.name().clone(), array));
                    }
                } else if field.name() == GLOBAL_ATTRS_COLUMN {
                    globals = decode_attrs(column, row);
                }
            }
            NdRecordBatch::try_new(arrays, globals)
                .map_err(|e| LanceNdError::Data(format!("row {}: {e}", first_row + row)))
        })
        .collect()
}
