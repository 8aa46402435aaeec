//! One array of a gridded write (a data variable or a coordinate): how its column's values
//! are stored, as xarray stores what `Dataset.from_dataframe` makes of them.
//!
//! - Floats as they are; a NULL or a cell no row names is NaN (`_FillValue` NaN, as xarray
//!   writes it).
//! - Integers and booleans as they are when every cell has a value; when one has none,
//!   float64 with NaN there, as `from_dataframe` makes them (pandas has no missing integer).
//! - Timestamps as CF times: int64 in the column's unit `since 1970-01-01`, calendar
//!   `proleptic_gregorian`; NaT (the smallest int64) where there is no value, as xarray
//!   stores NaT.
//! - Strings as Zarr strings (`vlen-utf8`); a missing one is `""`, as xarray writes it (its
//!   note: variable-length strings have no bit pattern for a missing value).
//!
//! A slab holds `width()` bytes a cell. A string's cell holds where its bytes are in the
//! slab's arena (`Strings`): a start and a length, each a little-endian u64.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimeUnit};
use serde_json::{json, Map, Value};

/// How an array's values are stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stored {
    /// A float; missing cells NaN.
    Float { width: usize },
    /// An integer, every cell with a value.
    Int { width: usize, zarr: &'static str },
    /// A boolean, every cell with a value.
    Bool,
    /// A CF time: int64 in `unit` since the epoch; missing cells NaT.
    Time { unit: TimeUnit },
    /// A string; missing cells `""`.
    Str,
}

/// The bytes of a slab's strings, which its cells point into.
pub(crate) type Strings = Vec<u8>;

/// Why a column cannot be written on the grid.
#[derive(Debug, thiserror::Error)]
#[error(
    "column '{column}' is {data_type}, which a gridded write does not store yet (integers, \
     floats, booleans, timestamps and strings); cast it or leave it out"
)]
pub(crate) struct Unsupported {
    column: String,
    data_type: DataType,
}

impl Stored {
    /// How a column of `data_type` is stored; `missing`: some cell has no value (a NULL, or
    /// no row for it).
    pub(crate) fn of(
        column: &str,
        data_type: &DataType,
        missing: bool,
    ) -> Result<Stored, Unsupported> {
        use DataType::*;
        let int = |width, zarr| match missing {
            true => Stored::Float { width: 8 },
            false => Stored::Int { width, zarr },
        };
        Ok(match data_type {
            Float16 => Stored::Float { width: 2 },
            Float32 => Stored::Float { width: 4 },
            Float64 => Stored::Float { width: 8 },
            Int8 => int(1, "int8"),
            Int16 => int(2, "int16"),
            Int32 => int(4, "int32"),
            Int64 => int(8, "int64"),
            UInt8 => int(1, "uint8"),
            UInt16 => int(2, "uint16"),
            UInt32 => int(4, "uint32"),
            UInt64 => int(8, "uint64"),
            Boolean if missing => Stored::Float { width: 8 },
            Boolean => Stored::Bool,
            Timestamp(unit, _) => Stored::Time { unit: *unit },
            Utf8 | LargeUtf8 | Utf8View => Stored::Str,
            _ => {
                return Err(Unsupported {
                    column: column.to_string(),
                    data_type: data_type.clone(),
                })
            }
        })
    }

    /// Bytes of one value.
    pub(crate) fn width(&self) -> usize {
        match self {
            Stored::Float { width } | Stored::Int { width, .. } => *width,
            Stored::Bool => 1,
            Stored::Time { .. } => 8,
            Stored::Str => 16,
        }
    }

    pub(crate) fn is_float(&self) -> bool {
        matches!(self, Stored::Float { .. })
    }

    pub(crate) fn is_string(&self) -> bool {
        matches!(self, Stored::Str)
    }

    /// The bytes of a cell without a value (NaN, NaT; zero where every cell has one).
    pub(crate) fn missing(&self) -> Vec<u8> {
        match self {
            Stored::Float { width: 2 } => half::f16::NAN.to_le_bytes().to_vec(),
            Stored::Float { width: 4 } => f32::NAN.to_le_bytes().to_vec(),
            Stored::Float { .. } => f64::NAN.to_le_bytes().to_vec(),
            Stored::Time { .. } => i64::MIN.to_le_bytes().to_vec(),
            other => vec![0; other.width()],
        }
    }

