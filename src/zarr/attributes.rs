//! Zarr attributes as the `__global_attrs__` column, and filters on it decided when the plan is
//! made.
//!
//! JSON strings become `Utf8`, integers `Int64`, other numbers `Float64`, booleans `Boolean`,
//! objects `Struct`, arrays of one scalar kind `List` of it; anything else (mixed arrays, empty
//! objects) its JSON text. xarray's reserved `_ARRAY_DIMENSIONS` is left out.

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, ListArray,
    RecordBatch, StringArray, StructArray,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{DataType, Field, Fields, Schema};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::logical_expr::expr_rewriter::unnormalize_col;
use datafusion::logical_expr::Expr;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::nd::arrow_encoding::GLOBAL_ATTRS_COLUMN;

/// Attributes xarray reserves for itself.
const RESERVED: &[&str] = &["_ARRAY_DIMENSIONS"];

/// The global attributes of a table: one struct value, or `None` when there are none.
#[derive(Debug, Clone)]
pub(crate) struct GlobalAttrs {
    value: Arc<StructArray>,
}

impl GlobalAttrs {
    pub(crate) fn from_json(attrs: &Map<String, Value>) -> Option<Self> {
        let (fields, columns): (Vec<Field>, Vec<ArrayRef>) = attrs
            .iter()
            .filter(|(k, _)| !RESERVED.contains(&k.as_str()))
            .map(|(k, v)| {
                let array = json_value(v);
                (Field::new(k, array.data_type().clone(), true), array)
            })
            .unzip();
        if fields.is_empty() {
            return None;
        }
        let value = StructArray::new(Fields::from(fields), columns, None);
        Some(GlobalAttrs {
            value: Arc::new(value),
        })
    }

    /// The column's field.
    pub(crate) fn field(&self) -> Field {
        Field::new(GLOBAL_ATTRS_COLUMN, self.value.data_type().clone(), false)
    }

    /// The value repeated on `rows` rows.
    pub(crate) fn repeated(&self, rows: usize) -> Result<ArrayRef> {
        ScalarValue::Struct(Arc::clone(&self.value))
            .to_array_of_size(rows)
            .map_err(|e| Error::Internal(format!("repeating global attributes: {e}")))
    }

    /// Whether `filter` holds for the table. Only filters that read nothing but
    /// `__global_attrs__` can be decided here ([`reads_only_global_attrs`]); NULL is false, as in
    /// a WHERE clause.
    pub(crate) fn holds(&self, filter: &Expr, state: &dyn Session) -> Result<bool> {
        let schema = Arc::new(Schema::new(vec![self.field()]));
        let evaluation = |e: datafusion::error::DataFusionError| Error::Filter {
            filter: filter.to_string(),
            source: e,
        };
        let df_schema = DFSchema::try_from(Arc::clone(&schema)).map_err(evaluation)?;
        let predicate = state
            .create_physical_expr(unnormalize_col(filter.clone()), &df_schema)
            .map_err(evaluation)?;
        let batch = RecordBatch::try_new(schema, vec![Arc::clone(&self.value) as ArrayRef])
            .map_err(|e| Error::arrow("global attributes", e))?;
        let result = predicate
            .evaluate(&batch)
            .and_then(|v| v.into_array(1))
            .map_err(evaluation)?;
        let result = result.as_boolean_opt().ok_or_else(|| Error::Filter {
            filter: filter.to_string(),
            source: datafusion::error::DataFusionError::Plan("not a boolean filter".into()),
        })?;
        Ok(result.is_valid(0) && result.value(0))
    }
}

/// Whether `filter` reads the table's `__global_attrs__` and nothing else.
pub(crate) fn reads_only_global_attrs(filter: &Expr) -> bool {
    let refs = filter.column_refs();
    !refs.is_empty() && refs.iter().all(|c| c.name == GLOBAL_ATTRS_COLUMN)
}

