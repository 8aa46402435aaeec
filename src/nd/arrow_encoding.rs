//! The Arrow encoding of nd arrays and global attributes (nd-arrow-array 0.5):
//!
//! - an array column is `Struct{values: List<T>, dim_names: List<Utf8>, dim_sizes: List<UInt32>,
//!   attrs: Struct{..}}` with extension name `nd_arrow.array`, one table row per array, `attrs`
//!   left out when no row has attributes; a null row means "no such array";
//! - the `__global_attrs__` column is a Struct with one nullable child per key, extension name
//!   `nd_arrow.global_attributes`.
//!
//! Children are written in that order and read by name.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, GenericListArray, ListArray, StringArray,
    StructArray, UInt32Array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, UInt32Type};

use super::array::{Dim, NdArrowArray};
use super::NdError;

pub(crate) const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";
pub(crate) const EXTENSION_METADATA_KEY: &str = "ARROW:extension:metadata";
pub(crate) const ND_ARRAY_EXTENSION: &str = "nd_arrow.array";
pub(crate) const GLOBAL_ATTRS_EXTENSION: &str = "nd_arrow.global_attributes";
pub(crate) const EXTENSION_METADATA: &str = r#"{"version":1}"#;
pub(crate) const GLOBAL_ATTRS_COLUMN: &str = "__global_attrs__";

fn extension_metadata(name: &str) -> HashMap<String, String> {
    HashMap::from([
        (EXTENSION_NAME_KEY.to_string(), name.to_string()),
        (
            EXTENSION_METADATA_KEY.to_string(),
            EXTENSION_METADATA.to_string(),
        ),
    ])
}

/// Whether a field carries the `nd_arrow.array` extension.
pub(crate) fn is_nd_array_field(field: &Field) -> bool {
    field.metadata().get(EXTENSION_NAME_KEY).map(String::as_str) == Some(ND_ARRAY_EXTENSION)
}

/// The struct type of an nd array column with values of `value_type` and attributes `attrs`.
pub(crate) fn nd_array_type(value_type: &DataType, attrs: &Fields) -> DataType {
    let mut children = vec![
        Field::new(
            "values",
            DataType::List(Arc::new(Field::new("item", value_type.clone(), true))),
            false,
        ),
        Field::new(
            "dim_names",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
            false,
        ),
        Field::new(
            "dim_sizes",
            DataType::List(Arc::new(Field::new("item", DataType::UInt32, false))),
            false,
        ),
    ];
    if !attrs.is_empty() {
        children.push(Field::new("attrs", DataType::Struct(attrs.clone()), false));
    }
    DataType::Struct(children.into())
}

/// The table field of the nd array column `name`.
pub(crate) fn nd_array_field(name: &str, value_type: &DataType, attrs: &Fields) -> Field {
    Field::new(name, nd_array_type(value_type, attrs), true)
        .with_metadata(extension_metadata(ND_ARRAY_EXTENSION))
}

/// The `__global_attrs__` field with one nullable child per key.
pub(crate) fn global_attrs_field(keys: &Fields) -> Field {
    Field::new(GLOBAL_ATTRS_COLUMN, DataType::Struct(keys.clone()), true)
        .with_metadata(extension_metadata(GLOBAL_ATTRS_EXTENSION))
}

/// The value type and attribute fields of an nd array field.
pub(crate) fn nd_array_parts(field: &Field) -> Result<(DataType, Fields), NdError> {
    let DataType::Struct(children) = field.data_type() else {
        return Err(NdError::new(format!(
            "column '{}' is not a struct",
            field.name()
        )));
    };
    let values = children
        .iter()
        .find(|f| f.name() == "values")
        .ok_or_else(|| NdError::new(format!("column '{}' has no 'values' child", field.name())))?;
    let value_type = match values.data_type() {
        DataType::List(item) | DataType::LargeList(item) => item.data_type().clone(),
        other => {
            return Err(NdError::new(format!(
                "'{}.values' is {other}, not a list",
                field.name()
            )))
        }
    };
    let attrs = match children
        .iter()
        .find(|f| f.name() == "attrs")
        .map(|f| f.data_type())
    {
        Some(DataType::Struct(fields)) => fields.clone(),
        _ => Fields::empty(),
    };
    Ok((value_type, attrs))
}

