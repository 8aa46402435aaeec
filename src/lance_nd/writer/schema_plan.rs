//! The table schema a write needs: the existing columns first, then new arrays, global
//! attributes and statistics columns; and what must be added to the table before appending.

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema};

use super::cast::{check_cast, Casts};
use super::statistics::{check_stats_field, stats_field};
use super::{invalid, WriteOptions};
use crate::error::Result;
use crate::lance_nd::format::STATS_PREFIX;
use crate::nd::arrow_encoding::{
    global_attrs_field, is_nd_array_field, merge_fields, nd_array_field, nd_array_parts,
    struct_fields, GLOBAL_ATTRS_COLUMN,
};
use crate::nd::Casting;
use crate::nd::NdRecordBatch;

/// The table fields the write needs (existing order first, new ones appended) and the casts.
pub(crate) fn plan_schema(
    uri: &str,
    existing: &Schema,
    batches: &[NdRecordBatch],
    options: &WriteOptions,
) -> Result<(Vec<Field>, Casts)> {
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
                    let (table_type, table_attrs) =
                        nd_array_parts(&fields[i]).map_err(|e| invalid(uri, e.to_string()))?;
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
            // Rows with the array get statistics whenever the table has the column (a NULL
            // would make value filters skip them); an existing column is checked before the
            // schema changes, so a bad one writes nothing.
            let stats = format!("{STATS_PREFIX}{name}");
            let t = casts.get(name).unwrap_or(incoming).clone();
            match fields.iter().find(|f| f.name() == &stats) {
                Some(existing) => check_stats_field(uri, existing, name, &t)?,
                None if options.statistics && is_numeric(incoming) => {
                    fields.push(stats_field(&stats, &t))
                }
                None => {}
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
) -> Result<()> {
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

/// The fields of `wanted` missing from `existing`, as `add_columns` takes them: a new column
/// whole, or a struct column with only its new leaves (nested fields need file version 2.2).
pub(crate) fn schema_additions(existing: &Schema, wanted: &[Field]) -> Vec<Field> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