/// One JSON value as a one-element Arrow array.
fn json_value(value: &Value) -> ArrayRef {
    match value {
        Value::Null => new_null_array(&DataType::Null, 1),
        Value::Bool(b) => Arc::new(BooleanArray::from(vec![*b])),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Arc::new(Int64Array::from(vec![i])),
            None => Arc::new(Float64Array::from(vec![n.as_f64().unwrap_or(f64::NAN)])),
        },
        Value::String(s) => Arc::new(StringArray::from(vec![s.as_str()])),
        Value::Object(map) if !map.is_empty() => {
            let (fields, columns): (Vec<Field>, Vec<ArrayRef>) = map
                .iter()
                .map(|(k, v)| {
                    let array = json_value(v);
                    (Field::new(k, array.data_type().clone(), true), array)
                })
                .unzip();
            Arc::new(StructArray::new(Fields::from(fields), columns, None))
        }
        Value::Array(items) => json_list(items).unwrap_or_else(|| json_text(value)),
        Value::Object(_) => json_text(value),
    }
}

/// A list of scalars of one kind (integers and other numbers together as Float64).
fn json_list(items: &[Value]) -> Option<ArrayRef> {
    let values: ArrayRef = if items.iter().all(Value::is_string) {
        Arc::new(StringArray::from_iter_values(
            items.iter().filter_map(Value::as_str),
        ))
    } else if items.iter().all(Value::is_boolean) && !items.is_empty() {
        Arc::new(BooleanArray::from(
            items.iter().filter_map(Value::as_bool).collect::<Vec<_>>(),
        ))
    } else if items.iter().all(Value::is_i64) && !items.is_empty() {
        Arc::new(Int64Array::from_iter_values(
            items.iter().filter_map(Value::as_i64),
        ))
    } else if items.iter().all(Value::is_number) && !items.is_empty() {
        Arc::new(Float64Array::from_iter_values(
            items.iter().filter_map(Value::as_f64),
        ))
    } else {
        return None;
    };
    let field = Arc::new(Field::new("item", values.data_type().clone(), true));
    let offsets = OffsetBuffer::from_lengths([values.len()]);
    Some(Arc::new(ListArray::new(field, offsets, values, None)))
}

fn json_text(value: &Value) -> ArrayRef {
    Arc::new(StringArray::from(vec![value.to_string()]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_types_become_arrow_types() {
        let attrs = json!({
            "id": "a", "version": 3, "scale": 0.5, "calibrated": true, "none": null,
            "origin": {"lat": 10.5, "name": "buoy"}, "levels": [1, 2, 3], "mixed": [1, 2.5],
            "words": ["x", "y"], "odd": [1, "x"], "empty": {}, "_ARRAY_DIMENSIONS": ["x"]
        });
        let g = GlobalAttrs::from_json(attrs.as_object().unwrap()).unwrap();
        let DataType::Struct(fields) = g.field().data_type().clone() else {
            panic!()
        };
        let types: Vec<(String, String)> = fields
            .iter()
            .map(|f| (f.name().clone(), f.data_type().to_string()))
            .collect();
        let get = |k: &str| types.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(get("id"), "Utf8");
        assert_eq!(get("version"), "Int64");
        assert_eq!(get("scale"), "Float64");
        assert_eq!(get("calibrated"), "Boolean");
        assert_eq!(get("none"), "Null");
        assert!(get("origin").starts_with("Struct("), "{}", get("origin"));
        assert!(get("levels").contains("Int64"));
        assert!(get("mixed").contains("Float64"));
        assert!(get("words").contains("Utf8"));
        assert_eq!(get("odd"), "Utf8");
        assert_eq!(get("empty"), "Utf8");
        assert!(types.iter().all(|(n, _)| n != "_ARRAY_DIMENSIONS"));
        assert!(
            GlobalAttrs::from_json(json!({"_ARRAY_DIMENSIONS": []}).as_object().unwrap()).is_none()
        );
        assert_eq!(g.repeated(3).unwrap().len(), 3);
    }
}