/// Encodes one column of nd arrays (`None`: the row does not have the array). Values and
/// attributes must already have the column's types.
pub(crate) fn encode_nd_arrays(
    rows: &[Option<&NdArrowArray>],
    value_type: &DataType,
    attrs: &Fields,
) -> Result<ArrayRef, NdError> {
    let err = |e: arrow::error::ArrowError| NdError::new(e.to_string());
    let present = NullBuffer::from(rows.iter().map(Option::is_some).collect::<Vec<_>>());

    let value_parts: Vec<&dyn Array> = rows.iter().flatten().map(|a| a.values().as_ref()).collect();
    let values = if value_parts.is_empty() {
        new_null_array(value_type, 0)
    } else {
        arrow::compute::concat(&value_parts).map_err(err)?
    };
    if values.data_type() != value_type {
        return Err(NdError::new(format!(
            "values are {}, the column holds {value_type}",
            values.data_type()
        )));
    }
    let values = list(
        values,
        rows.iter().map(|r| r.map_or(0, |a| a.values().len())),
        value_type,
        true,
    )?;

    let names: Vec<&str> = rows
        .iter()
        .flatten()
        .flat_map(|a| a.dims().iter().map(|d| d.name.as_str()))
        .collect();
    let dim_names = list(
        Arc::new(StringArray::from(names)),
        rows.iter().map(|r| r.map_or(0, |a| a.rank())),
        &DataType::Utf8,
        false,
    )?;
    let sizes: Vec<u32> = rows
        .iter()
        .flatten()
        .flat_map(|a| a.dims().iter().map(|d| d.size as u32))
        .collect();
    let dim_sizes = list(
        Arc::new(UInt32Array::from(sizes)),
        rows.iter().map(|r| r.map_or(0, |a| a.rank())),
        &DataType::UInt32,
        false,
    )?;

    let mut children: Vec<ArrayRef> = vec![values, dim_names, dim_sizes];
    if !attrs.is_empty() {
        let attr_rows: Vec<Option<&[(String, ArrayRef)]>> =
            rows.iter().map(|r| r.map(|a| a.attrs())).collect();
        children.push(Arc::new(encode_attrs(&attr_rows, attrs, None)?));
    }
    let DataType::Struct(fields) = nd_array_type(value_type, attrs) else {
        unreachable!("nd_array_type is a struct")
    };
    Ok(Arc::new(
        StructArray::try_new(fields, children, Some(present)).map_err(err)?,
    ))
}

fn list(
    values: ArrayRef,
    lengths: impl Iterator<Item = usize>,
    item: &DataType,
    nullable: bool,
) -> Result<ArrayRef, NdError> {
    // A list column's offsets are 32-bit: one write holds at most i32::MAX items per column.
    let lengths: Vec<usize> = lengths.collect();
    let total = lengths.iter().try_fold(0usize, |n, &l| n.checked_add(l));
    if total.is_none_or(|t| t > i32::MAX as usize) {
        return Err(NdError::new(format!(
            "one write holds more than {} values of this column; write fewer batches at a time",
            i32::MAX
        )));
    }
    let offsets = OffsetBuffer::<i32>::from_lengths(lengths);
    let field = Arc::new(Field::new("item", item.clone(), nullable));
    Ok(Arc::new(
        ListArray::try_new(field, offsets, values, None)
            .map_err(|e| NdError::new(e.to_string()))?,
    ))
}

