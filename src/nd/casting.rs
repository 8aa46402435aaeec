//! Which type changes a write of nd arrays to a table may make: the [`Casting`] a write
//! allows, and the widenings that never lose information (`lance_nd/writer/` applies them).

use arrow::datatypes::DataType;

/// What a write may do when an array's values have another type than the table's column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Casting {
    /// Refuse (the default).
    #[default]
    No,
    /// Widen without loss: int to a wider int, uint to a wider int or uint, float16/32 to a
    /// wider float, int8/16/32 and uint8/16/32 to float64.
    Safe,
    /// Any cast Arrow can do, lossy ones included (floats truncated to integers, precision
    /// dropped); a value the table's type cannot hold (300 into Int8) is an error naming the
    /// array, never a NULL.
    Unsafe,
}

/// Casts that never lose information.
pub(crate) fn is_safe_widening(from: &DataType, to: &DataType) -> bool {
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
