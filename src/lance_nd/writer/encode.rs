//! Encoding a write's batches as table rows, against the table's full schema.

use std::sync::Arc;

use arrow::array::{new_null_array, ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;

use super::cast::{cast_array, cast_attrs, Casts};
use super::invalid;
use super::statistics::stats_column;
use crate::error::Result;
use crate::lance_nd::format::STATS_PREFIX;
use crate::nd::arrow_encoding::{
    conform, encode_attrs, encode_nd_arrays, is_nd_array_field, nd_array_parts, struct_fields,
    GLOBAL_ATTRS_COLUMN,
};
use crate::nd::{NdArrowArray, NdRecordBatch};

/// One table row per batch, encoded against the table's full schema (absent arrays, keys
/// and columns are null).
pub(crate) fn encode_rows(
    uri: &str,
    schema: &SchemaRef,
    batches: &[NdRecordBatch],
    casts: &Casts,
) -> Result<RecordBatch> {
    let schema_error = |e: String| invalid(uri, e);
    let columns = schema
        .fields()
        .iter()
        .map(|field| -> Result<ArrayRef> {
            let name = field.name();
            if is_nd_array_field(field) {
                let (value_type, attrs) =
                    nd_array_parts(field).map_err(|e| schema_error(e.to_string()))?;
                let cast_rows: Vec<Option<NdArrowArray>> = batches
                    .iter()
                    .map(|b| {
                        b.array(name)
                            .map(|a| cast_array(uri, name, a, &value_type, &attrs, casts))
                            .transpose()
                    })
                    .collect::<Result<_, _>>()?;
                let rows: Vec<Option<&NdArrowArray>> =
                    cast_rows.iter().map(Option::as_ref).collect();
                let column = encode_nd_arrays(&rows, &value_type, &attrs)
                    .map_err(|e| schema_error(e.in_array(name).to_string()))?;
                conform(column, field.data_type())
                    .map_err(|e| schema_error(format!("array '{name}': {e}")))
            } else if name == GLOBAL_ATTRS_COLUMN {
                let keys = struct_fields(field.data_type());
                let rows: Vec<Vec<(String, ArrayRef)>> = batches
                    .iter()
                    .map(|b| cast_attrs(uri, b.global_attrs(), &keys))
                    .collect::<Result<_, _>>()?;
                let refs: Vec<Option<&[(String, ArrayRef)]>> =
                    rows.iter().map(|r| Some(r.as_slice())).collect();
                let column: ArrayRef = Arc::new(
                    encode_attrs(&refs, &keys, None).map_err(|e| schema_error(e.to_string()))?,
                );
                conform(column, field.data_type())
                    .map_err(|e| schema_error(format!("{GLOBAL_ATTRS_COLUMN}: {e}")))
            } else if let Some(array) = name.strip_prefix(STATS_PREFIX) {
                stats_column(uri, field, batches, array, casts)
            } else {
                Ok(new_null_array(field.data_type(), batches.len()))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns).map_err(|e| schema_error(e.to_string()))
}
