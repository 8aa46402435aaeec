//! An HDF5 datatype as the NumPy dtype h5py reads it (ndfusion's `ndfusion.numpy_dtype`
//! Zarr data type, `zarr/metadata/data_type.rs`): a compound is a structured dtype (nested
//! compounds nest, array members are subarrays, each member keeps its byte order). The
//! packed Zarr element keeps only the bytes of a stored element that hold members, in member
//! order; when that is not the stored element as it is (gaps C's alignment left, members out
//! of offset order), a codec of ndfusion's copies them out (`hdf5_codecs.rs`, `REPACK`).
//!
//! Used for an HDF5 dataset read as an array (`hdf5/dataset.rs`) and for the compound
//! variables of a netCDF-4 file or HDF5 group (`nc4.rs`).

use hdf5_reader::messages::datatype::{Datatype, StringSize};
use hdf5_reader::ByteOrder;
use serde_json::{json, Value};

use super::nc4::Stored;
use crate::zarr::metadata::data_type::NUMPY_DTYPE;

/// An HDF5 type as a Zarr element: its NumPy dtype and the stored bytes it keeps.
#[derive(Debug)]
pub(crate) struct NumpyType {
    /// A typestring (`<i4`), or a structured dtype's field list.
    pub dtype: Value,
    /// Bytes of a stored element (with any bytes between members).
    pub stored_bytes: u64,
    /// The ranges of a stored element the packed element keeps, in member order.
    keep: Vec<(u64, u64)>,
    /// For an HDF5 array type read on its own: the subarray's shape (`dtype` its item's).
    shape: Option<Vec<u64>>,
}

impl NumpyType {
    pub(crate) fn of(t: &Datatype) -> Result<Self, String> {
        let mut keep = Keep::default();
        let dtype = numpy_dtype(t, "", 0, &mut keep)?;
        Ok(NumpyType {
            dtype,
            stored_bytes: stored_size(t)?,
            keep: keep.ranges,
            shape: None,
        })
    }

    /// The type of a compound's member read as an array of its own (`hdf5/dataset.rs`): as
    /// [`of`](Self::of), an HDF5 array type as a subarray of its item type, as h5py reads
    /// such a member (one fixed-size list per element).
    pub(crate) fn of_member(t: &Datatype) -> Result<Self, String> {
        let Datatype::Array { base, dims } = t else {
            return Self::of(t);
        };
        let mut keep = Keep::default();
        Ok(NumpyType {
            dtype: keep_array(base, dims, "", 0, &mut keep)?,
            stored_bytes: stored_size(t)?,
            keep: keep.ranges,
            shape: Some(dims.clone()),
        })
    }

    /// The Zarr v3 `data_type`.
    pub(crate) fn data_type(&self) -> Value {
        match &self.shape {
            None => json!({"name": NUMPY_DTYPE, "configuration": {"dtype": self.dtype}}),
            Some(shape) => json!({
                "name": NUMPY_DTYPE,
                "configuration": {"dtype": self.dtype, "shape": shape},
            }),
        }
    }

    /// The codecs from `bytes` up to the HDF5 filters': `bytes`, then the repacking of the
    /// stored elements when the packed element is not the stored one.
    pub(crate) fn element_codecs(&self) -> Vec<Value> {
        let mut codecs = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
        if self.keep != [(0, self.stored_bytes)] {
            // Right after `bytes`: it runs last when decoding, on the elements as stored.
            super::hdf5_codecs::register();
            let name = super::hdf5_codecs::REPACK;
            let config = json!({"element_bytes": self.stored_bytes, "keep": self.keep});
            codecs.push(json!({"name": name, "configuration": config}));
        }
        codecs
    }

