//! Decoding packed element bytes into Arrow columns.
//!
//! One pass per leaf field, monomorphised per value type: the type is matched once per column,
//! never per element, and no row allocates. Which elements are read is a [`Gather`]: a stride
//! for whole chunks, explicit positions for a selection inside a chunk.

use std::sync::Arc;

use arrow::array::{
    make_array, Array, ArrayRef, BinaryBuilder, BooleanArray, FixedSizeBinaryArray,
    FixedSizeListArray, PrimitiveArray, StringBuilder, StructArray,
};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Field as ArrowField, Float16Type, Float32Type, Float64Type,
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};

use crate::zarr::decode::error::DecodeError;
use crate::zarr::metadata::element::{
    complex_fields, field_offsets, struct_fields, ByteOrder, ElementType, ScalarKind, TimeScale,
};
use crate::zarr::plan::gather::Gather;

/// Decodes the value at byte `offset` of each gathered element of `bytes` as `ty`.
/// `field` names the field in errors. The caller checks that every element fits in `bytes`
/// (see [`Gather::check_bounds`]).
pub(crate) fn decode_field(
    ty: &ElementType,
    bytes: &[u8],
    gather: &Gather,
    offset: usize,
    field: &str,
) -> Result<ArrayRef, DecodeError> {
    match ty {
        ElementType::Scalar { kind, order } => {
            decode_scalar(kind, *order, bytes, gather, offset, field)
        }
        ElementType::Struct(fields) => {
            let offsets = field_offsets(fields);
            let children = fields
                .iter()
                .zip(offsets)
                .map(|(f, o)| {
                    decode_field(
                        &f.ty,
                        bytes,
                        gather,
                        offset + o,
                        &format!("{field}.{}", f.name),
                    )
                })
                .collect::<Result<Vec<_>, DecodeError>>()?;
            StructArray::try_new(struct_fields(fields), children, None)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(DecodeError::arrow(field))
        }
        ElementType::FixedArray { item, len } => {
            let items = gather.expand(*len, item.size());
            let values = decode_field(item, bytes, &items, offset, field)?;
            let item_field = Arc::new(ArrowField::new("item", item.arrow_type(), item.nullable()));
            FixedSizeListArray::try_new(item_field, *len as i32, values, None)
                .map(|a| Arc::new(a) as ArrayRef)
                .map_err(DecodeError::arrow(field))
        }
    }
}

/// A fixed-width value read from its stored bytes.
trait Wire: Sized {
    const WIDTH: usize;
    fn from_le(bytes: &[u8]) -> Self;
    fn from_be(bytes: &[u8]) -> Self;
}

macro_rules! wire {
    ($($t:ty),*) => {$(
        impl Wire for $t {
            const WIDTH: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn from_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes[..Self::WIDTH].try_into().expect("width checked"))
            }
            #[inline(always)]
            fn from_be(bytes: &[u8]) -> Self {
                <$t>::from_be_bytes(bytes[..Self::WIDTH].try_into().expect("width checked"))
            }
        }
    )*};
}
wire!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, half::f16);

#[inline]
fn read_values<T: Wire>(bytes: &[u8], gather: &Gather, offset: usize, order: ByteOrder) -> Vec<T> {
    let w = T::WIDTH;
    match order {
        ByteOrder::Little => gather.map(|p| T::from_le(&bytes[p + offset..p + offset + w])),
        ByteOrder::Big => gather.map(|p| T::from_be(&bytes[p + offset..p + offset + w])),
    }
}

fn primitive<T>(bytes: &[u8], gather: &Gather, offset: usize, order: ByteOrder) -> ArrayRef
where
    T: ArrowPrimitiveType,
    T::Native: Wire,
{
    let values = read_values::<T::Native>(bytes, gather, offset, order);
    Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(values), None))
}