/// Encodes attribute rows as a struct with `fields` (absent keys are null). `validity` sets the
/// struct's own nulls.
pub(crate) fn encode_attrs(
    rows: &[Option<&[(String, ArrayRef)]>],
    fields: &Fields,
    validity: Option<NullBuffer>,
) -> Result<StructArray, NdError> {
    let err = |e: arrow::error::ArrowError| NdError::new(e.to_string());
    let children = fields
        .iter()
        .map(|field| {
            let nulls = new_null_array(field.data_type(), 1);
            let parts: Vec<ArrayRef> = rows
                .iter()
                .map(|row| {
                    match row.and_then(|attrs| attrs.iter().find(|(k, _)| k == field.name())) {
                        Some((_, value)) if value.data_type() == field.data_type() => {
                            Ok(Arc::clone(value))
                        }
                        Some((key, value)) => Err(NdError::new(format!(
                            "attribute '{key}' is {}, the column holds {}",
                            value.data_type(),
                            field.data_type()
                        ))),
                        None => Ok(Arc::clone(&nulls)),
                    }
                })
                .collect::<Result<_, _>>()?;
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            if refs.is_empty() {
                Ok(new_null_array(field.data_type(), 0))
            } else {
                arrow::compute::concat(&refs).map_err(err)
            }
        })
        .collect::<Result<Vec<_>, NdError>>()?;
    if fields.is_empty() {
        return Ok(StructArray::new_empty_fields(rows.len(), validity));
    }
    StructArray::try_new(fields.clone(), children, validity).map_err(err)
}

/// Decodes row `row` of an nd array column; `None` when the row does not have the array.
/// `name` names the array in errors (the caller names the row, which it numbers).
pub(crate) fn decode_nd_array(
    column: &StructArray,
    row: usize,
    name: &str,
) -> Result<Option<NdArrowArray>, NdError> {
    if column.is_null(row) {
        return Ok(None);
    }
    let at = |e: NdError| e.in_array(name);
    let child = |n: &str| {
        column
            .column_by_name(n)
            .ok_or_else(|| at(NdError::new(format!("the column has no '{n}' child"))))
    };
    let values = list_item(child("values")?, row).map_err(at)?;
    let names = list_item(child("dim_names")?, row).map_err(at)?;
    let names = names
        .as_string_opt::<i32>()
        .ok_or_else(|| at(NdError::new("dim_names are not strings".into())))?;
    let sizes = list_item(child("dim_sizes")?, row).map_err(at)?;
    let sizes = arrow::compute::cast(&sizes, &DataType::UInt32)
        .map_err(|e| at(NdError::new(format!("dim_sizes: {e}"))))?;
    let sizes = sizes.as_primitive::<UInt32Type>();
    if names.len() != sizes.len() || names.null_count() > 0 || sizes.null_count() > 0 {
        return Err(at(NdError::new(format!(
            "{} dimension names but {} sizes (or nulls among them)",
            names.len(),
            sizes.len()
        ))));
    }
    let dims = names
        .iter()
        .zip(sizes.values())
        .map(|(n, s)| Dim::new(n.unwrap_or_default(), *s as usize))
        .collect();
    let attrs = match column.column_by_name("attrs") {
        Some(attrs) => {
            let attrs = attrs
                .as_struct_opt()
                .ok_or_else(|| at(NdError::new("attrs is not a struct".into())))?;
            decode_attrs(attrs, row)
        }
        None => vec![],
    };
    NdArrowArray::try_new(values, dims, attrs)
        .map(Some)
        .map_err(at)
}

