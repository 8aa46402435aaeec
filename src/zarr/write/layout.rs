//! A query's columns as the fields of one Zarr v3 `struct` element (the seed's struct data
//! type, the layout ndfusion reads): its data type and fill value for `zarr.json`, and rows
//! packed into element bytes — fields in column order, no padding, little-endian, nested
//! structs depth first.
//!
//! Only fixed-size values fit a struct field: booleans, integers, floats, timestamps, dates
//! and durations (NumPy `datetime64` / `timedelta64`), and structs of those. A NULL timestamp
//! or duration is written as NaT (which ndfusion and NumPy read back as missing); other
//! fields have no missing value, so a NULL there is an error naming the column and the row,
//! never a value made up.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Fields, Schema, TimeUnit};
use serde_json::{json, Value};

use crate::zarr::metadata::data_type::MAX_STRUCT_DEPTH;
use crate::zarr::metadata::element::MAX_ELEMENT_BYTES;

/// NumPy's NaT: the smallest 64-bit integer.
const NAT: i64 = i64::MIN;

/// The element layout of a write: every column a field at its byte offset.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    fields: Vec<FieldLayout>,
    size: usize,
}

/// One field: where it lies in the element and how its values are written.
#[derive(Debug, Clone)]
struct FieldLayout {
    name: String,
    /// Byte offset in the element.
    offset: usize,
    kind: FieldKind,
}

#[derive(Debug, Clone)]
enum FieldKind {
    Bool,
    /// A fixed-width value copied as it is in Arrow's buffer (integers, floats).
    Fixed {
        width: usize,
        zarr: &'static str,
    },
    /// A 64-bit timestamp or duration: NULL is written as NaT.
    Time {
        numpy: &'static str,
        unit: &'static str,
    },
    /// Days (`Date32`), widened to 64 bits: NumPy `datetime64[D]`.
    Date32,
    Struct(Vec<FieldLayout>),
}

/// Why a column cannot be written as a struct field.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LayoutError {
    #[error(
        "column '{column}' is {data_type}, which a struct field cannot hold: the Zarr struct \
         data type takes only fixed-size values (booleans, integers, floats, timestamps, \
         dates, durations and structs of them); cast it or leave it out"
    )]
    Unsupported { column: String, data_type: DataType },
    #[error("the query has no columns; a struct element needs at least one field")]
    NoColumns,
    #[error("column '{column}': the field name '{name}' appears more than once")]
    Duplicate { column: String, name: String },
    #[error("column '{column}' has an empty field name")]
    EmptyName { column: String },
    #[error("column '{column}' nests structs deeper than {MAX_STRUCT_DEPTH} levels")]
    TooDeep { column: String },
    #[error(
        "an element of {size} bytes is larger than the {MAX_ELEMENT_BYTES} a Zarr element may have"
    )]
    TooLarge { size: usize },
    #[error(
        "column '{column}' is NULL in row {row} of the result (counted from 0), and its \
         {what} field has no missing value (timestamps and durations write NULL as NaT): fill \
         it (coalesce) or filter the row"
    )]
    Null {
        column: String,
        row: u64,
        what: &'static str,
    },
}

impl Layout {
    /// The layout of `schema`'s columns.
    pub(crate) fn of(schema: &Schema) -> Result<Layout, LayoutError> {
        if schema.fields().is_empty() {
            return Err(LayoutError::NoColumns);
        }
        let mut size = 0;
        let fields = lay_out(schema.fields(), "", 0, &mut size)?;
        if size > MAX_ELEMENT_BYTES {
            return Err(LayoutError::TooLarge { size });
        }
        Ok(Layout { fields, size })
    }

    /// Bytes of one element.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The `struct` data type, as `zarr.json` holds it.
    pub(crate) fn data_type(&self) -> Value {
        struct_type(&self.fields)
    }

    /// The fill value: every field's zero (no element of a complete write is unwritten).
    pub(crate) fn fill_value(&self) -> Value {
        fill_of(&self.fields)
    }

