//! Writing nd record batches to a lance-nd table: one table row per batch, the schema extended
//! first when a write brings new arrays, attribute keys or global attribute keys.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, Float64Array, RecordBatch, RecordBatchIterator,
    StructArray,
};
use arrow::compute::kernels::cast::{can_cast_types, cast};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use lance::dataset::{NewColumnTransform, WriteMode, WriteParams};
use lance::Dataset;
use lance_file::version::LanceFileVersion;

use super::table::{open_lance_nd, LanceNdError, FORMAT_KEY, FORMAT_VERSION, STATS_PREFIX};
use crate::nd::arrow_encoding::{
    conform, encode_attrs, encode_nd_arrays, global_attrs_field, is_nd_array_field, merge_fields,
    nd_array_field, nd_array_parts, struct_fields, GLOBAL_ATTRS_COLUMN,
};
use crate::nd::{NdArrowArray, NdRecordBatch};

/// What a write may do when an array's values have another type than the table's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Casting {
    /// Refuse (the default).
    #[default]
    No,
    /// Widen without loss: int to a wider int, uint to a wider int or uint, float16/32 to a
    /// wider float, int8/16/32 and uint8/16/32 to float64.
    Safe,
    /// Any cast Arrow can do, lossy ones included.
    Unsafe,
}

#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub casting: Casting,
    /// Also write `__stats__:<array>` columns ({min, max} per row, ignoring nulls and NaN) for
    /// numeric arrays.
    pub statistics: bool,
}

/// Appends `batches` to the lance-nd table at `uri` (one row each), creating the table when
/// nothing is there. Every batch was validated when it was built, so invalid arrays never
/// reach the table; a failed write leaves the table as it was.
pub async fn write_nd_batches(
    uri: &str,
    batches: &[NdRecordBatch],
    options: &WriteOptions,
) -> Result<(), LanceNdError> {
    if batches.is_empty() {
        return Ok(());
    }
    match open_lance_nd(uri).await {
        Ok(mut dataset) => {
            let existing = Schema::from(dataset.schema());
            let (wanted, casts) = plan_schema(&existing, batches, options)?;
            let additions = schema_additions(&existing, &wanted);
            for addition in additions {
                dataset
                    .add_columns(
                        NewColumnTransform::AllNulls(Arc::new(Schema::new(vec![addition]))),
                        None,
                        None,
                    )
                    .await
                    .map_err(|e| LanceNdError::lance(uri, e))?;
            }
            let schema: SchemaRef = Arc::new(Schema::from(dataset.schema()));
            let batch = encode_rows(&schema, batches, &casts)?;
            let reader = RecordBatchIterator::new(vec![Ok(batch)], schema);
            dataset
                .append(reader, None)
                .await
                .map_err(|e| LanceNdError::lance(uri, e))
        }
        Err(LanceNdError::NotFound { .. }) => {
            let (wanted, casts) = plan_schema(&Schema::empty(), batches, options)?;
            let schema = Arc::new(Schema::new(wanted).with_metadata(HashMap::from([(
                FORMAT_KEY.to_string(),
                FORMAT_VERSION.to_string(),
            )])));
            let batch = encode_rows(&schema, batches, &casts)?;
            let reader = RecordBatchIterator::new(vec![Ok(batch)], Arc::clone(&schema));
            let params = WriteParams {
                mode: WriteMode::Create,
                data_storage_version: Some(LanceFileVersion::V2_2),
                ..Default::default()
            };
            Dataset::write(reader, uri, Some(params))
                .await
                .map(|_| ())
                .map_err(|e| LanceNdError::lance(uri, e))
        }
        Err(e) => Err(e),
    }
}

/// Per array name: the type its values (and attributes) must be cast to, when they differ.
type Casts = HashMap<String, DataType>;