    /// A Zarr `fill_value` of zeros (HDF5's default), for an array read whole, which has no
    /// unwritten chunk.
    pub(crate) fn zero_fill(&self) -> Value {
        let packed: u64 = self.keep.iter().map(|&(_, len)| len).sum();
        use base64::Engine;
        Value::from(base64::engine::general_purpose::STANDARD.encode(vec![0u8; packed as usize]))
    }

    /// The Zarr `fill_value` (base64 of a packed element) of unwritten chunks: the
    /// dataset's fill value, else HDF5's default (zeros).
    pub(crate) fn fill_value(&self, stored: &Stored) -> Result<Value, String> {
        let stored_fill = stored.fill_bytes(self.stored_bytes)?;
        let fill: Vec<u8> = (self.keep.iter())
            .flat_map(|&(at, len)| &stored_fill[at as usize..(at + len) as usize])
            .copied()
            .collect();
        use base64::Engine;
        Ok(base64::engine::general_purpose::STANDARD
            .encode(fill)
            .into())
    }
}

/// The byte ranges of a stored element that hold its members, in member order (adjacent
/// ones merged): what the packed Zarr element keeps (`netcdf/hdf5_codecs.rs`, `REPACK`).
#[derive(Debug, Default)]
struct Keep {
    ranges: Vec<(u64, u64)>,
}

/// Ranges an element may keep: a compound whose members leave more gaps than this is
/// refused, as the copy runs once per range and element.
const MAX_RANGES: usize = 4096;

impl Keep {
    fn push(&mut self, at: u64, len: u64) -> Result<(), String> {
        if let Some(last) = self.ranges.last_mut() {
            if last.0 + last.1 == at {
                last.1 += len;
                return Ok(());
            }
        }
        if self.ranges.len() >= MAX_RANGES {
            return Err(format!(
                "its compound type leaves more than {MAX_RANGES} gaps between members"
            ));
        }
        self.ranges.push((at, len));
        Ok(())
    }
}

/// Bytes HDF5 stores an element of type `t` in.
fn stored_size(t: &Datatype) -> Result<u64, String> {
    Ok(match t {
        Datatype::FixedPoint { size, .. }
        | Datatype::FloatingPoint { size, .. }
        | Datatype::Bitfield { size, .. }
        | Datatype::Reference { size, .. } => u64::from(*size),
        Datatype::String {
            size: StringSize::Fixed(n),
            ..
        } => u64::from(*n),
        Datatype::Opaque { size, .. } | Datatype::Compound { size, .. } => u64::from(*size),
        Datatype::Enum { base, .. } => stored_size(base)?,
        Datatype::Array { base, dims } => (dims.iter())
            .try_fold(stored_size(base)?, |n, &d| n.checked_mul(d))
            .ok_or("an array type larger than 2^64 bytes")?,
        Datatype::String { .. } | Datatype::VarLen { .. } => 16,
    })
}