    /// Packs `columns` (one per field, `rows` rows) into `out`, element after element;
    /// `first_row` is the first row's number in the whole result, for errors.
    pub(crate) fn encode(
        &self,
        columns: &[ArrayRef],
        out: &mut [u8],
        first_row: u64,
    ) -> Result<(), LayoutError> {
        debug_assert_eq!(columns.len(), self.fields.len());
        for (field, column) in self.fields.iter().zip(columns) {
            encode_field(field, column.as_ref(), out, self.size, first_row, "")?;
        }
        Ok(())
    }
}

/// The fields of `columns`, from byte `offset` on; `size` grows by each field's size.
fn lay_out(
    columns: &Fields,
    parent: &str,
    depth: usize,
    size: &mut usize,
) -> Result<Vec<FieldLayout>, LayoutError> {
    let mut names = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(columns.len());
    for column in columns {
        let name = column.name();
        let path = match parent {
            "" => name.clone(),
            _ => format!("{parent}.{name}"),
        };
        if name.is_empty() {
            return Err(LayoutError::EmptyName { column: path });
        }
        if !names.insert(name.as_str()) {
            return Err(LayoutError::Duplicate {
                column: path,
                name: name.clone(),
            });
        }
        let offset = *size;
        let unsupported = || LayoutError::Unsupported {
            column: path.clone(),
            data_type: column.data_type().clone(),
        };
        let fixed = |width, zarr| FieldKind::Fixed { width, zarr };
        let kind = match column.data_type() {
            DataType::Boolean => FieldKind::Bool,
            DataType::Int8 => fixed(1, "int8"),
            DataType::Int16 => fixed(2, "int16"),
            DataType::Int32 => fixed(4, "int32"),
            DataType::Int64 => fixed(8, "int64"),
            DataType::UInt8 => fixed(1, "uint8"),
            DataType::UInt16 => fixed(2, "uint16"),
            DataType::UInt32 => fixed(4, "uint32"),
            DataType::UInt64 => fixed(8, "uint64"),
            DataType::Float16 => fixed(2, "float16"),
            DataType::Float32 => fixed(4, "float32"),
            DataType::Float64 => fixed(8, "float64"),
            DataType::Timestamp(unit, _) => FieldKind::Time {
                numpy: "numpy.datetime64",
                unit: numpy_unit(unit),
            },
            DataType::Duration(unit) => FieldKind::Time {
                numpy: "numpy.timedelta64",
                unit: numpy_unit(unit),
            },
            DataType::Date32 => FieldKind::Date32,
            DataType::Date64 => FieldKind::Time {
                numpy: "numpy.datetime64",
                unit: "ms",
            },
            DataType::Struct(children) => {
                if depth + 1 >= MAX_STRUCT_DEPTH {
                    return Err(LayoutError::TooDeep { column: path });
                }
                if children.is_empty() {
                    return Err(unsupported());
                }
                FieldKind::Struct(lay_out(children, &path, depth + 1, size)?)
            }
            _ => return Err(unsupported()),
        };
        *size += match &kind {
            FieldKind::Bool => 1,
            FieldKind::Fixed { width, .. } => *width,
            FieldKind::Time { .. } | FieldKind::Date32 => 8,
            FieldKind::Struct(_) => 0, // its children added theirs
        };
        out.push(FieldLayout {
            name: name.clone(),
            offset,
            kind,
        });
    }
    Ok(out)
}

fn numpy_unit(unit: &TimeUnit) -> &'static str {
    match unit {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    }
}

fn struct_type(fields: &[FieldLayout]) -> Value {
    let fields: Vec<Value> = (fields.iter())
        .map(|f| json!({"name": f.name, "data_type": data_type_of(&f.kind)}))
        .collect();
    json!({"name": "struct", "configuration": {"fields": fields}})
}

fn data_type_of(kind: &FieldKind) -> Value {
    match kind {
        FieldKind::Bool => json!("bool"),
        FieldKind::Fixed { zarr, .. } => json!(zarr),
        FieldKind::Time { numpy, unit } => {
            json!({"name": numpy, "configuration": {"unit": unit, "scale_factor": 1}})
        }
        FieldKind::Date32 => {
            json!({"name": "numpy.datetime64", "configuration": {"unit": "D", "scale_factor": 1}})
        }
        FieldKind::Struct(fields) => struct_type(fields),
    }
}

