//! The layout of one Zarr array element, as ndfusion decodes it.
//!
//! zarrs hands back chunks as packed element bytes (the data type is replaced by raw bits, see
//! `array_meta.rs`), so the element layout here is the single source of truth for where each field
//! lives in an element and how its bytes become an Arrow value.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field as ArrowField, Fields, TimeUnit};

/// Byte order of a multi-byte value in the decoded element bytes (the stored order: the `bytes`
/// codec's `endian` in v3, the per-field `<`/`>` in v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ByteOrder {
    Little,
    Big,
}

/// A NumPy `datetime64` / `timedelta64` unit that maps onto an Arrow time unit exactly:
/// a value `v` means `v * multiplier` of `unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeScale {
    pub unit: TimeUnit,
    pub multiplier: i64,
}

/// A fixed-size value that is not a struct.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ScalarKind {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float16,
    Float32,
    Float64,
    Complex64,
    Complex128,
    /// `r<bits>` / `raw_bytes` / NumPy `V<n>`: opaque bytes.
    Raw(usize),
    /// NumPy `datetime64`; NaT (i64::MIN) reads as NULL.
    DateTime(TimeScale),
    /// NumPy `timedelta64`; NaT (i64::MIN) reads as NULL.
    TimeDelta(TimeScale),
    /// `fixed_length_utf32` / NumPy `U<n>`: n UTF-32 code units, trailing NULs stripped.
    Utf32 {
        chars: usize,
    },
    /// `null_terminated_bytes` / NumPy `S<n>`: n bytes, trailing NULs stripped.
    NullTerminatedBytes(usize),
}

impl ScalarKind {
    /// Encoded size in bytes.
    pub(crate) fn size(&self) -> usize {
        use ScalarKind::*;
        match self {
            Bool | Int8 | UInt8 => 1,
            Int16 | UInt16 | Float16 => 2,
            Int32 | UInt32 | Float32 => 4,
            Int64 | UInt64 | Float64 | Complex64 | DateTime(_) | TimeDelta(_) => 8,
            Complex128 => 16,
            Raw(n) | NullTerminatedBytes(n) => *n,
            Utf32 { chars } => chars * 4,
        }
    }

    /// Whether byte order matters for this kind (the spec requires an explicit `endian` then).
    pub(crate) fn is_multi_byte(&self) -> bool {
        use ScalarKind::*;
        !matches!(self, Bool | Int8 | UInt8 | Raw(_) | NullTerminatedBytes(_))
    }

    pub(crate) fn arrow_type(&self) -> DataType {
        use ScalarKind::*;
        match self {
            Bool => DataType::Boolean,
            Int8 => DataType::Int8,
            Int16 => DataType::Int16,
            Int32 => DataType::Int32,
            Int64 => DataType::Int64,
            UInt8 => DataType::UInt8,
            UInt16 => DataType::UInt16,
            UInt32 => DataType::UInt32,
            UInt64 => DataType::UInt64,
            Float16 => DataType::Float16,
            Float32 => DataType::Float32,
            Float64 => DataType::Float64,
            Complex64 => complex_type(DataType::Float32),
            Complex128 => complex_type(DataType::Float64),
            Raw(n) => DataType::FixedSizeBinary(*n as i32),
            DateTime(scale) => DataType::Timestamp(scale.unit, None),
            TimeDelta(scale) => DataType::Duration(scale.unit),
            Utf32 { .. } => DataType::Utf8,
            NullTerminatedBytes(_) => DataType::Binary,
        }
    }

    /// Whether the Arrow column can hold NULLs (only NaT does).
    pub(crate) fn nullable(&self) -> bool {
        matches!(self, ScalarKind::DateTime(_) | ScalarKind::TimeDelta(_))
    }
}

/// Complex numbers are `Struct{re, im}`.
pub(crate) fn complex_type(part: DataType) -> DataType {
    DataType::Struct(complex_fields(part))
}

pub(crate) fn complex_fields(part: DataType) -> Fields {
    Fields::from(vec![
        ArrowField::new("re", part.clone(), false),
        ArrowField::new("im", part, false),
    ])
}

/// The type of an element or of a struct field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ElementType {
    Scalar {
        kind: ScalarKind,
        order: ByteOrder,
    },
    Struct(Vec<StructField>),
    /// A NumPy subarray field (`["c", "<f4", [3]]`): `len` items of `item`, read as a
    /// FixedSizeList.
    FixedArray {
        item: Box<ElementType>,
        len: usize,
    },
}

/// A named field of a struct element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StructField {
    pub name: String,
    pub ty: ElementType,
}

