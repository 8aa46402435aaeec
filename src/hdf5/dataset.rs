//! One HDF5 dataset laid out as a Zarr array at the root of the file's store: the array h5py
//! reads (`f[path][()]`), element for element. Its data type is the NumPy dtype h5py gives
//! it, as ndfusion's `ndfusion.numpy_dtype` (`zarr/metadata/data_type.rs`): a compound is a
//! structured dtype (nested compounds nest, array members are subarrays, each member keeps
//! its byte order), so the array table reads it by the rules of Zarr struct arrays; its
//! chunks, filters and fill value are placed as a netCDF-4 variable's are
//! (`netcdf/nc4.rs::place`).

use hdf5_reader::group::Group;
use hdf5_reader::messages::datatype::{Datatype, StringSize};
use hdf5_reader::{ByteOrder, Dataset, Hdf5File};
use netcdf_reader::NcMetadataMode;
use serde_json::{json, Value};

use crate::netcdf::classic::attributes_json;
use crate::netcdf::layout::{Layout, Source};
use crate::netcdf::nc4::{place, stored, Placed};
use crate::zarr::metadata::data_type::NUMPY_DTYPE;

/// The layout of dataset `ds` (at `path`, in group `parent`) of `h5`, a file of `file_len`
/// bytes: `zarr.json` at the root and the dataset's chunks under the root's keys.
pub(crate) fn dataset_layout(
    h5: &Hdf5File,
    parent: &Group,
    ds: &Dataset,
    path: &str,
    file_len: u64,
) -> Result<Layout, String> {
    let at = |why: String| format!("dataset '{path}': {why}");
    let stored = stored(h5, ds.address()).map_err(at)?;
    let mut keep = Keep::default();
    let dtype = numpy_dtype(&stored.datatype, "", 0, &mut keep).map_err(at)?;
    // Stored elements (with any bytes between members) and the packed Zarr element.
    let elem = stored_size(&stored.datatype).map_err(at)?;
    let repack = keep.ranges != [(0, elem)];
    if matches!(stored.datatype, Datatype::Array { .. }) {
        return Err(at(
            "its type is an HDF5 array type, which ndfusion does not read as a \
                       table yet (array members of a compound type are read)"
                .into(),
        ));
    }
    let shape = ds.shape().to_vec();
    let base = h5.superblock().base_address;
    let Placed {
        chunks,
        source,
        codecs,
    } = place(h5, &stored, &shape, elem, base, file_len).map_err(at)?;
    let stored_fill = match stored.fill.as_ref().and_then(|f| f.value.as_ref()) {
        Some(value) if value.len() as u64 == elem => value.clone(),
        Some(value) => {
            return Err(at(format!(
                "its fill value holds {} bytes, an element {elem}",
                value.len()
            )))
        }
        None => vec![0; elem as usize],
    };
    let fill: Vec<u8> = (keep.ranges.iter())
        .flat_map(|&(at, len)| {
            stored_fill[at as usize..(at + len) as usize]
                .iter()
                .copied()
        })
        .collect();
    let dims = dimension_names(h5, parent, ds).map_err(at)?;
    let attributes =
        netcdf_reader::nc4::attributes::extract_variable_attributes(ds, NcMetadataMode::Strict)
            .map_err(|e| at(format!("its attributes: {e}")))?;
    let mut codecs_all = vec![json!({"name": "bytes", "configuration": {"endian": "little"}})];
    if repack {
        // Right after `bytes`: it runs last when decoding, on the elements as stored.
        crate::netcdf::hdf5_codecs::register();
        let name = crate::netcdf::hdf5_codecs::REPACK;
        let config = json!({"element_bytes": elem, "keep": keep.ranges});
        codecs_all.push(json!({"name": name, "configuration": config}));
    }
    codecs_all.extend(codecs);
    let zarr_json = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": {"name": NUMPY_DTYPE, "configuration": {"dtype": dtype}},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
        "fill_value": base64(&fill),
        "codecs": codecs_all,
        "attributes": Value::Object(attributes_json(&attributes, None)),
        "dimension_names": dims,
    });
    Ok(root_array(zarr_json, source))
}

/// A layout holding one array, at the root.
fn root_array(zarr_json: Value, source: Source) -> Layout {
    let mut layout = Layout {
        documents: Default::default(),
        variables: Default::default(),
        order: Vec::new(),
    };
    layout
        .documents
        .insert("zarr.json".into(), zarr_json.to_string().into_bytes());
    layout.variables.insert(String::new(), source);
    layout
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
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
                        let item_size = stored_size(base)?;
                        let count = len / item_size.max(1);
                        // One item's ranges, then repeated for the others.
                        let mut item = Keep::default();
                        let dtype = numpy_dtype(base, &path, 0, &mut item)?;
                        if item.ranges == [(0, item_size)] {
                            keep.push(start, len)?;
                        } else {
                            if (count as usize).saturating_mul(item.ranges.len()) > MAX_RANGES {
                                return Err(format!(
                                    "member '{path}': its items leave more than {MAX_RANGES} gaps"
                                ));
                            }
                            for i in 0..count {
                                for &(o, l) in &item.ranges {
                                    keep.push(start + i * item_size + o, l)?;
                                }
                            }
                        }
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

/// The names of `ds`'s dimensions: the name of the dimension scale attached to each (the
/// first, when several are), else `dim_<i>`, as h5py numbers them.
fn dimension_names(h5: &Hdf5File, parent: &Group, ds: &Dataset) -> Result<Vec<String>, String> {
    let rank = ds.ndim();
    let mut names: Vec<String> = (0..rank).map(|i| format!("dim_{i}")).collect();
    let Ok(list) = ds.attribute("DIMENSION_LIST") else {
        return Ok(names);
    };
    let offset_size = h5.superblock().offset_size;
    // Each dimension's entry: a vlen of object references (length, heap address, index).
    let entry_size = 4 + usize::from(offset_size) + 4;
    for (i, entry) in list
        .raw_data
        .chunks_exact(entry_size)
        .take(rank)
        .enumerate()
    {
        let bytes = ds
            .resolve_vlen_reference_bytes(entry, usize::from(offset_size))
            .map_err(|e| format!("its DIMENSION_LIST: {e}"))?;
        let refs = hdf5_reader::reference::read_object_references(&bytes, offset_size)
            .map_err(|e| format!("its DIMENSION_LIST: {e}"))?;
        let Some(&scale) = refs.first() else {
            continue;
        };
        if let Ok(Some(name)) = parent.child_name_by_address(scale) {
            names[i] = name;
        }
    }
    Ok(names)
}

/// The paths of the datasets below `root`, groups in the order `group_tree` walks them, at
/// most `max` (an error past that).
pub(crate) fn list_datasets(root: Group, max: usize) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for group in crate::netcdf::nc4::group_tree(root)? {
        for name in group.datasets {
            if out.len() >= max {
                return Err(format!("it holds more than {max} datasets"));
            }
            out.push(format!("{}/{name}", group.path.trim_end_matches('/')));
        }
    }
    Ok(out)
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