/// The table fields the write needs (existing order first, new ones appended) and the casts.
fn plan_schema(
    existing: &Schema,
    batches: &[NdRecordBatch],
    options: &WriteOptions,
) -> Result<(Vec<Field>, Casts), LanceNdError> {
    let mut fields: Vec<Field> = existing
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let mut casts = Casts::new();
    for batch in batches {
        for (name, array) in batch.arrays() {
            let incoming = array.values().data_type();
            let attr_fields = key_fields(array.attrs());
            match fields.iter().position(|f| f.name() == name) {
                None => fields.push(nd_array_field(name, incoming, &attr_fields.into())),
                Some(i) => {
                    let (table_type, table_attrs) = nd_array_parts(&fields[i])
                        .map_err(|e| LanceNdError::Schema(e.to_string()))?;
                    if &table_type != incoming {
                        check_cast(name, incoming, &table_type, options.casting)?;
                        casts.insert(name.clone(), table_type.clone());
                    }
                    check_key_casts(
                        &table_attrs,
                        &attr_fields,
                        &format!("{name}.attrs"),
                        options.casting,
                    )?;
                    let merged = merge_fields(&table_attrs, attr_fields);
                    if merged.len() != table_attrs.len() {
                        let metadata = fields[i].metadata().clone();
                        fields[i] =
                            nd_array_field(name, &table_type, &merged).with_metadata(metadata);
                    }
                }
            }
            if options.statistics && is_numeric(incoming) {
                let stats = format!("{STATS_PREFIX}{name}");
                if !fields.iter().any(|f| f.name() == &stats) {
                    let t = casts.get(name).unwrap_or(incoming).clone();
                    fields.push(stats_field(&stats, &t));
                }
            }
        }
        let keys = key_fields(batch.global_attrs());
        if !keys.is_empty() {
            match fields.iter().position(|f| f.name() == GLOBAL_ATTRS_COLUMN) {
                None => fields.push(global_attrs_field(&keys.into())),
                Some(i) => {
                    let existing_keys = struct_fields(fields[i].data_type());
                    check_key_casts(&existing_keys, &keys, GLOBAL_ATTRS_COLUMN, options.casting)?;
                    let merged = merge_fields(&existing_keys, keys);
                    let metadata = fields[i].metadata().clone();
                    fields[i] = global_attrs_field(&merged).with_metadata(metadata);
                }
            }
        }
    }
    // New columns: arrays first, then the global attributes, then statistics (the layout
    // pylance gives a table created from whole batches).
    let mut new = fields.split_off(existing.fields().len());
    new.sort_by_key(|f| {
        if is_nd_array_field(f) {
            0
        } else if f.name() == GLOBAL_ATTRS_COLUMN {
            1
        } else {
            2
        }
    });
    fields.extend(new);
    Ok((fields, casts))
}

/// One nullable field per attribute key, typed by its value.
fn key_fields(attrs: &[(String, ArrayRef)]) -> Vec<FieldRef> {
    attrs
        .iter()
        .map(|(k, v)| Arc::new(Field::new(k, v.data_type().clone(), true)))
        .collect()
}

/// Keys the table already has must keep their type, unless the casting setting allows it.
/// `prefix` names the struct in errors (`temperature.attrs`, `__global_attrs__`).
fn check_key_casts(
    table: &Fields,
    incoming: &[FieldRef],
    prefix: &str,
    casting: Casting,
) -> Result<(), LanceNdError> {
    for k in incoming {
        if let Some((_, t)) = table.find(k.name()) {
            if t.data_type() != k.data_type() {
                check_cast(
                    &format!("{prefix}.{}", k.name()),
                    k.data_type(),
                    t.data_type(),
                    casting,
                )?;
            }
        }
    }
    Ok(())
}

fn is_numeric(t: &DataType) -> bool {
    t.is_integer() || t.is_floating()
}

fn stats_field(name: &str, t: &DataType) -> Field {
    let children = Fields::from(vec![
        Field::new("min", t.clone(), true),
        Field::new("max", t.clone(), true),
    ]);
    Field::new(name, DataType::Struct(children), true)
}

fn check_cast(
    what: &str,
    from: &DataType,
    to: &DataType,
    casting: Casting,
) -> Result<(), LanceNdError> {
    let allowed = match casting {
        Casting::No => false,
        Casting::Safe => is_safe_widening(from, to),
        Casting::Unsafe => can_cast_types(from, to),
    };
    if allowed {
        Ok(())
    } else {
        Err(LanceNdError::TypeMismatch {
            array: what.to_string(),
            table: to.clone(),
            write: from.clone(),
            casting,
        })
    }
}

/// Casts that never lose information.
pub fn is_safe_widening(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    let rank_int = |t: &DataType| match t {
        Int8 => Some(1),
        Int16 => Some(2),
        Int32 => Some(3),
        Int64 => Some(4),
        _ => None,
    };
    let rank_uint = |t: &DataType| match t {
        UInt8 => Some(1),
        UInt16 => Some(2),
        UInt32 => Some(3),
        UInt64 => Some(4),
        _ => None,
    };
    match (from, to) {
        (a, b) if rank_int(a).is_some() && rank_int(b).is_some() => rank_int(a) < rank_int(b),
        (a, b) if rank_uint(a).is_some() && rank_uint(b).is_some() => rank_uint(a) < rank_uint(b),
        (a, b) if rank_uint(a).is_some() && rank_int(b).is_some() => rank_uint(a) < rank_int(b),
        (Float16, Float32 | Float64) | (Float32, Float64) => true,
        (Int8 | Int16 | UInt8 | UInt16, Float32) => true,
        (Int8 | Int16 | Int32 | UInt8 | UInt16 | UInt32, Float64) => true,
        _ => false,
    }
}