/// The dimensions of row `row` from `dim_names` and `dim_sizes` lists alone (no values).
/// An absent array and a scalar both have none.
pub(crate) fn decode_dims(
    names: &ArrayRef,
    sizes: &ArrayRef,
    row: usize,
) -> Result<Vec<Dim>, NdError> {
    if names.is_null(row) || sizes.is_null(row) {
        return Ok(vec![]);
    }
    let names = list_item(names, row)?;
    let names = names
        .as_string_opt::<i32>()
        .ok_or_else(|| NdError::new("dim_names are not strings".into()))?;
    let sizes = arrow::compute::cast(&list_item(sizes, row)?, &DataType::UInt32)
        .map_err(|e| NdError::new(format!("dim_sizes: {e}")))?;
    let sizes = sizes.as_primitive::<UInt32Type>();
    if names.len() != sizes.len() || names.null_count() > 0 || sizes.null_count() > 0 {
        return Err(NdError::new(format!(
            "{} dimension names but {} sizes (or nulls among them)",
            names.len(),
            sizes.len()
        )));
    }
    let dims: Vec<Dim> = names
        .iter()
        .zip(sizes.values())
        .map(|(n, s)| Dim::new(n.unwrap_or_default(), *s as usize))
        .collect();
    for (i, d) in dims.iter().enumerate() {
        if d.name.is_empty() || dims[..i].iter().any(|e| e.name == d.name) {
            return Err(NdError::new(format!(
                "dimension name '{}' is empty or repeated",
                d.name
            )));
        }
    }
    Ok(dims)
}

/// The present attributes of row `row` of an attribute struct (global or per array).
pub(crate) fn decode_attrs(attrs: &StructArray, row: usize) -> Vec<(String, ArrayRef)> {
    if attrs.is_null(row) {
        return vec![];
    }
    attrs
        .fields()
        .iter()
        .zip(attrs.columns())
        .filter(|(_, c)| c.is_valid(row))
        .map(|(f, c)| (f.name().clone(), c.slice(row, 1)))
        .collect()
}

fn list_item(array: &ArrayRef, row: usize) -> Result<ArrayRef, NdError> {
    if let Some(l) = array.as_list_opt::<i32>() {
        return Ok(list_value(l, row));
    }
    if let Some(l) = array.as_list_opt::<i64>() {
        return Ok(list_value(l, row));
    }
    Err(NdError::new(format!(
        "expected a list, found {}",
        array.data_type()
    )))
}

fn list_value<O: arrow::array::OffsetSizeTrait>(l: &GenericListArray<O>, row: usize) -> ArrayRef {
    l.value(row)
}

/// Relabels `array` with `to`, a type equal but for field nullability and metadata (what a
/// table's schema says, e.g. a child that schema evolution added as nullable). Struct children
/// are matched by name.
pub(crate) fn conform(array: ArrayRef, to: &DataType) -> Result<ArrayRef, NdError> {
    conform_data(array.to_data(), to).map(arrow::array::make_array)
}

fn conform_data(
    data: arrow::array::ArrayData,
    to: &DataType,
) -> Result<arrow::array::ArrayData, NdError> {
    let children = match (data.data_type(), to) {
        (DataType::Struct(have), DataType::Struct(want)) => want
            .iter()
            .map(|w| {
                let i = have
                    .iter()
                    .position(|h| h.name() == w.name())
                    .ok_or_else(|| NdError::new(format!("no child '{}' to write", w.name())))?;
                conform_data(data.child_data()[i].clone(), w.data_type())
            })
            .collect::<Result<Vec<_>, _>>()?,
        (DataType::List(_), DataType::List(item))
        | (DataType::LargeList(_), DataType::LargeList(item)) => {
            vec![conform_data(
                data.child_data()[0].clone(),
                item.data_type(),
            )?]
        }
        (have, want) if have == want => return Ok(data),
        (have, want) => return Err(NdError::new(format!("{have} cannot be written as {want}"))),
    };
    data.into_builder()
        .data_type(to.clone())
        .child_data(children)
        .build()
        .map_err(|e| NdError::new(e.to_string()))
}

/// The fields of a struct type, or none.
pub(crate) fn struct_fields(data_type: &DataType) -> Fields {
    match data_type {
        DataType::Struct(fields) => fields.clone(),
        _ => Fields::empty(),
    }
}