/// The largest element ndfusion reads: metadata may claim any size, and every element is
/// decoded into memory.
pub(crate) const MAX_ELEMENT_BYTES: usize = 1 << 26;

impl ElementType {
    /// Encoded size in bytes, checked: `None` when it overflows or exceeds
    /// [`MAX_ELEMENT_BYTES`]. Metadata parsing checks it once, so [`size`](Self::size) cannot
    /// overflow afterwards.
    pub(crate) fn checked_size(&self) -> Option<usize> {
        let size = match self {
            ElementType::Scalar {
                kind: ScalarKind::Utf32 { chars },
                ..
            } => chars.checked_mul(4)?,
            ElementType::Scalar { kind, .. } => kind.size(),
            ElementType::Struct(fields) => fields
                .iter()
                .try_fold(0usize, |n, f| n.checked_add(f.ty.checked_size()?))?,
            ElementType::FixedArray { item, len } => item.checked_size()?.checked_mul(*len)?,
        };
        (size <= MAX_ELEMENT_BYTES).then_some(size)
    }

    /// Encoded size in bytes: fields are packed with no padding.
    pub(crate) fn size(&self) -> usize {
        match self {
            ElementType::Scalar { kind, .. } => kind.size(),
            ElementType::Struct(fields) => fields.iter().map(|f| f.ty.size()).sum(),
            ElementType::FixedArray { item, len } => item.size() * len,
        }
    }

    pub(crate) fn arrow_type(&self) -> DataType {
        match self {
            ElementType::Scalar { kind, .. } => kind.arrow_type(),
            ElementType::Struct(fields) => DataType::Struct(struct_fields(fields)),
            ElementType::FixedArray { item, len } => DataType::FixedSizeList(
                Arc::new(ArrowField::new("item", item.arrow_type(), item.nullable())),
                *len as i32,
            ),
        }
    }

    pub(crate) fn nullable(&self) -> bool {
        match self {
            ElementType::Scalar { kind, .. } => kind.nullable(),
            _ => false,
        }
    }

    /// Calls `f` on every scalar leaf, depth first.
    pub(crate) fn for_each_scalar(&self, f: &mut impl FnMut(&ScalarKind, ByteOrder)) {
        match self {
            ElementType::Scalar { kind, order } => f(kind, *order),
            ElementType::Struct(fields) => fields.iter().for_each(|x| x.ty.for_each_scalar(f)),
            ElementType::FixedArray { item, .. } => item.for_each_scalar(f),
        }
    }
}

/// The Arrow fields of a struct's fields, in declaration order.
pub(crate) fn struct_fields(fields: &[StructField]) -> Fields {
    fields
        .iter()
        .map(|f| ArrowField::new(&f.name, f.ty.arrow_type(), f.ty.nullable()))
        .collect()
}

/// Byte offset of each field within its struct, in declaration order.
pub(crate) fn field_offsets(fields: &[StructField]) -> Vec<usize> {
    let mut offset = 0;
    fields
        .iter()
        .map(|f| {
            let here = offset;
            offset += f.ty.size();
            here
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(kind: ScalarKind) -> ElementType {
        ElementType::Scalar {
            kind,
            order: ByteOrder::Little,
        }
    }

    #[test]
    fn packed_sizes_and_offsets_follow_the_spec_example() {
        // id int32, flags uint8, value float64: 13 bytes at offsets 0, 4, 5.
        let fields = vec![
            StructField {
                name: "id".into(),
                ty: scalar(ScalarKind::Int32),
            },
            StructField {
                name: "flags".into(),
                ty: scalar(ScalarKind::UInt8),
            },
            StructField {
                name: "value".into(),
                ty: scalar(ScalarKind::Float64),
            },
        ];
        assert_eq!(ElementType::Struct(fields.clone()).size(), 13);
        assert_eq!(field_offsets(&fields), vec![0, 4, 5]);
    }

    #[test]
    fn nested_struct_is_packed_depth_first() {
        let point = ElementType::Struct(vec![
            StructField {
                name: "x".into(),
                ty: scalar(ScalarKind::Float32),
            },
            StructField {
                name: "y".into(),
                ty: scalar(ScalarKind::Float32),
            },
        ]);
        let fields = vec![
            StructField {
                name: "point".into(),
                ty: point,
            },
            StructField {
                name: "value".into(),
                ty: scalar(ScalarKind::Float64),
            },
        ];
        assert_eq!(ElementType::Struct(fields.clone()).size(), 16);
        assert_eq!(field_offsets(&fields), vec![0, 8]);
    }
}