    /// The Zarr 3 data type.
    pub(crate) fn data_type(&self) -> &'static str {
        match self {
            Stored::Float { width: 2 } => "float16",
            Stored::Float { width: 4 } => "float32",
            Stored::Float { .. } => "float64",
            Stored::Int { zarr, .. } => zarr,
            Stored::Bool => "bool",
            Stored::Time { .. } => "int64",
            Stored::Str => "string",
        }
    }

    /// The Zarr 2 (numpy) data type.
    pub(crate) fn dtype_v2(&self) -> &'static str {
        match self {
            Stored::Float { width: 2 } => "<f2",
            Stored::Float { width: 4 } => "<f4",
            Stored::Float { .. } => "<f8",
            Stored::Int { zarr, .. } => match *zarr {
                "int8" => "|i1",
                "int16" => "<i2",
                "int32" => "<i4",
                "int64" => "<i8",
                "uint8" => "|u1",
                "uint16" => "<u2",
                "uint32" => "<u4",
                _ => "<u8",
            },
            Stored::Bool => "|b1",
            Stored::Time { .. } => "<i8",
            Stored::Str => "|O",
        }
    }

    /// The Zarr 3 `fill_value`, as xarray's arrays have it.
    pub(crate) fn fill_value(&self) -> Value {
        match self {
            Stored::Float { .. } => json!("NaN"),
            Stored::Int { .. } | Stored::Time { .. } => json!(0),
            Stored::Bool => json!(false),
            Stored::Str => json!(""),
        }
    }

    /// The attributes xarray reads the values with (a time's `units` and `calendar`).
    pub(crate) fn attributes(&self) -> Map<String, Value> {
        let mut attributes = Map::new();
        if let Stored::Time { unit } = self {
            let unit = match unit {
                TimeUnit::Second => "seconds",
                TimeUnit::Millisecond => "milliseconds",
                TimeUnit::Microsecond => "microseconds",
                TimeUnit::Nanosecond => "nanoseconds",
            };
            attributes.insert("units".into(), json!(format!("{unit} since 1970-01-01")));
            attributes.insert("calendar".into(), json!("proleptic_gregorian"));
        }
        attributes
    }

    /// The column as the array it is stored from (integers and booleans made float64 when
    /// cells are missing, strings of every kind large strings), with its values' bytes.
    pub(crate) fn prepare(&self, column: &ArrayRef) -> Result<ArrayRef, arrow::error::ArrowError> {
        match (self, column.data_type()) {
            (Stored::Float { width: 8 }, DataType::Float64) => Ok(column.clone()),
            (Stored::Float { width: 8 }, _) => cast(column, &DataType::Float64),
            (Stored::Str, DataType::LargeUtf8) => Ok(column.clone()),
            (Stored::Str, _) => cast(column, &DataType::LargeUtf8),
            _ => Ok(column.clone()),
        }
    }

    /// Writes each row of `column` (as [`prepare`](Self::prepare)d) into its cell of `slab`:
    /// row `i` into cell `cells[i]`; a string's bytes are appended to `strings`.
    pub(crate) fn put_column(
        &self,
        column: &dyn Array,
        cells: &[usize],
        slab: &mut [u8],
        strings: &mut Strings,
    ) {
        let w = self.width();
        if let Stored::Str = self {
            let column = column.as_string::<i64>();
            for (i, &c) in cells.iter().enumerate() {
                let cell = &mut slab[c * w..(c + 1) * w];
                let value = match column.is_null(i) {
                    true => "",
                    false => column.value(i),
                };
                let start = strings.len() as u64;
                strings.extend_from_slice(value.as_bytes());
                cell[..8].copy_from_slice(&start.to_le_bytes());
                cell[8..].copy_from_slice(&(value.len() as u64).to_le_bytes());
            }
            return;
        }
        let data = column.to_data();
        let values: &[u8] = match self {
            Stored::Bool => &[],
            _ => &data.buffers()[0].as_slice()[data.offset() * w..],
        };
        let missing = self.missing();
        for (i, &c) in cells.iter().enumerate() {
            let cell = &mut slab[c * w..(c + 1) * w];
            if column.is_null(i) {
                cell.copy_from_slice(&missing);
                continue;
            }
            match self {
                Stored::Bool => cell[0] = u8::from(column.as_boolean().value(i)),
                _ => {
                    cell.copy_from_slice(&values[i * w..(i + 1) * w]);
                    if cfg!(target_endian = "big") {
                        cell.reverse();
                    }
                }
            }
        }
    }

    /// A chunk of string cells (as [`put_column`](Self::put_column) wrote them) encoded as
    /// Zarr's `vlen-utf8`: the count of items, then each item's length and bytes (u32,
    /// little-endian). An error names a string longer than the encoding can hold.
    pub(crate) fn vlen_utf8(cells: &[u8], strings: &[u8]) -> Result<Vec<u8>, String> {
        let count = cells.len() / 16;
        let bytes: usize = cells.chunks_exact(16).map(|c| u64_at(c, 8) as usize).sum();
        let mut out = Vec::with_capacity(4 + 4 * count + bytes);
        let too_long =
            || "a string or chunk longer than 4 GiB, which vlen-utf8 cannot hold".to_string();
        out.extend_from_slice(&u32::try_from(count).map_err(|_| too_long())?.to_le_bytes());
        for cell in cells.chunks_exact(16) {
            let (start, len) = (u64_at(cell, 0) as usize, u64_at(cell, 8) as usize);
            out.extend_from_slice(&u32::try_from(len).map_err(|_| too_long())?.to_le_bytes());
            out.extend_from_slice(&strings[start..start + len]);
        }
        Ok(out)
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Copies the box of `src` (of `src_shape`, C order, `width`-byte items) starting at
/// `origin` into `dst` (of `dst_shape`), as far as both reach; the rest of `dst` is left as
/// it is.
pub(crate) fn copy_box(
    src: &[u8],
    src_shape: &[usize],
    origin: &[usize],
    dst: &mut [u8],
    dst_shape: &[usize],
    width: usize,
) {
    let rank = src_shape.len();
    let extent: Vec<usize> = (0..rank)
        .map(|d| dst_shape[d].min(src_shape[d].saturating_sub(origin[d])))
        .collect();
    if extent.contains(&0) {
        return;
    }
    let strides = |shape: &[usize]| {
        let mut s = vec![1; rank];
        for d in (0..rank.saturating_sub(1)).rev() {
            s[d] = s[d + 1] * shape[d + 1];
        }
        s
    };
    let (src_strides, dst_strides) = (strides(src_shape), strides(dst_shape));
    let run = extent[rank - 1] * width;
    let mut index = vec![0usize; rank];
    loop {
        let s: usize = (0..rank)
            .map(|d| (origin[d] + index[d]) * src_strides[d])
            .sum();
        let t: usize = (0..rank).map(|d| index[d] * dst_strides[d]).sum();
        dst[t * width..t * width + run].copy_from_slice(&src[s * width..s * width + run]);
        // The next run: the last axis is copied whole, count the others like an odometer.
        let mut d = rank - 1;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < extent[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Int32Array, StringViewArray, TimestampSecondArray};

    use super::*;

    #[test]
    fn integers_with_missing_cells_are_floats_as_xarray_makes_them() {
        assert_eq!(
            Stored::of("i", &DataType::Int32, false).unwrap(),
            Stored::Int {
                width: 4,
                zarr: "int32"
            }
        );
        assert_eq!(
            Stored::of("i", &DataType::Int32, true).unwrap(),
            Stored::Float { width: 8 }
        );
        assert_eq!(
            Stored::of("b", &DataType::Boolean, true).unwrap(),
            Stored::Float { width: 8 }
        );
        let e = Stored::of("s", &DataType::Binary, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("column 's' is Binary"), "{e}");
        let stored = Stored::of("i", &DataType::Int32, true).unwrap();
        let column: ArrayRef = Arc::new(Int32Array::from(vec![Some(3), None]).slice(0, 2));
        let column = stored.prepare(&column).unwrap();
        let mut slab = [0u8; 16];
        stored.put_column(column.as_ref(), &[1, 0], &mut slab, &mut Strings::new());
        assert_eq!(f64::from_le_bytes(slab[8..].try_into().unwrap()), 3.0);
        assert!(f64::from_le_bytes(slab[..8].try_into().unwrap()).is_nan());
        let b = Stored::Bool;
        let column: ArrayRef = Arc::new(BooleanArray::from(vec![false, true]));
        let mut slab = [9u8; 2];
        b.put_column(column.as_ref(), &[0, 1], &mut slab, &mut Strings::new());
        assert_eq!(slab, [0, 1]);
        let t = Stored::of("t", &DataType::Timestamp(TimeUnit::Second, None), false).unwrap();
        let column: ArrayRef =
            Arc::new(TimestampSecondArray::from(vec![None, Some(5)]).slice(1, 1));
        let mut slab = [0u8; 8];
        t.put_column(column.as_ref(), &[0], &mut slab, &mut Strings::new());
        assert_eq!(i64::from_le_bytes(slab), 5);
        assert_eq!(t.attributes()["units"], "seconds since 1970-01-01");
    }

    #[test]
    fn strings_go_to_the_arena_and_out_as_vlen_utf8() {
        let s = Stored::of("s", &DataType::Utf8View, true).unwrap();
        assert_eq!(s, Stored::Str);
        let column: ArrayRef = Arc::new(StringViewArray::from(vec![Some("ab"), None, Some("é")]));
        let column = s.prepare(&column).unwrap();
        // Three rows into cells 2, 0 and 3 of four; cell 1 stays missing.
        let mut slab = s.missing().repeat(4);
        let mut strings = Strings::new();
        s.put_column(column.as_ref(), &[2, 0, 3], &mut slab, &mut strings);
        assert_eq!(strings, "abé".as_bytes());
        let encoded = Stored::vlen_utf8(&slab, &strings).unwrap();
        let mut expected = vec![4, 0, 0, 0];
        for item in ["", "", "ab", "é"] {
            expected.extend_from_slice(&(item.len() as u32).to_le_bytes());
            expected.extend_from_slice(item.as_bytes());
        }
        assert_eq!(encoded, expected);
    }

    #[test]
    fn boxes_are_copied_run_by_run_and_clipped_at_the_edges() {
        // A 3 x 4 source of bytes 0..12; the 2 x 3 box at (1, 2) reaches past the last column.
        let src: Vec<u8> = (0..12).collect();
        let mut dst = vec![99u8; 6];
        copy_box(&src, &[3, 4], &[1, 2], &mut dst, &[2, 3], 1);
        assert_eq!(dst, [6, 7, 99, 10, 11, 99]);
        let mut one = vec![0u8; 4];
        copy_box(&src, &[12], &[8], &mut one, &[4], 1);
        assert_eq!(one, [8, 9, 10, 11]);
    }
}