/// Union of attribute fields: existing ones keep their place and type, new keys are appended.
pub(crate) fn merge_fields(existing: &Fields, new: impl IntoIterator<Item = FieldRef>) -> Fields {
    let mut out: Vec<FieldRef> = existing.iter().cloned().collect();
    for f in new {
        if !out.iter().any(|e| e.name() == f.name()) {
            out.push(f);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array};

    #[test]
    fn a_write_of_more_than_i32_max_values_is_an_error() {
        // The lengths alone decide: no 2^31 values are allocated to find out.
        let values: ArrayRef = Arc::new(Float64Array::from(Vec::<f64>::new()));
        let err = list(
            values,
            [i32::MAX as usize, 10].into_iter(),
            &DataType::Float64,
            true,
        )
        .unwrap_err();
        assert!(err.to_string().contains("write fewer batches"), "{err}");
    }

    #[test]
    fn stored_dimension_sizes_that_overflow_are_errors() {
        // Three dimensions of 2^32 - 1: the product overflows 64 bits.
        let names: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::Utf8, false)),
            OffsetBuffer::from_lengths([3]),
            Arc::new(StringArray::from(vec!["a", "b", "c"])),
            None,
        ));
        let sizes: ArrayRef = Arc::new(ListArray::new(
            Arc::new(Field::new("item", DataType::UInt32, false)),
            OffsetBuffer::from_lengths([3]),
            Arc::new(UInt32Array::from(vec![u32::MAX; 3])),
            None,
        ));
        let dims = decode_dims(&names, &sizes, 0).unwrap();
        let err = crate::nd::cell_count(&dims).unwrap_err();
        assert!(err.to_string().contains("cells"), "{err}");
        let values: ArrayRef = Arc::new(Float64Array::from(vec![1.0]));
        assert!(NdArrowArray::try_new(values, dims, vec![]).is_err());
    }

    #[test]
    fn round_trip_with_absent_rows_and_attributes() {
        let a = NdArrowArray::try_new(
            Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
            vec![Dim::new("x", 2), Dim::new("y", 3)],
            vec![(
                "units".into(),
                Arc::new(StringArray::from(vec!["K"])) as ArrayRef,
            )],
        )
        .unwrap();
        let s = NdArrowArray::try_new(
            Arc::new(Float64Array::from(vec![Some(9.0)])),
            vec![],
            vec![],
        )
        .unwrap();
        let attrs = Fields::from(vec![Field::new("units", DataType::Utf8, true)]);
        let column =
            encode_nd_arrays(&[Some(&a), None, Some(&s)], &DataType::Float64, &attrs).unwrap();
        let column = column.as_struct();
        assert_eq!(decode_nd_array(column, 0, "t").unwrap(), Some(a));
        assert_eq!(decode_nd_array(column, 1, "t").unwrap(), None);
        assert_eq!(decode_nd_array(column, 2, "t").unwrap(), Some(s));
        // A null row's children are valid empty lists (Lance rejects nulls in non-null fields).
        let values = column.column_by_name("values").unwrap().as_list::<i32>();
        assert!(values.is_valid(1) && values.value(1).is_empty());
    }

    #[test]
    fn broken_rows_name_the_array() {
        let values: ArrayRef = Arc::new(Int64Array::from(vec![1, 2, 3]));
        let bad = StructArray::from(vec![
            (
                Arc::new(Field::new(
                    "values",
                    DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
                    false,
                )),
                list(values, [3].into_iter(), &DataType::Int64, true).unwrap(),
            ),
            (
                Arc::new(Field::new(
                    "dim_sizes",
                    DataType::List(Arc::new(Field::new("item", DataType::UInt32, false))),
                    false,
                )),
                list(
                    Arc::new(UInt32Array::from(vec![4])),
                    [1].into_iter(),
                    &DataType::UInt32,
                    false,
                )
                .unwrap(),
            ),
            (
                Arc::new(Field::new(
                    "dim_names",
                    DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
                    false,
                )),
                list(
                    Arc::new(StringArray::from(vec!["x"])),
                    [1].into_iter(),
                    &DataType::Utf8,
                    false,
                )
                .unwrap(),
            ),
        ]);
        let err = decode_nd_array(&bad, 0, "temp").unwrap_err().to_string();
        assert!(
            err.contains("array 'temp'") && err.contains("3 values do not fill"),
            "{err}"
        );
    }
}