/// The NumPy dtype h5py reads HDF5 type `t` as (a typestring, or a structured dtype's field
/// list — members in their order, packed), the bytes it keeps of an element stored at `at`
/// added to `keep`. `member` names the compound member being read ("" at the top), for
/// messages.
fn numpy_dtype(t: &Datatype, member: &str, at: u64, keep: &mut Keep) -> Result<Value, String> {
    let of = || match member {
        "" => String::new(),
        m => format!(" (member '{m}')"),
    };
    let order = |o: &ByteOrder, size: u8| match (o, size) {
        (_, 1) => '|',
        (ByteOrder::BigEndian, _) => '>',
        _ => '<',
    };
    let mut typestr = |s: String, size: u64| {
        keep.push(at, size)?;
        Ok(Value::String(s))
    };
    match t {
        Datatype::FixedPoint {
            size,
            signed,
            byte_order,
        } if matches!(size, 1 | 2 | 4 | 8) => {
            let kind = if *signed { 'i' } else { 'u' };
            typestr(
                format!("{}{kind}{size}", order(byte_order, *size)),
                *size as u64,
            )
        }
        Datatype::FloatingPoint { size, byte_order } if matches!(size, 2 | 4 | 8) => {
            typestr(format!("{}f{size}", order(byte_order, *size)), *size as u64)
        }
        // h5py reads fixed-length strings as bytes (`S`), whatever their encoding.
        Datatype::String {
            size: StringSize::Fixed(n),
            ..
        } if *n > 0 => typestr(format!("|S{n}"), u64::from(*n)),
        Datatype::Opaque { size, .. } if *size > 0 => {
            typestr(format!("|V{size}"), u64::from(*size))
        }
        // h5py's bool is an int8 enum {FALSE: 0, TRUE: 1}; other enums read as their base.
        Datatype::Enum { base, members } => {
            let is_bool = members.len() == 2
                && members.iter().any(|m| m.name == "FALSE" && m.value == [0])
                && members.iter().any(|m| m.name == "TRUE" && m.value == [1]);
            match (is_bool, base.as_ref()) {
                (true, Datatype::FixedPoint { size: 1, .. }) => typestr("|b1".into(), 1),
                _ => numpy_dtype(base, member, at, keep),
            }
        }
        Datatype::Compound { size, fields } => {
            let size = u64::from(*size);
            let mut used: Vec<(u64, u64)> = Vec::with_capacity(fields.len());
            let mut out = Vec::with_capacity(fields.len());
            for field in fields {
                let path = match member {
                    "" => field.name.clone(),
                    m => format!("{m}.{}", field.name),
                };
                let offset = u64::from(field.byte_offset);
                let len = stored_size(&field.datatype)?;
                if offset.checked_add(len).is_none_or(|end| end > size) {
                    return Err(format!(
                        "member '{path}' (bytes {offset}..+{len}) ends past its compound \
                         type's {size} bytes"
                    ));
                }
                if used
                    .iter()
                    .any(|&(o, l)| offset < o + l && o < offset + len)
                {
                    return Err(format!("member '{path}' overlaps another member"));
                }
                used.push((offset, len));
                let start = at + offset;
                let entry = match &field.datatype {
                    Datatype::Array { base, dims } => {
                        let dtype = keep_array(base, dims, &path, start, keep)?;
                        json!([field.name, dtype, dims])
                    }
                    other => json!([field.name, numpy_dtype(other, &path, start, keep)?]),
                };
                out.push(entry);
            }
            Ok(Value::Array(out))
        }
        Datatype::String {
            size: StringSize::Variable,
            ..
        }
        | Datatype::VarLen { .. } => Err(format!(
            "its type{} is variable-length, which ndfusion does not read yet",
            of()
        )),
        other => Err(format!(
            "its type{} ({other:?}) is not one ndfusion reads",
            of()
        )),
    }
}