/// The fields of `wanted` missing from `existing`, as `add_columns` takes them: a new column
/// whole, or a struct column with only its new leaves (nested fields need file version 2.2).
fn schema_additions(existing: &Schema, wanted: &[Field]) -> Vec<Field> {
    wanted
        .iter()
        .filter_map(|w| match existing.field_with_name(w.name()) {
            Err(_) => Some(w.clone()),
            Ok(e) => new_leaves(e, w),
        })
        .collect()
}

/// `wanted` reduced to what `existing` lacks, or `None` when nothing is new.
fn new_leaves(existing: &Field, wanted: &Field) -> Option<Field> {
    let (DataType::Struct(have), DataType::Struct(want)) =
        (existing.data_type(), wanted.data_type())
    else {
        return None;
    };
    let missing: Vec<Field> = want
        .iter()
        .filter_map(|w| match have.find(w.name()) {
            None => Some(w.as_ref().clone().with_nullable(true)),
            Some((_, h)) => new_leaves(h, w),
        })
        .collect();
    (!missing.is_empty()).then(|| Field::new(wanted.name(), DataType::Struct(missing.into()), true))
}

/// One table row per batch, encoded against the table's full schema (absent arrays, keys
/// and columns are null).
fn encode_rows(
    schema: &SchemaRef,
    batches: &[NdRecordBatch],
    casts: &Casts,
) -> Result<RecordBatch, LanceNdError> {
    let schema_error = |e: String| LanceNdError::Schema(e);
    let columns = schema
        .fields()
        .iter()
        .map(|field| -> Result<ArrayRef, LanceNdError> {
            let name = field.name();
            if is_nd_array_field(field) {
                let (value_type, attrs) =
                    nd_array_parts(field).map_err(|e| schema_error(e.to_string()))?;
                let cast_rows: Vec<Option<NdArrowArray>> = batches
                    .iter()
                    .map(|b| {
                        b.array(name)
                            .map(|a| cast_array(name, a, &value_type, &attrs, casts))
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
                    .map(|b| cast_attrs(b.global_attrs(), &keys))
                    .collect::<Result<_, _>>()?;
                let refs: Vec<Option<&[(String, ArrayRef)]>> =
                    rows.iter().map(|r| Some(r.as_slice())).collect();
                let column: ArrayRef = Arc::new(
                    encode_attrs(&refs, &keys, None).map_err(|e| schema_error(e.to_string()))?,
                );
                conform(column, field.data_type())
                    .map_err(|e| schema_error(format!("{GLOBAL_ATTRS_COLUMN}: {e}")))
            } else if let Some(array) = name.strip_prefix(STATS_PREFIX) {
                stats_column(field, batches, array, casts)
            } else {
                Ok(new_null_array(field.data_type(), batches.len()))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(Arc::clone(schema), columns).map_err(|e| schema_error(e.to_string()))
}

fn cast_array(
    name: &str,
    array: &NdArrowArray,
    value_type: &DataType,
    attrs: &Fields,
    casts: &Casts,
) -> Result<NdArrowArray, LanceNdError> {
    let values = if array.values().data_type() != value_type {
        if !casts.contains_key(name) {
            return Err(LanceNdError::Schema(format!(
                "array '{name}': values are {}, the table holds {value_type}",
                array.values().data_type()
            )));
        }
        cast(array.values(), value_type)
            .map_err(|e| LanceNdError::Schema(format!("array '{name}': {e}")))?
    } else {
        Arc::clone(array.values())
    };
    let attrs = cast_attrs(array.attrs(), attrs)?;
    NdArrowArray::try_new(values, array.dims().to_vec(), attrs)
        .map_err(|e| LanceNdError::Schema(e.in_array(name).to_string()))
}

/// Attribute values cast to the table's key types (checked by `plan_schema`).
fn cast_attrs(
    attrs: &[(String, ArrayRef)],
    fields: &Fields,
) -> Result<Vec<(String, ArrayRef)>, LanceNdError> {
    attrs
        .iter()
        .map(|(k, v)| match fields.find(k) {
            Some((_, f)) if f.data_type() != v.data_type() => cast(v, f.data_type())
                .map(|c| (k.clone(), c))
                .map_err(|e| LanceNdError::Schema(format!("attribute '{k}': {e}"))),
            _ => Ok((k.clone(), Arc::clone(v))),
        })
        .collect()
}

/// `{min, max}` of each row's values, ignoring nulls and NaN; NULL where the row lacks the
/// array or has no such value.
fn stats_column(
    field: &Field,
    batches: &[NdRecordBatch],
    array: &str,
    casts: &Casts,
) -> Result<ArrayRef, LanceNdError> {
    let DataType::Struct(children) = field.data_type() else {
        return Ok(new_null_array(field.data_type(), batches.len()));
    };
    let t = children[0].data_type().clone();
    let mut mins = Vec::with_capacity(batches.len());
    let mut maxs = Vec::with_capacity(batches.len());
    for b in batches {
        let (lo, hi) = match b.array(array) {
            Some(a) => {
                let values = if a.values().data_type() != &t && casts.contains_key(array) {
                    cast(a.values(), &t).map_err(|e| LanceNdError::Schema(e.to_string()))?
                } else {
                    Arc::clone(a.values())
                };
                min_max(&values)?
            }
            None => (None, None),
        };
        mins.push(lo);
        maxs.push(hi);
    }
    let to_t = |v: Vec<Option<f64>>| -> Result<ArrayRef, LanceNdError> {
        cast(&(Arc::new(Float64Array::from(v)) as ArrayRef), &t)
            .map_err(|e| LanceNdError::Schema(e.to_string()))
    };
    // Integers survive the f64 round trip up to 2^53; wider values get exact min/max below.
    let (min, max) = if t.is_integer() {
        (
            int_extreme(batches, array, &t, true)?,
            int_extreme(batches, array, &t, false)?,
        )
    } else {
        (to_t(mins)?, to_t(maxs)?)
    };
    Ok(Arc::new(StructArray::new(
        children.clone(),
        vec![min, max],
        None,
    )))
}

fn min_max(values: &ArrayRef) -> Result<(Option<f64>, Option<f64>), LanceNdError> {
    let floats =
        cast(values, &DataType::Float64).map_err(|e| LanceNdError::Schema(e.to_string()))?;
    let floats = floats.as_primitive::<arrow::datatypes::Float64Type>();
    let mut lo: Option<f64> = None;
    let mut hi: Option<f64> = None;
    for v in floats.iter().flatten().filter(|v| !v.is_nan()) {
        lo = Some(lo.map_or(v, |l| l.min(v)));
        hi = Some(hi.map_or(v, |h| h.max(v)));
    }
    Ok((lo, hi))
}

/// Exact integer min or max per row, computed on Int64 or UInt64 (no f64 rounding).
fn int_extreme(
    batches: &[NdRecordBatch],
    array: &str,
    t: &DataType,
    min: bool,
) -> Result<ArrayRef, LanceNdError> {
    use arrow::datatypes::{Int64Type, UInt64Type};
    let unsigned = matches!(
        t,
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64
    );
    let joined = if unsigned {
        extremes::<UInt64Type>(batches, array, min)?
    } else {
        extremes::<Int64Type>(batches, array, min)?
    };
    cast(&joined, t).map_err(|e| LanceNdError::Schema(e.to_string()))
}

fn extremes<T: arrow::datatypes::ArrowNumericType>(
    batches: &[NdRecordBatch],
    array: &str,
    min: bool,
) -> Result<ArrayRef, LanceNdError> {
    let mut out = Vec::with_capacity(batches.len());
    for b in batches {
        out.push(match b.array(array) {
            None => None,
            Some(a) => {
                let v = cast(a.values(), &T::DATA_TYPE)
                    .map_err(|e| LanceNdError::Schema(e.to_string()))?;
                let v = v.as_primitive::<T>();
                if min {
                    arrow::compute::min(v)
                } else {
                    arrow::compute::max(v)
                }
            }
        });
    }
    Ok(Arc::new(
        out.into_iter().collect::<arrow::array::PrimitiveArray<T>>(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_widening_is_lossless_only() {
        assert!(is_safe_widening(&DataType::Int32, &DataType::Int64));
        assert!(is_safe_widening(&DataType::UInt32, &DataType::Int64));
        assert!(is_safe_widening(&DataType::Float32, &DataType::Float64));
        assert!(is_safe_widening(&DataType::Int32, &DataType::Float64));
        assert!(!is_safe_widening(&DataType::Int64, &DataType::Float64));
        assert!(!is_safe_widening(&DataType::Int64, &DataType::Int32));
        assert!(!is_safe_widening(&DataType::Int64, &DataType::UInt64));
        assert!(!is_safe_widening(&DataType::Float64, &DataType::Float32));
    }

    #[test]
    fn additions_hold_only_new_leaves() {
        let existing = Schema::new(vec![Field::new(
            "g",
            DataType::Struct(vec![Field::new("id", DataType::Utf8, true)].into()),
            true,
        )]);
        let wanted = vec![
            Field::new(
                "g",
                DataType::Struct(
                    vec![
                        Field::new("id", DataType::Utf8, true),
                        Field::new("group", DataType::Utf8, true),
                    ]
                    .into(),
                ),
                true,
            ),
            Field::new("new", DataType::Int32, true),
        ];
        let adds = schema_additions(&existing, &wanted);
        assert_eq!(adds.len(), 2);
        assert_eq!(
            adds[0].data_type(),
            &DataType::Struct(vec![Field::new("group", DataType::Utf8, true)].into())
        );
    }
}