fn fill_of(fields: &[FieldLayout]) -> Value {
    let map = (fields.iter())
        .map(|f| {
            let value = match &f.kind {
                FieldKind::Bool => json!(false),
                FieldKind::Fixed { zarr, .. } if zarr.starts_with("float") => json!(0.0),
                FieldKind::Fixed { .. } | FieldKind::Time { .. } | FieldKind::Date32 => json!(0),
                FieldKind::Struct(children) => fill_of(children),
            };
            (f.name.clone(), value)
        })
        .collect();
    Value::Object(map)
}

/// Writes `column` into field `field` of each element of `out` (elements of `stride` bytes,
/// one per row of the column).
fn encode_field(
    field: &FieldLayout,
    column: &dyn Array,
    out: &mut [u8],
    stride: usize,
    first_row: u64,
    parent: &str,
) -> Result<(), LayoutError> {
    let path = || match parent {
        "" => field.name.clone(),
        _ => format!("{parent}.{}", field.name),
    };
    let refuse_nulls = |what: &'static str| match first_null(column) {
        Some(i) => Err(LayoutError::Null {
            column: path(),
            row: first_row + i as u64,
            what,
        }),
        None => Ok(()),
    };
    let cells = out.chunks_exact_mut(stride).take(column.len());
    match &field.kind {
        FieldKind::Bool => {
            refuse_nulls("boolean")?;
            let values = column.as_boolean();
            for (i, cell) in cells.enumerate() {
                cell[field.offset] = u8::from(values.value(i));
            }
        }
        FieldKind::Fixed { width, zarr } => {
            refuse_nulls(zarr)?;
            copy_fixed(column, *width, cells, field.offset);
        }
        FieldKind::Time { .. } => {
            copy_fixed(column, 8, cells, field.offset);
            write_nat(column, out, stride, field.offset);
        }
        FieldKind::Date32 => {
            let days = column.as_primitive::<arrow::datatypes::Date32Type>();
            for (cell, day) in cells.zip(days.values().iter()) {
                cell[field.offset..field.offset + 8]
                    .copy_from_slice(&i64::from(*day).to_le_bytes());
            }
            write_nat(column, out, stride, field.offset);
        }
        FieldKind::Struct(children) => {
            refuse_nulls("struct")?;
            let parent = path();
            let columns = column.as_struct();
            for (child, values) in children.iter().zip(columns.columns()) {
                encode_field(child, values.as_ref(), out, stride, first_row, &parent)?;
            }
        }
    }
    Ok(())
}

/// The first NULL row of `column`, if any.
fn first_null(column: &dyn Array) -> Option<usize> {
    let nulls = column.logical_nulls()?;
    (nulls.null_count() > 0)
        .then(|| nulls.iter().position(|valid| !valid))
        .flatten()
}

/// Copies the `width`-byte values of a fixed-width column to `offset` of each cell, as
/// little-endian bytes.
fn copy_fixed<'a>(
    column: &dyn Array,
    width: usize,
    cells: impl Iterator<Item = &'a mut [u8]>,
    offset: usize,
) {
    let data = column.to_data();
    let start = data.offset() * width;
    let values = &data.buffers()[0].as_slice()[start..start + data.len() * width];
    for (cell, value) in cells.zip(values.chunks_exact(width)) {
        let target = &mut cell[offset..offset + width];
        target.copy_from_slice(value);
        if cfg!(target_endian = "big") {
            target.reverse();
        }
    }
}