/// The NumPy dtype of the items of an HDF5 array type (`base` items, `dims` of them) stored
/// at `at`, each item's kept bytes added to `keep`. `path` names the member in messages.
fn keep_array(
    base: &Datatype,
    dims: &[u64],
    path: &str,
    at: u64,
    keep: &mut Keep,
) -> Result<Value, String> {
    let item_size = stored_size(base)?;
    let count = (dims.iter())
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or("an array type of more than 2^64 items")?;
    // One item's ranges, then repeated for the others.
    let mut item = Keep::default();
    let dtype = numpy_dtype(base, path, 0, &mut item)?;
    if item.ranges == [(0, item_size)] {
        keep.push(at, item_size.saturating_mul(count))?;
    } else {
        if count.saturating_mul(item.ranges.len() as u64) > MAX_RANGES as u64 {
            return Err(format!(
                "member '{path}': its items leave more than {MAX_RANGES} gaps"
            ));
        }
        for i in 0..count {
            for &(o, l) in &item.ranges {
                keep.push(at + i * item_size + o, l)?;
            }
        }
    }
    Ok(dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdf5_reader::messages::datatype::CompoundField;

    fn int(size: u8, order: ByteOrder) -> Datatype {
        Datatype::FixedPoint {
            size,
            signed: true,
            byte_order: order,
        }
    }

    /// An array member read on its own is a subarray of its item type, in the item's order.
    #[test]
    fn an_array_member_on_its_own_is_a_subarray() {
        let t = Datatype::Array {
            base: Box::new(int(2, ByteOrder::BigEndian)),
            dims: vec![2, 3],
        };
        let member = NumpyType::of_member(&t).unwrap();
        assert_eq!(
            member.data_type(),
            json!({"name": NUMPY_DTYPE, "configuration": {"dtype": ">i2", "shape": [2, 3]}})
        );
        assert_eq!(
            (member.stored_bytes, member.keep.as_slice()),
            (12, &[(0, 12)][..])
        );
        let element = crate::zarr::metadata::data_type::parse_data_type(
            &member.data_type(),
            crate::zarr::metadata::element::ByteOrder::Little,
        )
        .unwrap();
        assert_eq!(
            element.arrow_type().to_string(),
            "FixedSizeList(2 x non-null FixedSizeList(3 x non-null Int16))"
        );
        assert!(NumpyType::of(&t).is_err());
    }

    #[test]
    fn compound_types_become_structured_dtypes_keeping_their_members_bytes() {
        let packed = Datatype::Compound {
            size: 6,
            fields: vec![
                CompoundField {
                    name: "a".into(),
                    byte_offset: 0,
                    datatype: int(4, ByteOrder::BigEndian),
                },
                CompoundField {
                    name: "b".into(),
                    byte_offset: 4,
                    datatype: Datatype::Array {
                        base: Box::new(int(1, ByteOrder::LittleEndian)),
                        dims: vec![2],
                    },
                },
            ],
        };
        let mut keep = Keep::default();
        let dtype = numpy_dtype(&packed, "", 0, &mut keep).unwrap();
        assert_eq!(dtype, json!([["a", ">i4"], ["b", "|i1", [2]]]));
        assert_eq!(keep.ranges, [(0, 6)]);
        // A gap, and members out of offset order: packed in member order.
        let gap = Datatype::Compound {
            size: 16,
            fields: vec![
                CompoundField {
                    name: "b".into(),
                    byte_offset: 8,
                    datatype: int(8, ByteOrder::LittleEndian),
                },
                CompoundField {
                    name: "a".into(),
                    byte_offset: 0,
                    datatype: int(1, ByteOrder::LittleEndian),
                },
            ],
        };
        let mut keep = Keep::default();
        let dtype = numpy_dtype(&gap, "", 0, &mut keep).unwrap();
        assert_eq!(dtype, json!([["b", "<i8"], ["a", "|i1"]]));
        assert_eq!(keep.ranges, [(8, 8), (0, 1)]);
        assert_eq!(stored_size(&gap).unwrap(), 16);
        // Members past the end, and overlapping, are refused.
        let past = Datatype::Compound {
            size: 4,
            fields: vec![CompoundField {
                name: "x".into(),
                byte_offset: 2,
                datatype: int(4, ByteOrder::LittleEndian),
            }],
        };
        let err = numpy_dtype(&past, "", 0, &mut Keep::default()).unwrap_err();
        assert!(err.contains("member 'x' (bytes 2..+4) ends past"), "{err}");
        let overlap = Datatype::Compound {
            size: 8,
            fields: vec![
                CompoundField {
                    name: "x".into(),
                    byte_offset: 0,
                    datatype: int(4, ByteOrder::LittleEndian),
                },
                CompoundField {
                    name: "y".into(),
                    byte_offset: 2,
                    datatype: int(4, ByteOrder::LittleEndian),
                },
            ],
        };
        let err = numpy_dtype(&overlap, "", 0, &mut Keep::default()).unwrap_err();
        assert!(err.contains("member 'y' overlaps"), "{err}");
    }
}