fn decode_scalar(
    kind: &ScalarKind,
    order: ByteOrder,
    bytes: &[u8],
    gather: &Gather,
    offset: usize,
    field: &str,
) -> Result<ArrayRef, DecodeError> {
    use ScalarKind::*;
    Ok(match kind {
        Bool => {
            let raw = read_values::<u8>(bytes, gather, offset, order);
            Arc::new(BooleanArray::new(
                BooleanBuffer::collect_bool(raw.len(), |i| raw[i] != 0),
                None,
            ))
        }
        Int8 => primitive::<Int8Type>(bytes, gather, offset, order),
        Int16 => primitive::<Int16Type>(bytes, gather, offset, order),
        Int32 => primitive::<Int32Type>(bytes, gather, offset, order),
        Int64 => primitive::<Int64Type>(bytes, gather, offset, order),
        UInt8 => primitive::<UInt8Type>(bytes, gather, offset, order),
        UInt16 => primitive::<UInt16Type>(bytes, gather, offset, order),
        UInt32 => primitive::<UInt32Type>(bytes, gather, offset, order),
        UInt64 => primitive::<UInt64Type>(bytes, gather, offset, order),
        Float16 => primitive::<Float16Type>(bytes, gather, offset, order),
        Float32 => primitive::<Float32Type>(bytes, gather, offset, order),
        Float64 => primitive::<Float64Type>(bytes, gather, offset, order),
        Complex64 => complex(
            primitive::<Float32Type>(bytes, gather, offset, order),
            primitive::<Float32Type>(bytes, gather, offset + 4, order),
            DataType::Float32,
        ),
        Complex128 => complex(
            primitive::<Float64Type>(bytes, gather, offset, order),
            primitive::<Float64Type>(bytes, gather, offset + 8, order),
            DataType::Float64,
        ),
        Raw(n) => {
            let mut values = Vec::with_capacity(gather.len() * n);
            gather.for_each(|p| values.extend_from_slice(&bytes[p + offset..p + offset + n]));
            Arc::new(
                FixedSizeBinaryArray::try_new(*n as i32, Buffer::from(values), None)
                    .map_err(DecodeError::arrow(field))?,
            )
        }
        NullTerminatedBytes(n) => {
            let mut builder = BinaryBuilder::with_capacity(gather.len(), gather.len() * n);
            gather
                .for_each(|p| builder.append_value(trim_nuls(&bytes[p + offset..p + offset + n])));
            Arc::new(builder.finish())
        }
        Utf32 { chars } => utf32(bytes, gather, offset, order, *chars, field)?,
        DateTime(scale) => time(bytes, gather, offset, order, *scale, false, field)?,
        TimeDelta(scale) => time(bytes, gather, offset, order, *scale, true, field)?,
    })
}

fn complex(re: ArrayRef, im: ArrayRef, part: DataType) -> ArrayRef {
    Arc::new(StructArray::new(complex_fields(part), vec![re, im], None))
}

fn trim_nuls(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    &b[..end]
}

fn utf32(
    bytes: &[u8],
    gather: &Gather,
    offset: usize,
    order: ByteOrder,
    chars: usize,
    field: &str,
) -> Result<ArrayRef, DecodeError> {
    let mut builder = StringBuilder::with_capacity(gather.len(), gather.len() * chars);
    let mut text = String::with_capacity(chars * 4);
    let mut bad = None;
    gather.for_each(|p| {
        text.clear();
        let units = &bytes[p + offset..p + offset + 4 * chars];
        let mut len = chars;
        // Trailing NULs are padding (NumPy semantics).
        while len > 0 && units[4 * (len - 1)..4 * len] == [0, 0, 0, 0] {
            len -= 1;
        }
        for unit in units[..4 * len].chunks_exact(4) {
            let code = match order {
                ByteOrder::Little => u32::from_le_bytes(unit.try_into().expect("4 bytes")),
                ByteOrder::Big => u32::from_be_bytes(unit.try_into().expect("4 bytes")),
            };
            match char::from_u32(code) {
                Some(c) => text.push(c),
                None => {
                    bad.get_or_insert(code);
                }
            }
        }
        builder.append_value(&text);
    });
    if let Some(code) = bad {
        return Err(DecodeError::InvalidUtf32 {
            field: field.to_string(),
            code,
        });
    }
    Ok(Arc::new(builder.finish()))
}

