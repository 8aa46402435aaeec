//! Zarr attributes as the `__global_attrs__` column, and filters on it decided when the plan is
//! made.
//!
//! JSON strings become `Utf8`, integers `Int64`, other numbers `Float64`, booleans `Boolean`,
//! objects `Struct`, arrays of one scalar kind `List` of it; anything else (mixed arrays, empty
//! objects) its JSON text. xarray's reserved `_ARRAY_DIMENSIONS` is left out.

use crate::limits::ATTRIBUTES;
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
use crate::zarr::metadata::problem::MetadataProblem;

/// Attributes xarray reserves for itself.
/// An error when `attributes` has more keys than `max` (`Limits::attributes`): a few bytes of JSON per
/// key become a column each, so an attribute flood is refused when the metadata is read (real
/// datasets have tens to hundreds).
pub(crate) fn check_attribute_count(
    attributes: &Map<String, Value>,
    max: usize,
) -> std::result::Result<(), MetadataProblem> {
    if attributes.len() > max {
        return Err(MetadataProblem::Invalid(format!(
            "{} attributes, more than the {max} a node may have ({ATTRIBUTES})",
            attributes.len()
        )));
    }
    Ok(())
}

/// An Arrow error while building the attributes column.
fn arrow_problem(e: arrow::error::ArrowError) -> MetadataProblem {
    MetadataProblem::Invalid(e.to_string())
}

const RESERVED: &[&str] = &["_ARRAY_DIMENSIONS"];

/// The global attributes of a table (one struct value), or of each member of a collection
/// (one struct value per member).
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

    /// The attributes of several members as one struct per member: the keys of all members
    /// (NULL where a member lacks one), each key's type the same in every member, or Int64
    /// and Float64 widened to Float64; any other difference is an error naming the key and two
    /// members. `None` when no member has attributes.
    pub(crate) fn union(
        members: &[(String, &Map<String, Value>)],
    ) -> Result<Option<Self>, MetadataProblem> {
        // In first-seen order; the set keeps the union linear in the number of keys.
        let mut keys: Vec<&str> = Vec::new();
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for (_, attrs) in members {
            for k in attrs.keys() {
                if !RESERVED.contains(&k.as_str()) && seen.insert(k.as_str()) {
                    keys.push(k);
                }
            }
        }
        if keys.is_empty() {
            return Ok(None);
        }
        let mut fields = Vec::with_capacity(keys.len());
        let mut columns = Vec::with_capacity(keys.len());
        for key in keys {
            let values: Vec<Option<ArrayRef>> = members
                .iter()
                .map(|(_, attrs)| attrs.get(key).filter(|v| !v.is_null()).map(json_value))
                .collect();
            // The type all members agree on (Int64 widens to Float64).
            let mut data_type = DataType::Null;
            let mut first: Option<(&str, DataType)> = None;
            for ((name, _), value) in members.iter().zip(&values) {
                let Some(t) = value.as_ref().map(|v| v.data_type().clone()) else {
                    continue;
                };
                data_type = match (&data_type, &t) {
                    (DataType::Null, _) => t.clone(),
                    (a, b) if a == b => t.clone(),
                    (DataType::Int64, DataType::Float64) | (DataType::Float64, DataType::Int64) => {
                        DataType::Float64
                    }
                    (a, _) => {
                        let (first_name, first_type) = first.clone().unwrap_or(("?", a.clone()));
                        return Err(MetadataProblem::Invalid(format!(
                            "attribute '{key}' is {first_type} in {first_name} and {t} in {name}"
                        )));
                    }
                };
                if first.is_none() {
                    first = Some((name.as_str(), t));
                }
            }
            let parts: Vec<ArrayRef> = values
                .into_iter()
                .map(|v| match v {
                    Some(v) if v.data_type() != &data_type => {
                        arrow::compute::cast(&v, &data_type).map_err(arrow_problem)
                    }
                    Some(v) => Ok(v),
                    None => Ok(new_null_array(&data_type, 1)),
                })
                .collect::<Result<_, MetadataProblem>>()?;
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            let column = arrow::compute::concat(&refs).map_err(arrow_problem)?;
            fields.push(Field::new(key, data_type, true));
            columns.push(column);
        }
        let value = StructArray::new(Fields::from(fields), columns, None);
        Ok(Some(GlobalAttrs {
            value: Arc::new(value),
        }))
    }

    /// The attributes of member `i` of a collection.
    pub(crate) fn row(&self, i: usize) -> GlobalAttrs {
        GlobalAttrs {
            value: Arc::new(self.value.slice(i, 1)),
        }
    }

    /// The one value (a struct array of one row).
    pub(crate) fn value(&self) -> ArrayRef {
        Arc::clone(&self.value) as ArrayRef
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
        Ok(self
            .evaluate(filter, state)?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// Whether `filter` holds, per row (per member of a collection).
    pub(crate) fn evaluate(&self, filter: &Expr, state: &dyn Session) -> Result<Vec<bool>> {
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
        let rows = self.value.len();
        let result = predicate
            .evaluate(&batch)
            .and_then(|v| v.into_array(rows))
            .map_err(evaluation)?;
        let result = result.as_boolean_opt().ok_or_else(|| Error::Filter {
            filter: filter.to_string(),
            source: datafusion::error::DataFusionError::Plan("not a boolean filter".into()),
        })?;
        Ok((0..rows)
            .map(|i| result.is_valid(i) && result.value(i))
            .collect())
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

    #[test]
    fn members_attributes_are_joined_by_key_and_widened() {
        let a = json!({"id": "a", "depth": 5});
        let b = json!({"id": "b", "depth": 7.5, "active": true});
        let members = [
            ("a.zarr".to_string(), a.as_object().unwrap()),
            ("b.zarr".to_string(), b.as_object().unwrap()),
        ];
        let g = GlobalAttrs::union(&members).unwrap().unwrap();
        let DataType::Struct(fields) = g.field().data_type().clone() else {
            panic!()
        };
        let names: Vec<_> = fields.iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "depth", "active"]);
        assert_eq!(fields[1].data_type(), &DataType::Float64);
        assert_eq!(g.value.len(), 2);
        assert!(g.value.column(2).is_null(0));
        let c = json!({"id": 3});
        let members = [
            ("a.zarr".to_string(), a.as_object().unwrap()),
            ("c.zarr".to_string(), c.as_object().unwrap()),
        ];
        assert_eq!(
            GlobalAttrs::union(&members).unwrap_err(),
            MetadataProblem::Invalid("attribute 'id' is Utf8 in a.zarr and Int64 in c.zarr".into())
        );
    }
}