/// Writes NaT into the 8 bytes at `offset` of each element whose row is NULL.
fn write_nat(column: &dyn Array, out: &mut [u8], stride: usize, offset: usize) {
    let Some(nulls) = column.logical_nulls() else {
        return;
    };
    if nulls.null_count() == 0 {
        return;
    }
    for (cell, valid) in out.chunks_exact_mut(stride).zip(nulls.iter()) {
        if !valid {
            cell[offset..offset + 8].copy_from_slice(&NAT.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{
        BooleanArray, Date32Array, Float32Array, Int32Array, StringArray, StructArray,
        TimestampSecondArray, UInt8Array,
    };
    use arrow::datatypes::Field;
    use arrow::record_batch::RecordBatch;

    use super::*;
    use crate::zarr::metadata::data_type::parse_data_type;
    use crate::zarr::metadata::element::ByteOrder;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    /// The seed's example: id int32, flags uint8, value float64 -> 13 bytes, offsets 0, 4, 5;
    /// and a nested point {x, y} before value -> 16 bytes. ndfusion's own reader parses the
    /// data type written back to the same sizes.
    #[test]
    fn fields_are_packed_in_column_order_without_padding() {
        let point = StructArray::from(vec![
            (
                Arc::new(Field::new("x", DataType::Float32, false)),
                Arc::new(Float32Array::from(vec![1.5])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("y", DataType::Float32, false)),
                Arc::new(Float32Array::from(vec![-2.0])) as ArrayRef,
            ),
        ]);
        let b = batch(vec![
            ("id", Arc::new(Int32Array::from(vec![7])) as ArrayRef),
            ("flags", Arc::new(UInt8Array::from(vec![3]))),
            ("point", Arc::new(point)),
            ("ok", Arc::new(BooleanArray::from(vec![true]))),
        ]);
        let layout = Layout::of(&b.schema()).unwrap();
        assert_eq!(layout.size(), 4 + 1 + 8 + 1);
        let mut out = vec![0u8; layout.size()];
        layout.encode(b.columns(), &mut out, 0).unwrap();
        let mut expected = 7i32.to_le_bytes().to_vec();
        expected.push(3);
        expected.extend(1.5f32.to_le_bytes());
        expected.extend((-2.0f32).to_le_bytes());
        expected.push(1);
        assert_eq!(out, expected);
        let parsed = parse_data_type(&layout.data_type(), ByteOrder::Little).unwrap();
        assert_eq!(parsed.size(), layout.size());
        assert_eq!(
            layout.fill_value(),
            json!({"id": 0, "flags": 0, "point": {"x": 0.0, "y": 0.0}, "ok": false})
        );
    }

    /// A NULL timestamp is NaT; a NULL integer is an error naming the column and the row of
    /// the whole result; a sliced column is read from its offset.
    #[test]
    fn nulls_are_nat_or_an_error() {
        let times = TimestampSecondArray::from(vec![Some(10), None, Some(30)]).slice(1, 2);
        let days = Date32Array::from(vec![Some(1), None]);
        let b = batch(vec![
            ("t", Arc::new(times) as ArrayRef),
            ("d", Arc::new(days) as ArrayRef),
        ]);
        let layout = Layout::of(&b.schema()).unwrap();
        let mut out = vec![0u8; 2 * layout.size()];
        layout.encode(b.columns(), &mut out, 0).unwrap();
        let at = |i: usize| i64::from_le_bytes(out[i * 8..i * 8 + 8].try_into().unwrap());
        assert_eq!([at(0), at(1), at(2), at(3)], [NAT, 1, 30, NAT]);
        let b = batch(vec![(
            "n",
            Arc::new(Int32Array::from(vec![Some(1), None])) as ArrayRef,
        )]);
        let layout = Layout::of(&b.schema()).unwrap();
        let mut out = vec![0u8; 8];
        let err = layout
            .encode(b.columns(), &mut out, 100)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("column 'n' is NULL in row 101 of the result") && err.contains("int32"),
            "{err}"
        );
    }

    #[test]
    fn columns_a_struct_cannot_hold_are_named() {
        let b = batch(vec![
            ("id", Arc::new(Int32Array::from(vec![1])) as ArrayRef),
            ("name", Arc::new(StringArray::from(vec!["a"]))),
        ]);
        let err = Layout::of(&b.schema()).unwrap_err().to_string();
        assert!(err.contains("column 'name' is Utf8"), "{err}");
        let err = Layout::of(&Schema::empty()).unwrap_err().to_string();
        assert!(err.contains("no columns"), "{err}");
    }
}