/// NumPy datetime64 / timedelta64: NaT (i64::MIN) is NULL; other values are scaled to the
/// Arrow unit, and a value that overflows it is an error rather than a wrong time.
fn time(
    bytes: &[u8],
    gather: &Gather,
    offset: usize,
    order: ByteOrder,
    scale: TimeScale,
    duration: bool,
    field: &str,
) -> Result<ArrayRef, DecodeError> {
    let mut values = read_values::<i64>(bytes, gather, offset, order);
    let valid = BooleanBuffer::collect_bool(values.len(), |i| values[i] != i64::MIN);
    let has_nat = valid.count_set_bits() != values.len();
    if scale.multiplier != 1 {
        for v in values.iter_mut().filter(|v| **v != i64::MIN) {
            *v = v
                .checked_mul(scale.multiplier)
                .ok_or_else(|| DecodeError::TimeOverflow {
                    field: field.to_string(),
                    value: *v,
                    unit: scale.unit,
                })?;
        }
    }
    let nulls = has_nat.then(|| NullBuffer::new(valid));
    let ints = PrimitiveArray::<Int64Type>::new(ScalarBuffer::from(values), nulls);
    let data_type = if duration {
        DataType::Duration(scale.unit)
    } else {
        DataType::Timestamp(scale.unit, None)
    };
    let data = ints
        .into_data()
        .into_builder()
        .data_type(data_type)
        .build()
        .map_err(DecodeError::arrow(field))?;
    Ok(make_array(data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int32Array};
    use arrow::datatypes::TimeUnit;

    fn scalar(kind: ScalarKind, order: ByteOrder) -> ElementType {
        ElementType::Scalar { kind, order }
    }

    #[test]
    fn strided_and_positional_gathers_read_the_same_values() {
        // Elements of 6 bytes: i32 little-endian then i16 big-endian.
        let mut bytes = Vec::new();
        for i in 0..4i32 {
            bytes.extend(i.to_le_bytes());
            bytes.extend((i as i16 * -10).to_be_bytes());
        }
        let all = Gather::Strided {
            start: 0,
            stride: 6,
            count: 4,
        };
        let some = Gather::Positions(vec![6, 18]);
        let a = decode_field(
            &scalar(ScalarKind::Int32, ByteOrder::Little),
            &bytes,
            &all,
            0,
            "a",
        )
        .unwrap();
        assert_eq!(
            a.as_primitive::<Int32Type>(),
            &Int32Array::from(vec![0, 1, 2, 3])
        );
        let b = decode_field(
            &scalar(ScalarKind::Int16, ByteOrder::Big),
            &bytes,
            &some,
            4,
            "b",
        )
        .unwrap();
        assert_eq!(
            b.as_primitive::<Int16Type>().values().to_vec(),
            vec![-10, -30]
        );
    }

    #[test]
    fn missing_chunk_repeats_the_fill_element() {
        let fill = 7.5f64.to_le_bytes();
        let g = Gather::Strided {
            start: 0,
            stride: 0,
            count: 3,
        };
        let a = decode_field(
            &scalar(ScalarKind::Float64, ByteOrder::Little),
            &fill,
            &g,
            0,
            "v",
        )
        .unwrap();
        assert_eq!(
            a.as_primitive::<Float64Type>().values().to_vec(),
            vec![7.5; 3]
        );
    }

    #[test]
    fn strings_strip_trailing_nuls_and_nat_is_null() {
        let mut bytes = Vec::new();
        bytes.extend(b"ab\0\0");
        for c in "hé".chars().chain(['\0']) {
            bytes.extend(u32::from(c).to_le_bytes());
        }
        bytes.extend(i64::MIN.to_le_bytes());
        bytes.extend(2i64.to_le_bytes());
        let elems = Gather::Strided {
            start: 0,
            stride: 0,
            count: 1,
        };
        let s = decode_field(
            &scalar(ScalarKind::NullTerminatedBytes(4), ByteOrder::Little),
            &bytes,
            &elems,
            0,
            "s",
        )
        .unwrap();
        assert_eq!(s.as_binary::<i32>().value(0), b"ab");
        let u = decode_field(
            &scalar(ScalarKind::Utf32 { chars: 3 }, ByteOrder::Little),
            &bytes,
            &elems,
            4,
            "u",
        )
        .unwrap();
        assert_eq!(u.as_string::<i32>().value(0), "hé");
        let day = TimeScale {
            unit: TimeUnit::Second,
            multiplier: 86_400,
        };
        let two = Gather::Positions(vec![16, 24]);
        let t = decode_field(
            &scalar(ScalarKind::DateTime(day), ByteOrder::Little),
            &bytes,
            &two,
            0,
            "t",
        )
        .unwrap();
        assert!(t.is_null(0));
        assert_eq!(
            t.as_primitive::<arrow::datatypes::TimestampSecondType>()
                .value(1),
            172_800
        );
    }

    #[test]
    fn out_of_range_elements_are_an_error_not_a_panic() {
        let g = Gather::Strided {
            start: 0,
            stride: 8,
            count: 3,
        };
        assert!(g.check_bounds(&[0u8; 20], 8).is_err());
        assert!(g.check_bounds(&[0u8; 24], 8).is_ok());
    }
}
